//! The results section of the README and its page of details, generated from a sweep's
//! results folder so that every number and every sentence in them follows from the shipped
//! data (`posenc report`, [`mod@super::report`]; a test compares the documents with it): the
//! [`ResultsTable`] of one window mode as markdown with,
//! given per-window losses, the sentences that sort the models by the verdicts of its tests
//! (a $t$ test over seeds, Holm-corrected across the table, beside a bootstrap over the text),
//! the test of each change against a reference model's, and, given the validation curves, what
//! every training run gained over its last 20 % of steps ([`plateau_markdown`]).

use std::fmt::Write;

use super::curves::{Plateau, PLATEAU_GAIN};
use super::inference::{holm_critical_t, Verdict, ALPHA, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED};
use super::rows::{Mode, ModelKey, ResultRow, WindowRow};
use super::stats::mean_and_sd;
use super::table::ResultsTable;
use crate::named::Named;
use crate::Result;

/// The markdown table of the rows of `mode` (`matched`, `nonoverlap` or `sliding`) and, with
/// `windows`, its tests and their sentences, without a reference model:
/// [`ResultsTable::new`] rendered by [`table_markdown`].
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a mode that is none of them, and as
/// [`ResultsTable::new`].
pub fn results_markdown(
    rows: &[ResultRow],
    windows: Option<&[WindowRow]>,
    mode: &str,
) -> Result<String> {
    let mode = Mode::from_name(mode)?;
    Ok(table_markdown(&ResultsTable::new(rows, windows, mode)?))
}

/// The mode `posenc report` shows when none is named: the first of `matched` (the primary
/// metric), `nonoverlap` and `sliding` that the rows have.
pub fn primary_mode(rows: &[ResultRow]) -> Option<Mode> {
    Mode::ALL
        .into_iter()
        .find(|m| rows.iter().any(|r| r.mode == *m))
}

/// The table as markdown: [`main_markdown`], then, with a reference, [`reference_markdown`].
pub fn table_markdown(table: &ResultsTable) -> String {
    let mut out = main_markdown(table);
    out.push_str(&reference_markdown(table));
    out
}

/// The table without its reference: a line on the mode, [`ResultsTable::header`], a rule, a
/// line per row of [`ResultsTable::cells`]; with the change, a paragraph on its ranking,
/// uncertainties and verdicts naming the models by [`Verdict`].
pub fn main_markdown(table: &ResultsTable) -> String {
    let caveat = match table.mode {
        Mode::Matched => "",
        Mode::Nonoverlap => {
            " A secondary view: the first positions of a window, which have little context, \
             weigh L_max/L times more at length L than at L_max, and each length scores other \
             bytes (the `matched` mode scores the same bytes at every length)."
        }
        Mode::Sliding => " Each length scores the bytes of its own windows.",
    };
    let mut out = format!(
        "Loss in nats per byte, mean ± sd over training seeds; mode `{}`: {}.{caveat}\n\n",
        table.mode.name(),
        table.mode.summary()
    );
    out.push_str(&markdown_table(&table.header(), &table.cells()));
    if table.has_change() {
        let (shortest, longest) = table.span();
        let windows = table.rows[0]
            .change
            .as_ref()
            .map_or(0, |c| c.comparison.n_windows);
        let named = |v| list(&table.with_verdict(v));
        let _ = write!(
            out,
            "\nRows are ranked by the change from {shortest} to {longest} bytes. `se seeds` is \
             its standard error over the training seeds; `se text` the standard deviation of \
             its bootstrap over the {windows} windows ({BOOTSTRAP_RESAMPLES} resamples, seed \
             {BOOTSTRAP_SEED})."
        );
        // with no model of two seeds there is no test, and no sentence on verdicts
        if table.tests > 0 {
            let _ = write!(
                out,
                " {} The loss rises for {}; it falls for {}; no change is detected for {}.",
                rule(table),
                named(Verdict::Above),
                named(Verdict::Below),
                named(Verdict::NotDetected),
            );
        }
        let untested: Vec<String> = table
            .rows
            .iter()
            .filter(|r| r.change.as_ref().is_some_and(|c| c.p_holm.is_none()))
            .map(|r| r.model.label())
            .collect();
        if !untested.is_empty() {
            let _ = write!(out, " With one seed, untested: {}.", list(&untested));
        }
        out.push('\n');
    }
    out
}

