//! The results section of the README, generated from a sweep's results folder so that every
//! number and every sentence in it follows from the shipped data (`posenc report`; a test
//! compares the README with it).
//!
//! For one window mode it prints a table of every model (scheme and variant) at every
//! evaluated length: the mean $\bar x$ and sample standard deviation over the seeds of the
//! loss in nats per byte ([`seed_summaries`]). With per-window losses it adds, for each model,
//! the change from the shortest evaluated length (the base models' training length) to the
//! longest, $\bar D = \bar x_{L_{max}} - \bar x_{L_{min}}$ (the same columns for every model),
//! with its standard error from paired windows and seeds ([`paired_difference`]), and sorts the models into those whose loss rises, falls or stays
//! within $z = 2$ standard errors.

use std::fmt::Write;

use crate::error::{ensure, invalid};
use crate::results::{ResultRow, WindowRow};
use crate::summary::{paired_difference, seed_summaries, SeedSummary, WindowKey};
use crate::Result;

/// Differences smaller than this many standard errors are reported as "within".
pub const Z: f64 = 2.0;

/// The markdown table (and, with `windows`, the change from the shortest length to the longest,
/// the same two columns for every model, and the sentence that sorts the models by it) of the rows of `mode`, models in the
/// order in which they first appear in `rows`, lengths ascending.
///
/// Cells print $\bar x \pm \mathrm{sd}$ to 3 decimals (the mean alone with one seed); the
/// last column $\bar D \pm \mathrm{se}$ with its sign.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] when no row has `mode`, when a model lacks a length that
/// another has, when its seeds differ between lengths, or for what [`seed_summaries`] and
/// [`paired_difference`] refuse.
pub fn results_markdown(
    rows: &[ResultRow],
    windows: Option<&[WindowRow]>,
    mode: &str,
) -> Result<String> {
    let rows: Vec<ResultRow> = rows.iter().filter(|r| r.mode == mode).cloned().collect();
    ensure(
        !rows.is_empty(),
        "mode",
        mode,
        "a mode of the results (nonoverlap or sliding)",
    )?;
    let summaries = seed_summaries(&rows)?;
    let mut lengths: Vec<usize> = summaries.iter().map(|s| s.eval_len).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let models = models_in_order(&summaries);
    // Lengths are labelled as multiples of the shortest training length (the base models';
    // a fine-tune trained longer is read against the same columns).
    let train_len = summaries.iter().map(|s| s.train_len).min().unwrap_or(0);

    let mut out = String::new();
    let header: Vec<String> = lengths
        .iter()
        .map(|&l| {
            if train_len > 0 && l % train_len == 0 {
                format!("{l} ({}x)", l / train_len)
            } else {
                l.to_string()
            }
        })
        .collect();
    // The change column compares every model's longest and shortest columns, whatever length
    // the model itself was trained at.
    let (shortest, longest) = (lengths[0], lengths[lengths.len() - 1]);
    let change = format!("{longest} − {shortest}");
    let _ = write!(out, "| model | seeds | {} |", header.join(" | "));
    if windows.is_some() {
        let _ = write!(out, " {change} |");
    }
    out.push('\n');
    let columns = lengths.len() + 2 + usize::from(windows.is_some());
    out.push_str(&"|---".repeat(columns));
    out.push_str("|\n");

    let mut verdicts: [Vec<String>; 3] = Default::default();
    for (scheme, variant) in &models {
        let cells: Vec<&SeedSummary> = lengths
            .iter()
            .map(|&l| {
                summaries
                    .iter()
                    .find(|s| &s.scheme == scheme && &s.variant == variant && s.eval_len == l)
                    .ok_or_else(|| {
                        invalid(
                            "rows",
                            format!("{scheme}/{variant} without length {l} in {mode}"),
                            "every model at every length",
                        )
                    })
            })
            .collect::<Result<_>>()?;
        let seeds = &cells[0].seeds;
        if let Some(c) = cells.iter().find(|c| &c.seeds != seeds) {
            return Err(invalid(
                "seeds",
                format!(
                    "{:?} at length {} against {:?} at {} for {}",
                    c.seeds,
                    c.eval_len,
                    seeds,
                    cells[0].eval_len,
                    c.label()
                ),
                "the same seeds at every length of a model",
            ));
        }
        let label = cells[0].label();
        let values: Vec<String> = cells.iter().map(|c| mean_sd(c)).collect();
        let _ = write!(
            out,
            "| {label} | {} | {} |",
            seeds.len(),
            values.join(" | ")
        );
        if let Some(windows) = windows {
            let a = WindowKey::new(scheme, variant, mode, longest);
            let b = WindowKey::new(scheme, variant, mode, shortest);
            let d = paired_difference(windows, &a, &b)?;
            let _ = write!(out, " {:+.3} ± {:.3} |", d.mean, d.se);
            let which = if !d.exceeds(Z) {
                1
            } else if d.mean > 0.0 {
                0
            } else {
                2
            };
            verdicts[which].push(format!("`{label}`"));
        }
        out.push('\n');
    }
    if windows.is_some() {
        let _ = write!(
            out,
            "\nFrom {shortest} to {longest} bytes (the change ± its standard error, paired over \
             windows and seeds; a verdict needs more than {Z} standard errors) the loss rises \
             for {}; it stays within {Z} standard errors for {}; it falls for {}.\n",
            list(&verdicts[0]),
            list(&verdicts[1]),
            list(&verdicts[2]),
        );
    }
    Ok(out)
}

