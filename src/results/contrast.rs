//! Models against each other at one length, tested as the results table tests a change
//! ([`against_best`]: every model against the one with the lowest mean loss, a $t$ test over
//! seeds and Holm's correction over the family), the verdicts in words ([`verdict_lists`]),
//! and the check that a contrast computed from the windows is the one the results rows give
//! ([`rows_contrast`], [`table_rows_error`]).
//!
//! The rows are written by the sweep from each evaluation's total nats over its total bytes,
//! the windows from each window's loss: for a seed $s$ the contrast
//! $D_s = \sum_k c_k\, m_{k,s}$ from the byte-weighted means of the windows must equal
//! $\sum_k c_k\, x_{k,s}$ from the rows, so the two are independent computations of one
//! number.

use super::inference::{compare, holm_family, Comparison, Tested, Verdict};
use super::markdown::joined_or_none;
use super::paired::WindowKey;
use super::rows::{Mode, ModelKey, ResultRow, WindowRow};
use super::stats::seed_summaries;
use super::table::{test_cells, test_header, ResultsTable};
use crate::error::ensure;
use crate::Result;

/// Every model against the best one at one length ([`against_best`]).
#[derive(Debug, Clone, PartialEq)]
pub struct AtLength {
    /// The window mode.
    pub mode: Mode,
    /// The length $L$.
    pub length: usize,
    /// The model with the lowest mean loss over its seeds at $L$.
    pub best: ModelKey,
    /// Every other model with $x_m - x_{best}$ at $L$ tested, smallest difference first.
    pub rows: Vec<(ModelKey, Tested)>,
}

impl AtLength {
    /// The contrast of `model` against the best: $(+1, m@L), (-1, best@L)$.
    pub fn terms(&self, model: &ModelKey) -> [(f64, WindowKey); 2] {
        [
            (1.0, WindowKey::of(model, self.mode, self.length)),
            (-1.0, WindowKey::of(&self.best, self.mode, self.length)),
        ]
    }

    /// Column titles: `model`, `seeds`, `loss − BEST's at L` and the test's columns as in
    /// [`ResultsTable::header`].
    pub fn header(&self) -> Vec<String> {
        let mut header = vec![
            "model".to_string(),
            "seeds".to_string(),
            format!("loss − {}'s at {}", self.best.label(), self.length),
        ];
        header.extend(test_header());
        header
    }

    /// A row per model under [`AtLength::header`]; verdicts `higher`, `lower`, `not detected`.
    pub fn cells(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|(model, tested)| {
                let mut cells = vec![model.label(), tested.comparison.n_seeds.to_string()];
                cells.extend(test_cells(tested, ["higher", "lower"]));
                cells
            })
            .collect()
    }

    /// The largest $|D_s^{windows} - D_s^{rows}|$ over every seed of every row
    /// ([`rows_contrast`]).
    ///
    /// # Errors
    /// As [`rows_contrast`].
    pub fn rows_error(&self, rows: &[ResultRow]) -> Result<f64> {
        let mut largest = 0.0f64;
        for (model, tested) in &self.rows {
            let terms = self.terms(model);
            largest = largest.max(comparison_error(rows, &tested.comparison, &terms)?);
        }
        Ok(largest)
    }
}

/// Every model of `mode` against the one with the lowest mean loss over its seeds at
/// `length`: for each model $m$ the contrast $x_m - x_{best}$ on the windows and seeds both
/// have ([`compare`]), the $p$-values adjusted together ([`holm_family`]), rows sorted by the
/// difference.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] when no row has `mode` at `length`, and as
/// [`seed_summaries`] and [`compare`] (a model without windows at `length` included).
pub fn against_best(
    rows: &[ResultRow],
    windows: &[WindowRow],
    mode: Mode,
    length: usize,
) -> Result<AtLength> {
    let at: Vec<ResultRow> = rows
        .iter()
        .filter(|r| r.mode == mode && r.eval_len == length)
        .cloned()
        .collect();
    ensure(
        !at.is_empty(),
        "length",
        format!("{length} in {}", mode.name()),
        "a length and mode of the results",
    )?;
    let summaries = seed_summaries(&at)?;
    let best = summaries
        .iter()
        .min_by(|a, b| a.mean.total_cmp(&b.mean))
        .map(|s| s.key())
        .unwrap_or_else(|| at[0].key());
    let mut out = AtLength {
        mode,
        length,
        best,
        rows: Vec::new(),
    };
    let mut comparisons: Vec<(ModelKey, Comparison)> = Vec::new();
    for model in summaries.iter().map(|s| s.key()) {
        if model == out.best || comparisons.iter().any(|(m, _)| *m == model) {
            continue;
        }
        let terms = out.terms(&model);
        let refs: Vec<(f64, &WindowKey)> = terms.iter().map(|(c, k)| (*c, k)).collect();
        comparisons.push((model, compare(windows, &refs)?));
    }
    let (models, comparisons): (Vec<ModelKey>, Vec<Comparison>) = comparisons.into_iter().unzip();
    out.rows = models.into_iter().zip(holm_family(comparisons)?).collect();
    out.rows
        .sort_by(|a, b| a.1.comparison.mean.total_cmp(&b.1.comparison.mean));
    Ok(out)
}