/// The table's tests against its reference model ([`ResultsTable::reference_header`] over
/// [`ResultsTable::reference_cells`]) and their verdicts; empty without a reference.
pub fn reference_markdown(table: &ResultsTable) -> String {
    let mut out = String::new();
    if let Some(reference) = &table.reference {
        let label = reference.label();
        let _ = write!(
            out,
            "\nEach change against `{label}`'s (a difference of changes, tested in the same \
             family):\n\n"
        );
        out.push_str(&markdown_table(
            &table.reference_header(),
            &table.reference_cells(),
        ));
        let named = |v| list(&table.with_verdict_vs_reference(v));
        let _ = if table.tests > 0 {
            writeln!(
                out,
                "\nThe change is larger than `{label}`'s for {}; smaller for {}; no difference \
                 is detected for {}.",
                named(Verdict::Above),
                named(Verdict::Below),
                named(Verdict::NotDetected),
            )
        } else {
            writeln!(
                out,
                "\nWith one seed for every model, no difference is tested."
            )
        };
    }
    out
}

/// The sentence on the test: the level, the correction, the number of tests and, when every
/// test has the same degrees of freedom, the critical $|t|$ of Holm's first and last step.
fn rule(table: &ResultsTable) -> String {
    let mut dfs: Vec<usize> = table
        .rows
        .iter()
        .flat_map(|r| r.change.iter().chain(r.vs_reference.iter()))
        .filter(|t| t.p_holm.is_some())
        .map(|t| t.comparison.df)
        .collect();
    dfs.sort_unstable();
    dfs.dedup();
    let m = table.tests;
    let steps = match (
        dfs.as_slice(),
        holm_critical_t(m, dfs.first().copied().unwrap_or(0), ALPHA),
    ) {
        ([df], Ok(t)) if m > 1 => format!(
            " (with {} seeds, {df} degrees of freedom: |t| > {:.2} for the smallest p, down to \
             {:.3} for the largest)",
            df + 1,
            t[0],
            t[m - 1]
        ),
        ([df], Ok(t)) if m == 1 => format!(" (|t| > {:.3} with {df} degrees of freedom)", t[0]),
        _ => String::new(),
    };
    format!(
        "A verdict needs the two-sided t test over seeds (seeds − 1 degrees of freedom) to \
         reject at α = {ALPHA} after a Holm correction across the {m} tests of this table{steps}."
    )
}

/// What every training run gained over its last 20 % of steps, a row per model: its seeds,
/// last step, mean final validation loss, the gain of each seed (`–` without a validation
/// point at or before 80 % of the steps) and how many runs reached their plateau (gain below
/// [`PLATEAU_GAIN`]); then a sentence with the totals.
pub fn plateau_markdown(plateaus: &[Plateau]) -> String {
    let mut models: Vec<(ModelKey, Vec<&Plateau>)> = Vec::new();
    for p in plateaus {
        match models.iter_mut().find(|(k, _)| *k == p.model) {
            Some((_, runs)) => runs.push(p),
            None => models.push((p.model.clone(), vec![p])),
        }
    }
    let header = [
        "model",
        "seeds",
        "steps",
        "final validation loss",
        "gain over the last 20 %, by seed",
        "plateau",
    ]
    .map(String::from);
    let cells: Vec<Vec<String>> = models
        .iter()
        .map(|(model, runs)| {
            let mut steps: Vec<usize> = runs.iter().map(|r| r.last_step).collect();
            steps.dedup();
            let finals: Vec<f64> = runs.iter().map(|r| r.final_loss).collect();
            let gains: Vec<String> = runs
                .iter()
                .map(|r| r.gain().map_or("–".into(), |g| format!("{g:.3}")))
                .collect();
            let measured = runs.iter().filter(|r| r.reached().is_some()).count();
            let reached = runs.iter().filter(|r| r.reached() == Some(true)).count();
            vec![
                model.label(),
                runs.len().to_string(),
                steps
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                format!("{:.3}", mean_and_sd(&finals).0),
                gains.join(", "),
                if measured == 0 {
                    "–".to_string()
                } else {
                    format!("{reached} of {measured}")
                },
            ]
        })
        .collect();
    let mut out = format!(
        "Training: the validation loss each run gained over its last 20 % of steps (from its \
         last validation at or before 80 % of its steps to its last); a run has reached its \
         plateau when it gains less than {PLATEAU_GAIN:.3} nats per byte.\n\n"
    );
    out.push_str(&markdown_table(&header, &cells));
    out.push('\n');
    out.push_str(&plateau_summary(plateaus));
    out
}