/// (scheme, variant) of every model, in order of first appearance.
fn models_in_order(summaries: &[SeedSummary]) -> Vec<(String, String)> {
    let mut models: Vec<(String, String)> = Vec::new();
    for s in summaries {
        let key = (s.scheme.clone(), s.variant.clone());
        if !models.contains(&key) {
            models.push(key);
        }
    }
    models
}

/// `1.234 ± 0.005`, or `1.234` with one seed.
fn mean_sd(s: &SeedSummary) -> String {
    if s.seeds.len() > 1 {
        format!("{:.3} ± {:.3}", s.mean, s.sd)
    } else {
        format!("{:.3}", s.mean)
    }
}

/// `a, b and c`, or `no model`.
fn list(items: &[String]) -> String {
    match items {
        [] => "no model".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(scheme: &str, seed: u64, eval_len: usize, x: f64) -> ResultRow {
        ResultRow::example(scheme, "base", eval_len, seed, x)
    }

    fn window(scheme: &str, seed: u64, eval_len: usize, start: usize, x: f64) -> WindowRow {
        let key = WindowKey::new(scheme, "base", "nonoverlap", eval_len);
        crate::summary::window(&key, seed, start, eval_len, x)
    }

    #[test]
    fn table_has_mean_and_sd_over_seeds_and_the_paired_change() {
        // a: 1.0/1.2 at 128, 2.0/2.4 at 256 -> means 1.1, 2.2; sd 0.141, 0.283
        let rows = vec![
            row("a", 0, 128, 1.0),
            row("a", 1, 128, 1.2),
            row("a", 0, 256, 2.0),
            row("a", 1, 256, 2.4),
            row("b", 0, 128, 1.0),
            row("b", 1, 128, 1.0),
            row("b", 0, 256, 1.0),
            row("b", 1, 256, 1.0),
        ];
        // Two windows per seed; a's windows rise by 1.0 and 1.2 (seed 0), 1.1 and 1.3 (seed 1);
        // b's do not move.
        let mut windows = Vec::new();
        for (seed, lo, hi) in [(0, [0.9, 1.1], [1.9, 2.3]), (1, [1.1, 1.3], [2.2, 2.6])] {
            for w in 0..2 {
                windows.push(window("a", seed, 128, w * 256, lo[w]));
                windows.push(window("a", seed, 256, w * 256, hi[w]));
                windows.push(window("b", seed, 128, w * 256, 1.0));
                windows.push(window("b", seed, 256, w * 256, 1.0));
            }
        }
        let md = results_markdown(&rows, Some(&windows), "nonoverlap").unwrap();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            "| model | seeds | 128 (1x) | 256 (2x) | 256 − 128 |"
        );
        assert_eq!(lines[1], "|---|---|---|---|---|");
        // By hand: D_0 = 2.1 - 1.0 = 1.1 and D_1 = 2.4 - 1.2 = 1.2, mean 1.15; each window's
        // contribution e_w = (d_w - D_s)/2 is -0.05, +0.05 for both seeds, so
        // se_windows = sqrt(2 * (0.05^2 + 0.05^2)) = 0.1; se_seeds = sd(1.1, 1.2)/sqrt(2) = 0.05;
        // se = sqrt(0.1^2 + 0.05^2) = 0.1118.
        assert_eq!(
            lines[2],
            "| a | 2 | 1.100 ± 0.141 | 2.200 ± 0.283 | +1.150 ± 0.112 |"
        );
        assert_eq!(
            lines[3],
            "| b | 2 | 1.000 ± 0.000 | 1.000 ± 0.000 | +0.000 ± 0.000 |"
        );
        assert!(
            md.contains(
                "rises for `a`; it stays within 2 standard errors for `b`; it falls for no model."
            ),
            "{md}"
        );
    }

    #[test]
    fn one_seed_prints_the_mean_alone_and_no_windows_no_change_column() {
        let rows = vec![row("a", 0, 128, 1.23456), row("a", 0, 512, 2.0)];
        let md = results_markdown(&rows, None, "nonoverlap").unwrap();
        assert_eq!(
            md,
            "| model | seeds | 128 (1x) | 512 (4x) |\n|---|---|---|---|\n| a | 1 | 1.235 | 2.000 |\n"
        );
    }

    #[test]
    fn a_model_trained_longer_is_compared_on_the_same_columns() {
        // ft trained at 256: its change is still 256 - 128 (0.5), not 256 - 256 (0)
        let mut rows = vec![row("a", 0, 128, 1.0), row("a", 0, 256, 1.0)];
        for (l, x) in [(128, 1.0), (256, 1.5)] {
            rows.push(ResultRow {
                train_len: 256,
                ..ResultRow::example("a", "ft", l, 0, x)
            });
        }
        let mut windows = Vec::new();
        for (variant, lo, hi) in [("base", 1.0, 1.0), ("ft", 1.0, 1.5)] {
            for (l, x) in [(128, lo), (256, hi)] {
                for start in [0, 256] {
                    let key = WindowKey::new("a", variant, "nonoverlap", l);
                    windows.push(crate::summary::window(&key, 0, start, l, x));
                }
            }
        }
        let md = results_markdown(&rows, Some(&windows), "nonoverlap").unwrap();
        assert!(
            md.starts_with("| model | seeds | 128 (1x) | 256 (2x) | 256 − 128 |\n"),
            "{md}"
        );
        assert!(
            md.contains("| a/ft | 1 | 1.000 | 1.500 | +0.500 ± 0.000 |"),
            "{md}"
        );
        assert!(md.contains("From 128 to 256 bytes"), "{md}");
    }

    #[test]
    fn a_training_length_of_zero_labels_lengths_without_a_multiple() {
        let mut r = row("a", 0, 128, 1.0);
        r.train_len = 0;
        let md = results_markdown(&[r], None, "nonoverlap").unwrap();
        assert!(md.starts_with("| model | seeds | 128 |\n"), "{md}");
    }

    #[test]
    fn missing_lengths_seeds_and_modes_are_errors() {
        let rows = vec![
            row("a", 0, 128, 1.0),
            row("a", 0, 256, 1.0),
            row("b", 0, 128, 1.0),
        ];
        let e = results_markdown(&rows, None, "nonoverlap").unwrap_err();
        assert!(e.to_string().contains("b/base without length 256"), "{e}");
        let rows = vec![
            row("a", 0, 128, 1.0),
            row("a", 1, 128, 1.0),
            row("a", 0, 256, 1.0),
        ];
        let e = results_markdown(&rows, None, "nonoverlap").unwrap_err();
        assert!(e.to_string().contains("the same seeds"), "{e}");
        let e = results_markdown(&rows, None, "sliding").unwrap_err();
        assert!(e.to_string().contains("sliding"), "{e}");
    }
}