/// Per seed, the contrast $\sum_k c_k\, x_{k,s}$ of the results rows' nats per byte, for the
/// seeds that have a row of every term, ascending.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a term with two rows of one seed.
pub fn rows_contrast(rows: &[ResultRow], terms: &[(f64, WindowKey)]) -> Result<Vec<(u64, f64)>> {
    let mut seeds: Vec<u64> = rows.iter().map(|r| r.seed).collect();
    seeds.sort_unstable();
    seeds.dedup();
    let mut out = Vec::new();
    'seeds: for seed in seeds {
        let mut sum = 0.0;
        for (c, key) in terms {
            let of: Vec<&ResultRow> = rows
                .iter()
                .filter(|r| {
                    r.seed == seed
                        && r.key() == key.model()
                        && r.mode == key.mode
                        && r.eval_len == key.eval_len
                })
                .collect();
            ensure(
                of.len() <= 1,
                "rows",
                format!("{} rows of {key} seed {seed}", of.len()),
                "one row per model, mode, length and seed",
            )?;
            match of.first() {
                Some(r) => sum += c * r.nats_per_byte,
                None => continue 'seeds,
            }
        }
        out.push((seed, sum));
    }
    Ok(out)
}

/// $\max_s |D_s^{windows} - D_s^{rows}|$ of one comparison; infinite when a seed of the
/// windows has no rows.
fn comparison_error(
    rows: &[ResultRow],
    comparison: &Comparison,
    terms: &[(f64, WindowKey)],
) -> Result<f64> {
    let from_rows = rows_contrast(rows, terms)?;
    Ok(comparison
        .per_seed
        .iter()
        .map(
            |(seed, d)| match from_rows.iter().find(|(s, _)| s == seed) {
                Some((_, r)) => (d - r).abs(),
                None => f64::INFINITY,
            },
        )
        .fold(0.0, f64::max))
}

/// The largest $|D_s^{windows} - D_s^{rows}|$ over every seed of every tested change of
/// `table` (and every change against its reference): 0 up to rounding when the windows and the
/// rows tell the same story; 0 for a table without windows.
///
/// # Errors
/// As [`rows_contrast`].
pub fn table_rows_error(table: &ResultsTable, rows: &[ResultRow]) -> Result<f64> {
    let (shortest, longest) = table.span();
    let change = |m: &ModelKey| {
        [
            (1.0, WindowKey::of(m, table.mode, longest)),
            (-1.0, WindowKey::of(m, table.mode, shortest)),
        ]
    };
    let mut largest = 0.0f64;
    for row in &table.rows {
        if let Some(tested) = &row.change {
            largest = largest.max(comparison_error(
                rows,
                &tested.comparison,
                &change(&row.model),
            )?);
        }
        if let (Some(tested), Some(r)) = (&row.vs_reference, &table.reference) {
            let mut terms = change(&row.model).to_vec();
            terms.extend(change(r).map(|(c, k)| (-c, k)));
            largest = largest.max(comparison_error(rows, &tested.comparison, &terms)?);
        }
    }
    Ok(largest)
}