/// The totals of [`plateau_markdown`] in one sentence: how many runs with a validation point
/// at or before 80 % of their steps gained less than [`PLATEAU_GAIN`] over the rest, and how
/// many had no such point.
pub fn plateau_summary(plateaus: &[Plateau]) -> String {
    let measured = plateaus.iter().filter(|p| p.reached().is_some()).count();
    let reached = plateaus
        .iter()
        .filter(|p| p.reached() == Some(true))
        .count();
    let mut out = format!("Runs on their plateau: {reached} of {measured} with a gain to measure");
    let unmeasured = plateaus.len() - measured;
    if unmeasured > 0 {
        let _ = write!(
            out,
            " (and {unmeasured} without a validation point before its last 20 %)"
        );
    }
    out.push_str(".\n");
    out
}

/// `header`, a rule and a line per row, as a markdown table.
pub(super) fn markdown_table(header: &[String], rows: &[Vec<String>]) -> String {
    let line = |cells: &[String]| format!("| {} |\n", cells.join(" | "));
    let mut out = line(header);
    out.push_str(&"|---".repeat(header.len()));
    out.push_str("|\n");
    for cells in rows {
        out.push_str(&line(cells));
    }
    out
}

/// `a, b, c`, or `none` when `names` is empty: the lists of models in the answers'
/// sentences.
pub(crate) fn joined_or_none(names: &[String]) -> String {
    match names.is_empty() {
        true => "none".to_string(),
        false => names.join(", "),
    }
}

