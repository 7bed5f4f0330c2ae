//! The results section of the README, generated from a sweep's results folder so that every
//! number and every sentence in it follows from the shipped data (`posenc report`; a test
//! compares the README with it): the [`ResultsTable`] of one window mode as markdown and, with
//! per-window losses, the sentence that sorts the models into those whose loss rises, falls or
//! stays within $z = 2$ standard errors from the shortest length to the longest.

use std::fmt::Write;
use std::path::Path;

use super::files::read_results_dir;
use super::rows::{Mode, ResultRow, WindowRow};
use super::table::{ResultsTable, Verdict, Z};
use crate::error::invalid;
use crate::Result;

/// The markdown table (and, with `windows`, the change from the shortest length to the
/// longest, the same two columns for every model, and the sentence that sorts the models by
/// it) of the rows of `mode` (`nonoverlap` or `sliding`): [`ResultsTable::new`] rendered by
/// [`table_markdown`].
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a mode that is neither, and as
/// [`ResultsTable::new`].
pub fn results_markdown(
    rows: &[ResultRow],
    windows: Option<&[WindowRow]>,
    mode: &str,
) -> Result<String> {
    let mode = [Mode::Nonoverlap, Mode::Sliding]
        .into_iter()
        .find(|m| m.name() == mode)
        .ok_or_else(|| {
            invalid(
                "mode",
                mode,
                "a mode of the results (nonoverlap or sliding)",
            )
        })?;
    Ok(table_markdown(&ResultsTable::new(rows, windows, mode)?))
}

/// `posenc report`: [`results_markdown`] of the results folder `dir` (`ppl_vs_length.csv` and,
/// when there is one, its `windows/` folder, which adds the paired change), without the final
/// newline.
///
/// # Errors
/// As [`read_results_dir`] and [`results_markdown`].
pub fn report(dir: &Path, mode: &str) -> Result<String> {
    let (rows, windows) = read_results_dir(dir)?;
    let markdown = results_markdown(&rows, windows.as_deref(), mode)?;
    Ok(markdown.trim_end().to_string())
}

/// The table as markdown: [`ResultsTable::header`], a rule, a line per row of
/// [`ResultsTable::cells`]; with the change column, a paragraph naming the models by
/// [`Verdict`].
pub fn table_markdown(table: &ResultsTable) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let header = table.header();
    let mut out = line(&header);
    out.push_str(&"|---".repeat(header.len()));
    out.push_str("|\n");
    for cells in table.cells() {
        out.push_str(&line(&cells));
    }
    if table.has_change() {
        let (shortest, longest) = table.span();
        let named = |v| list(&table.with_verdict(v));
        let _ = write!(
            out,
            "\nFrom {shortest} to {longest} bytes (the change ± its standard error, paired over \
             windows and seeds; a verdict needs more than {Z} standard errors) the loss rises \
             for {}; it stays within {Z} standard errors for {}; it falls for {}.\n",
            named(Verdict::Rises),
            named(Verdict::Within),
            named(Verdict::Falls),
        );
    }
    out
}