/// The models of `tested` by verdict, as sentences: `ABOVE: a, b`, `BELOW: …`,
/// `not detected: …`, and `one seed, no test: …`; a list that would be empty reads `none`.
/// `[above, below]` name the two directions (`rises`, `falls`).
pub fn verdict_lists<'a>(
    tested: impl IntoIterator<Item = (&'a ModelKey, Option<&'a Tested>)>,
    [above, below]: [&str; 2],
) -> Vec<String> {
    let mut lists: [Vec<String>; 4] = Default::default();
    for (model, t) in tested {
        let i = match t.and_then(Tested::verdict) {
            Some(Verdict::Above) => 0,
            Some(Verdict::Below) => 1,
            Some(Verdict::NotDetected) => 2,
            None => 3,
        };
        lists[i].push(model.label());
    }
    let names = [above, below, "not detected", "one seed, no test"];
    names
        .iter()
        .zip(lists)
        .map(|(name, list)| format!("{name}: {}", joined_or_none(&list)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::rows::Scheme;

    /// `seeds` seeds of rope, alibi and nope at 128 and 2048 bytes, four windows each of 100
    /// bytes, losses `base + seed / 100 + window noise`; rows from the windows' means.
    fn sample(seeds: u64) -> (Vec<ResultRow>, Vec<WindowRow>) {
        let (mut rows, mut windows) = (Vec::new(), Vec::new());
        for seed in 0..seeds {
            for (scheme, at_128, at_2048) in [
                (Scheme::Rope, 1.5, 2.5),
                (Scheme::Alibi, 1.5, 1.45),
                (Scheme::Nope, 1.6, 1.452),
            ] {
                for (len, x) in [(128, at_128), (2048, at_2048)] {
                    let x = x + seed as f64 / 100.0;
                    let noise = [-0.03, 0.01, 0.04, -0.02];
                    for (w, e) in noise.iter().enumerate() {
                        windows.push(WindowRow {
                            scheme,
                            variant: "base".into(),
                            seed,
                            mode: Mode::Nonoverlap,
                            eval_len: len,
                            start: 2048 * w,
                            bytes: 100,
                            nats_per_byte: x + e * (len as f64).log2() / 10.0,
                        });
                    }
                    let mean = noise
                        .iter()
                        .map(|e| x + e * (len as f64).log2() / 10.0)
                        .sum::<f64>()
                        / 4.0;
                    rows.push(ResultRow::example(scheme, "base", len, seed, mean));
                }
            }
        }
        (rows, windows)
    }

    #[test]
    fn the_best_model_is_the_lowest_mean_and_the_others_are_tested_against_it() {
        let (rows, windows) = sample(3);
        let at = against_best(&rows, &windows, Mode::Nonoverlap, 2048).unwrap();
        assert_eq!(at.best, ModelKey::base(Scheme::Alibi));
        let labels: Vec<String> = at.rows.iter().map(|(m, _)| m.label()).collect();
        assert_eq!(labels, ["nope", "rope"]);
        // nope − alibi = 0.002 exactly per seed: se over seeds 0, t infinite, rejected
        let (nope, rope) = (&at.rows[0].1, &at.rows[1].1);
        assert!((nope.comparison.mean - 0.002).abs() < 1e-12);
        assert!((rope.comparison.mean - 1.05).abs() < 1e-12);
        assert_eq!(rope.verdict(), Some(Verdict::Above));
        // Holm over two tests: every adjusted p at least the raw one
        assert!(at.rows.iter().all(|(_, t)| t.p_holm >= t.comparison.p));
        assert!(at.rows_error(&rows).unwrap() < 1e-12);
        assert_eq!(at.header()[2], "loss − alibi's at 2048");
        assert_eq!(at.cells()[1][0], "rope");
        assert_eq!(at.cells()[1][7], "higher");
        assert!(against_best(&rows, &windows, Mode::Nonoverlap, 512).is_err());
    }

    /// With one seed nothing is tested, and the lists say so.
    #[test]
    fn one_seed_has_no_verdict() {
        let (rows, windows) = sample(1);
        let at = against_best(&rows, &windows, Mode::Nonoverlap, 2048).unwrap();
        assert!(at.rows.iter().all(|(_, t)| t.verdict().is_none()));
        let lists = verdict_lists(
            at.rows.iter().map(|(m, t)| (m, Some(t))),
            ["higher", "lower"],
        );
        assert_eq!(lists[0], "higher: none");
        assert_eq!(lists[3], "one seed, no test: nope, rope");
    }

    /// The windows' contrast per seed equals the rows'; a changed row is caught.
    #[test]
    fn the_table_changes_agree_with_the_rows_and_a_changed_row_is_caught() {
        let (mut rows, windows) = sample(3);
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        assert!(table_rows_error(&table, &rows).unwrap() < 1e-12);
        let lists = verdict_lists(
            table.rows.iter().map(|r| (&r.model, r.change.as_ref())),
            ["rises", "falls"],
        );
        assert_eq!(lists[0], "rises: rope");
        rows[0].nats_per_byte += 1e-6;
        let err = table_rows_error(&table, &rows).unwrap();
        assert!((err - 1e-6).abs() < 1e-9, "{err}");
        let key = WindowKey::new(Scheme::Rope, "base", Mode::Nonoverlap, 128);
        assert_eq!(rows_contrast(&rows[..2], &[(1.0, key)]).unwrap().len(), 1);
    }
}