/// `` `a`, `b` and `c` ``, or `no model`.
pub(super) fn list(labels: &[String]) -> String {
    let items: Vec<String> = labels.iter().map(|l| format!("`{l}`")).collect();
    match items.as_slice() {
        [] => "no model".into(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::results::curves::plateaus;
    use crate::results::paired::{window as window_of, WindowKey};
    use crate::results::rows::{CurveRow, Scheme};

    // two models of the tables below
    pub(in crate::results) const A: Scheme = Scheme::Alibi;
    pub(in crate::results) const B: Scheme = Scheme::T5;

    fn row(scheme: Scheme, seed: u64, eval_len: usize, x: f64) -> ResultRow {
        ResultRow::example(scheme, "base", eval_len, seed, x)
    }

    fn window(scheme: Scheme, seed: u64, eval_len: usize, start: usize, x: f64) -> WindowRow {
        let key = WindowKey::new(scheme, "base", Mode::Nonoverlap, eval_len);
        window_of(&key, seed, start, eval_len, x)
    }

    /// a: 1.0/1.2 at 128, 2.0/2.4 at 256; b flat at 1.0; two windows per seed: a's rise by
    /// 1.0 and 1.2 (seed 0), 1.1 and 1.3 (seed 1).
    pub(in crate::results) fn sample() -> (Vec<ResultRow>, Vec<WindowRow>) {
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
        let mut windows = Vec::new();
        for (seed, lo, hi) in [(0, [0.9, 1.1], [1.9, 2.3]), (1, [1.1, 1.3], [2.2, 2.6])] {
            for w in 0..2 {
                windows.push(window(A, seed, 128, w * 256, lo[w]));
                windows.push(window(A, seed, 256, w * 256, hi[w]));
                windows.push(window(B, seed, 128, w * 256, 1.0));
                windows.push(window(B, seed, 256, w * 256, 1.0));
            }
        }
        (rows, windows)
    }

    #[test]
    fn table_has_mean_and_sd_over_seeds_and_the_tested_change() {
        let (rows, windows) = sample();
        let md = results_markdown(&rows, Some(&windows), "nonoverlap").unwrap();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[0],
            "Loss in nats per byte, mean ± sd over training seeds; mode `nonoverlap`: Windows of \
             the longest length, prefixes of length L scored. A secondary view: the first \
             positions of a window, which have little context, weigh L_max/L times more at \
             length L than at L_max, and each length scores other bytes (the `matched` mode \
             scores the same bytes at every length)."
        );
        assert_eq!(
            lines[2],
            "| model | params | seeds | 128 (1x) | 256 (2x) | 256 − 128 | se seeds | se text | t | p Holm | verdict |"
        );
        assert_eq!(lines[3], "|---".repeat(11) + "|");
        // ranked: t5 (0) before alibi (+1.15).
        // alibi by hand: D_0 = 2.1 - 1.0 = 1.1 and D_1 = 2.4 - 1.2 = 1.2, mean 1.15;
        // se seeds = sd(1.1, 1.2) / sqrt 2 = 0.05; t = 23; 1 df: p = 1 - 2 atan(23)/pi = 0.0277,
        // two tests (t5's p = 1): Holm 2 x 0.0277 = 0.055, not detected.
        // se text: averaged over the seeds, the windows rise by 1.05 and 1.25; a resample's
        // change is 1.05, 1.15 or 1.25 with probabilities 1/4, 1/2, 1/4: se -> 0.0707
        assert_eq!(
            lines[4],
            "| t5 | 100 | 2 | 1.000 ± 0.000 | 1.000 ± 0.000 | +0.000 | 0.000 | 0.000 | +0.00 | 1.000 | not detected |"
        );
        assert!(
            lines[5].starts_with(
                "| alibi | 100 | 2 | 1.100 ± 0.141 | 2.200 ± 0.283 | +1.150 | 0.050 | "
            ),
            "{}",
            lines[5]
        );
        let se_text: f64 = lines[5].split(" | ").nth(7).unwrap().parse().unwrap();
        assert!((se_text - 0.005f64.sqrt()).abs() < 0.005, "{se_text}");
        assert!(
            lines[5].ends_with("| +23.00 | 0.055 | not detected |"),
            "{}",
            lines[5]
        );
        assert!(
            md.contains(
                "across the 2 tests of this table (with 2 seeds, 1 degrees of freedom: |t| > 25.45 \
                 for the smallest p, down to 12.706 for the largest)"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "The loss rises for no model; it falls for no model; no change is detected for \
                 `t5` and `alibi`."
            ),
            "{md}"
        );
        assert!(
            md.contains("over the 2 windows (2000 resamples, seed 0)"),
            "{md}"
        );
    }

    #[test]
    fn one_seed_prints_the_mean_alone_and_no_windows_no_change_column() {
        let rows = vec![row(A, 0, 128, 1.23456), row(A, 0, 512, 2.0)];
        let md = results_markdown(&rows, None, "nonoverlap").unwrap();
        assert!(
            md.ends_with(
                "| model | params | seeds | 128 (1x) | 512 (4x) |\n|---|---|---|---|---|\n| alibi | 100 | 1 | 1.235 | 2.000 |\n"
            ),
            "{md}"
        );
        // one seed with windows: the change without a test
        let windows = vec![
            window(A, 0, 128, 0, 1.2),
            window(A, 0, 512, 0, 2.0),
            window(A, 0, 128, 512, 1.26912),
            window(A, 0, 512, 512, 2.0),
        ];
        let md = results_markdown(&rows, Some(&windows), "nonoverlap").unwrap();
        // no spread over one seed: its se is not a zero but a dash, like t, p and the verdict
        assert!(md.contains("| +0.765 | – | 0.024 | – | – | – |"), "{md}");
        // no test at all: no sentence on the rule or the verdicts, only what is untested
        assert!(!md.contains("0 tests") && !md.contains("no model"), "{md}");
        assert!(
            md.contains("(2000 resamples, seed 0). With one seed, untested: `alibi`."),
            "{md}"
        );
        // against a reference, one seed each: the differences are shown, none is tested
        let mut rows = rows;
        rows.extend([row(B, 0, 128, 1.0), row(B, 0, 512, 1.5)]);
        let mut windows = windows;
        windows.extend([128, 512].iter().flat_map(|&l| {
            [0, 512].map(|start| window(B, 0, l, start, if l == 128 { 1.0 } else { 1.5 }))
        }));
        let md = against_t5(&rows, &windows);
        assert!(
            md.contains("With one seed for every model, no difference is tested."),
            "{md}"
        );
        assert!(!md.contains("no model"), "{md}");
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
            md.contains("| model | params | seeds | 128 (1x) | 256 (2x) | 256 − 128 |"),
            "{md}"
        );
        assert!(
            md.contains("| alibi/ft | 100 | 1 | 1.000 | 1.500 | +0.500 | – | 0.000 | – | – | – |"),
            "{md}"
        );
        assert!(md.contains("the change from 128 to 256 bytes"), "{md}");
    }

    #[test]
    fn a_training_length_of_zero_labels_lengths_without_a_multiple() {
        let mut r = row(A, 0, 128, 1.0);
        r.train_len = 0;
        let md = results_markdown(&[r], None, "nonoverlap").unwrap();
        assert!(md.contains("| model | params | seeds | 128 |\n"), "{md}");
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
            "invalid mode = bogus: allowed is matched, nonoverlap, sliding"
        );
    }

    #[test]
    fn the_primary_mode_is_matched_when_present() {
        let mut rows = vec![row(A, 0, 128, 1.0)];
        assert_eq!(primary_mode(&rows), Some(Mode::Nonoverlap));
        rows.push(ResultRow {
            mode: Mode::Sliding,
            ..row(A, 0, 128, 1.0)
        });
        assert_eq!(primary_mode(&rows), Some(Mode::Nonoverlap));
        rows.push(ResultRow {
            mode: Mode::Matched,
            ..row(A, 0, 128, 1.0)
        });
        assert_eq!(primary_mode(&rows), Some(Mode::Matched));
        assert_eq!(primary_mode(&[]), None);
    }

    /// The nonoverlap table of `rows` and `windows` with its tests against `t5`.
    fn against_t5(rows: &[ResultRow], windows: &[WindowRow]) -> String {
        let t5 = ModelKey::base(B);
        let table = ResultsTable::with_reference(rows, Some(windows), Mode::Nonoverlap, Some(&t5));
        table_markdown(&table.unwrap())
    }

    #[test]
    fn the_reference_table_names_the_differences_of_changes() {
        let (rows, windows) = sample();
        let md = against_t5(&rows, &windows);
        assert!(
            md.contains(
                "Each change against `t5`'s (a difference of changes, tested in the same family):"
            ),
            "{md}"
        );
        assert!(
            md.contains(
                "| model | seeds | change − t5's | se seeds | se text | t | p Holm | verdict |"
            ),
            "{md}"
        );
        // t5's change is 0: alibi's difference is its change again; three tests now,
        // Holm 3 x 0.0277 = 0.083 for the first of the two equal p
        assert!(md.contains("| alibi | 2 | +1.150 | 0.050 |"), "{md}");
        assert!(md.contains("across the 3 tests of this table"), "{md}");
        assert!(
            md.contains(
                "The change is larger than `t5`'s for no model; smaller for no model; no \
                 difference is detected for `alibi`."
            ),
            "{md}"
        );
    }

    pub(in crate::results) fn curve(
        scheme: Scheme,
        seed: u64,
        step: usize,
        valid_loss: f64,
    ) -> CurveRow {
        CurveRow {
            scheme,
            variant: "base".into(),
            seed,
            step,
            bytes: step * 10,
            train_loss: 3.0,
            valid_loss,
        }
    }

    #[test]
    fn plateaus_are_printed_run_by_run() {
        // alibi: seed 0 gains 1.530 - 1.515 = 0.015, seed 1 gains 1.520 - 1.517 = 0.003;
        // t5 a single point
        let runs = plateaus(&[
            curve(A, 0, 800, 1.53),
            curve(A, 0, 1000, 1.515),
            curve(A, 1, 800, 1.52),
            curve(A, 1, 1000, 1.517),
            curve(B, 0, 100, 2.0),
        ])
        .unwrap();
        let md = plateau_markdown(&runs);
        let lines: Vec<&str> = md.lines().collect();
        assert!(lines[0].contains("less than 0.010 nats per byte"), "{md}");
        assert_eq!(
            lines[2],
            "| model | seeds | steps | final validation loss | gain over the last 20 %, by seed | plateau |"
        );
        // final losses 1.515 and 1.517: mean 1.516
        assert_eq!(
            lines[4],
            "| alibi | 2 | 1000 | 1.516 | 0.015, 0.003 | 1 of 2 |"
        );
        assert_eq!(lines[5], "| t5 | 1 | 100 | 2.000 | – | – |");
        assert_eq!(
            lines[7],
            "Runs on their plateau: 1 of 2 with a gain to measure (and 1 without a validation \
             point before its last 20 %)."
        );
    }
}