/// `` `a`, `b` and `c` ``, or `no model`.
fn list(labels: &[String]) -> String {
    let items: Vec<String> = labels.iter().map(|l| format!("`{l}`")).collect();
    match items.as_slice() {
        [] => "no model".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::rows::Scheme;
    use crate::results::stats::{window as window_of, WindowKey};

    // two models of the tables below
    const A: Scheme = Scheme::Alibi;
    const B: Scheme = Scheme::T5;

    fn row(scheme: Scheme, seed: u64, eval_len: usize, x: f64) -> ResultRow {
        ResultRow::example(scheme, "base", eval_len, seed, x)
    }

    fn window(scheme: Scheme, seed: u64, eval_len: usize, start: usize, x: f64) -> WindowRow {
        let key = WindowKey::new(scheme, "base", Mode::Nonoverlap, eval_len);
        window_of(&key, seed, start, eval_len, x)
    }

    #[test]
    fn table_has_mean_and_sd_over_seeds_and_the_paired_change() {
        // a: 1.0/1.2 at 128, 2.0/2.4 at 256 -> means 1.1, 2.2; sd 0.141, 0.283
        let rows = vec![
            row(A, 0, 128, 1.0),
            row(A, 1, 128, 1.2),
            row(A, 0, 256, 2.0),
            row(A, 1, 256, 2.4),
            row(B, 0, 128, 1.0),
            row(B, 1, 128, 1.0),
            row(B, 0, 256, 1.0),
            row(B, 1, 256, 1.0),
        ];
        // Two windows per seed; a's windows rise by 1.0 and 1.2 (seed 0), 1.1 and 1.3 (seed 1);
        // b's do not move.
        let mut windows = Vec::new();
        for (seed, lo, hi) in [(0, [0.9, 1.1], [1.9, 2.3]), (1, [1.1, 1.3], [2.2, 2.6])] {
            for w in 0..2 {
                windows.push(window(A, seed, 128, w * 256, lo[w]));
                windows.push(window(A, seed, 256, w * 256, hi[w]));
                windows.push(window(B, seed, 128, w * 256, 1.0));
                windows.push(window(B, seed, 256, w * 256, 1.0));
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
            "| alibi | 2 | 1.100 ± 0.141 | 2.200 ± 0.283 | +1.150 ± 0.112 |"
        );
        assert_eq!(
            lines[3],
            "| t5 | 2 | 1.000 ± 0.000 | 1.000 ± 0.000 | +0.000 ± 0.000 |"
        );
        assert!(
            md.contains(
                "rises for `alibi`; it stays within 2 standard errors for `t5`; it falls for no model."
            ),
            "{md}"
        );
    }

    #[test]
    fn one_seed_prints_the_mean_alone_and_no_windows_no_change_column() {
        let rows = vec![row(A, 0, 128, 1.23456), row(A, 0, 512, 2.0)];
        let md = results_markdown(&rows, None, "nonoverlap").unwrap();
        assert_eq!(
            md,
            "| model | seeds | 128 (1x) | 512 (4x) |\n|---|---|---|---|\n| alibi | 1 | 1.235 | 2.000 |\n"
        );
    }

    #[test]
    fn a_model_trained_longer_is_compared_on_the_same_columns() {
        // ft trained at 256: its change is still 256 - 128 (0.5), not 256 - 256 (0)
        let mut rows = vec![row(A, 0, 128, 1.0), row(A, 0, 256, 1.0)];
        for (l, x) in [(128, 1.0), (256, 1.5)] {
            rows.push(ResultRow {
                train_len: 256,
                ..ResultRow::example(A, "ft", l, 0, x)
            });
        }
        let mut windows = Vec::new();
        for (variant, lo, hi) in [("base", 1.0, 1.0), ("ft", 1.0, 1.5)] {
            for (l, x) in [(128, lo), (256, hi)] {
                for start in [0, 256] {
                    let key = WindowKey::new(A, variant, Mode::Nonoverlap, l);
                    windows.push(window_of(&key, 0, start, l, x));
                }
            }
        }
        let md = results_markdown(&rows, Some(&windows), "nonoverlap").unwrap();
        assert!(
            md.starts_with("| model | seeds | 128 (1x) | 256 (2x) | 256 − 128 |\n"),
            "{md}"
        );
        assert!(
            md.contains("| alibi/ft | 1 | 1.000 | 1.500 | +0.500 ± 0.000 |"),
            "{md}"
        );
        assert!(md.contains("From 128 to 256 bytes"), "{md}");
    }

    #[test]
    fn a_training_length_of_zero_labels_lengths_without_a_multiple() {
        let mut r = row(A, 0, 128, 1.0);
        r.train_len = 0;
        let md = results_markdown(&[r], None, "nonoverlap").unwrap();
        assert!(md.starts_with("| model | seeds | 128 |\n"), "{md}");
    }

    #[test]
    fn missing_lengths_seeds_and_modes_are_errors() {
        let rows = vec![
            row(A, 0, 128, 1.0),
            row(A, 0, 256, 1.0),
            row(B, 0, 128, 1.0),
        ];
        let e = results_markdown(&rows, None, "nonoverlap").unwrap_err();
        assert!(e.to_string().contains("t5/base without length 256"), "{e}");
        let rows = vec![
            row(A, 0, 128, 1.0),
            row(A, 1, 128, 1.0),
            row(A, 0, 256, 1.0),
        ];
        let e = results_markdown(&rows, None, "nonoverlap").unwrap_err();
        assert!(e.to_string().contains("the same seeds"), "{e}");
        let e = results_markdown(&rows, None, "sliding").unwrap_err();
        assert!(e.to_string().contains("sliding"), "{e}");
        let e = results_markdown(&rows, None, "bogus")
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "invalid mode = bogus: allowed is a mode of the results (nonoverlap or sliding)"
        );
    }
}
