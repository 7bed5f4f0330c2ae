//! The results table, computed once ([`ResultsTable`]) and rendered twice: as the README's
//! markdown ([`super::markdown`], `posenc report`) and as the notebooks' DataFrame
//! (`posenc::notebook::results::table_frame`, feature `notebook`). Both print the same
//! [`ResultsTable::header`] and [`ResultsTable::cells`].
//!
//! The rules: one window mode; a row per model (scheme and variant) in the order in which the
//! models first appear in the rows; a column per evaluated length, ascending, headed with its
//! multiple of the shortest training length (`256 (2x)`); each cell the mean $\bar x$ and
//! sample standard deviation over the seeds of the loss in nats per byte
//! ([`super::stats::seed_summaries`]). With per-window losses, a last column holds each
//! model's change from the shortest evaluated length to the longest,
//! $\bar D = \bar x_{L_{max}} - \bar x_{L_{min}}$ (the same columns for every model), with its
//! standard error from paired windows and seeds ([`super::stats::paired_difference`]), and
//! each model gets a [`Verdict`]: its loss rises, falls or stays within $z = $ [`Z`] standard
//! errors.

use super::rows::{Mode, ModelKey, ResultRow, WindowRow};
use super::stats::{paired_difference, seed_summaries, PairedDifference, SeedSummary, WindowKey};
use crate::error::{ensure, invalid};
use crate::Result;

/// Differences smaller than this many standard errors are reported as "within".
pub const Z: f64 = 2.0;

/// Where a model's loss goes from the shortest length to the longest ([`TableRow::verdict`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Up by more than [`Z`] standard errors.
    Rises,
    /// Within [`Z`] standard errors.
    Within,
    /// Down by more than [`Z`] standard errors.
    Falls,
}

/// One model's row of a [`ResultsTable`].
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    /// The model.
    pub model: ModelKey,
    /// Its seeds, ascending (the same at every length).
    pub seeds: Vec<u64>,
    /// Its summary over seeds at each of the table's lengths.
    pub cells: Vec<SeedSummary>,
    /// With windows, its change from the shortest length to the longest.
    pub change: Option<PairedDifference>,
}

impl TableRow {
    /// Where the loss goes from the shortest length to the longest; `None` without windows.
    pub fn verdict(&self) -> Option<Verdict> {
        self.change.as_ref().map(|d| {
            if !d.exceeds(Z) {
                Verdict::Within
            } else if d.mean > 0.0 {
                Verdict::Rises
            } else {
                Verdict::Falls
            }
        })
    }
}

/// The results table of one window mode: every model at every evaluated length, summarised
/// over seeds, and, with windows, each model's paired change from the shortest length to the
/// longest (see the module documentation for the rules).
#[derive(Debug, Clone, PartialEq)]
pub struct ResultsTable {
    /// The window mode of every cell.
    pub mode: Mode,
    /// The evaluated lengths, ascending.
    pub lengths: Vec<usize>,
    /// The shortest training length of any model: lengths are headed as multiples of it (a
    /// fine-tune trained longer is read against the same columns).
    pub train_len: usize,
    /// One row per model, in order of first appearance.
    pub rows: Vec<TableRow>,
}

impl ResultsTable {
    /// The table of the rows of `mode`, with the change column when `windows` are given.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] when no row has `mode`, when a model lacks a length
    /// that another has, when its seeds differ between lengths, or for what
    /// [`seed_summaries`] and [`paired_difference`] refuse.
    pub fn new(rows: &[ResultRow], windows: Option<&[WindowRow]>, mode: Mode) -> Result<Self> {
        let rows: Vec<ResultRow> = rows.iter().filter(|r| r.mode == mode).cloned().collect();
        ensure(
            !rows.is_empty(),
            "mode",
            mode.name(),
            "a mode of the results (nonoverlap or sliding)",
        )?;
        let summaries = seed_summaries(&rows)?;
        let mut lengths: Vec<usize> = summaries.iter().map(|s| s.eval_len).collect();
        lengths.sort_unstable();
        lengths.dedup();
        let train_len = summaries.iter().map(|s| s.train_len).min().unwrap_or(0);
        // The change column compares every model's longest and shortest columns, whatever
        // length the model itself was trained at.
        let (shortest, longest) = (lengths[0], lengths[lengths.len() - 1]);
        let mut models: Vec<ModelKey> = Vec::new();
        for s in &summaries {
            let key = s.key();
            if !models.contains(&key) {
                models.push(key);
            }
        }
        let mut table_rows = Vec::with_capacity(models.len());
        for model in models {
            let cells: Vec<SeedSummary> = lengths
                .iter()
                .map(|&l| {
                    summaries
                        .iter()
                        .find(|s| {
                            s.scheme == model.scheme
                                && s.variant == model.variant
                                && s.eval_len == l
                        })
                        .cloned()
                        .ok_or_else(|| {
                            invalid(
                                "rows",
                                format!("{} without length {l} in {}", model.id(), mode.name()),
                                "every model at every length",
                            )
                        })
                })
                .collect::<Result<_>>()?;
            let seeds = cells[0].seeds.clone();
            if let Some(c) = cells.iter().find(|c| c.seeds != seeds) {
                return Err(invalid(
                    "seeds",
                    format!(
                        "{:?} at length {} against {:?} at {} for {}",
                        c.seeds,
                        c.eval_len,
                        seeds,
                        cells[0].eval_len,
                        c.key().label()
                    ),
                    "the same seeds at every length of a model",
                ));
            }
            let change = match windows {
                Some(windows) => Some(paired_difference(
                    windows,
                    &WindowKey::of(&model, mode, longest),
                    &WindowKey::of(&model, mode, shortest),
                )?),
                None => None,
            };
            table_rows.push(TableRow {
                model,
                seeds,
                cells,
                change,
            });
        }
        Ok(ResultsTable {
            mode,
            lengths,
            train_len,
            rows: table_rows,
        })
    }

    /// The shortest and the longest evaluated length.
    pub fn span(&self) -> (usize, usize) {
        let shortest = self.lengths.first().copied().unwrap_or(0);
        (shortest, self.lengths.last().copied().unwrap_or(shortest))
    }

    /// Whether the table has the change column (it was built with windows).
    pub fn has_change(&self) -> bool {
        self.rows.first().is_some_and(|r| r.change.is_some())
    }

    /// The column titles: `model`, `seeds`, a length per column (`128 (1x)`, or the length
    /// alone when it is not a multiple of the training length) and, with windows, the change
    /// column (`2048 − 128`).
    pub fn header(&self) -> Vec<String> {
        let mut header = vec!["model".to_string(), "seeds".to_string()];
        header.extend(self.lengths.iter().map(|&l| {
            if self.train_len > 0 && l % self.train_len == 0 {
                format!("{l} ({}x)", l / self.train_len)
            } else {
                l.to_string()
            }
        }));
        if self.has_change() {
            let (shortest, longest) = self.span();
            header.push(format!("{longest} − {shortest}"));
        }
        header
    }

    /// The text of every cell, a row per model under [`ResultsTable::header`]: the model's
    /// label ([`ModelKey::label`]), its number of seeds, `mean ± sd` at each length to 3
    /// decimals (the mean alone with one seed) and the change `+D ± se` with its sign.
    pub fn cells(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|row| {
                let mut cells = vec![row.model.label(), row.seeds.len().to_string()];
                cells.extend(row.cells.iter().map(mean_sd));
                if let Some(d) = &row.change {
                    cells.push(format!("{:+.3} ± {:.3}", d.mean, d.se));
                }
                cells
            })
            .collect()
    }

    /// The labels of the models whose loss has `verdict`, in table order.
    pub fn with_verdict(&self, verdict: Verdict) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| r.verdict() == Some(verdict))
            .map(|r| r.model.label())
            .collect()
    }
}

/// `1.234 ± 0.005`, or `1.234` with one seed.
fn mean_sd(s: &SeedSummary) -> String {
    if s.seeds.len() > 1 {
        format!("{:.3} ± {:.3}", s.mean, s.sd)
    } else {
        format!("{:.3}", s.mean)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::rows::Scheme;
    use crate::results::stats::window;

    /// rope rises 1.0 -> 2.0, alibi stays at 1.0, rope/ft-yarn (trained at 256) falls
    /// 2.0 -> 1.0; two seeds each, seed 1 higher by 0.1, two windows per seed.
    fn sample() -> (Vec<ResultRow>, Vec<WindowRow>) {
        let (mut rows, mut windows) = (Vec::new(), Vec::new());
        for seed in [0, 1] {
            let shift = 0.1 * seed as f64;
            for (scheme, variant, lo, hi) in [
                (Scheme::Rope, "base", 1.0, 2.0),
                (Scheme::Alibi, "base", 1.0, 1.0),
                (Scheme::Rope, "ft-yarn", 2.0, 1.0),
            ] {
                for (l, x) in [(128, lo), (512, hi)] {
                    let mut r = ResultRow::example(scheme, variant, l, seed, x + shift);
                    if variant != "base" {
                        r.train_len = 256;
                    }
                    rows.push(r);
                    let key = WindowKey::new(scheme, variant, Mode::Nonoverlap, l);
                    for (start, noise) in [(0, -0.01), (512, 0.01)] {
                        windows.push(window(&key, seed, start, l, x + shift + noise));
                    }
                }
            }
        }
        (rows, windows)
    }

    #[test]
    fn cells_follow_the_readme_rules() {
        let (rows, windows) = sample();
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        assert_eq!(table.lengths, [128, 512]);
        assert_eq!(table.train_len, 128);
        assert_eq!(table.span(), (128, 512));
        assert_eq!(
            table.header(),
            ["model", "seeds", "128 (1x)", "512 (4x)", "512 − 128"]
        );
        let cells = table.cells();
        // order of first appearance; sd of (1.0, 1.1) = 0.0707
        assert_eq!(
            cells[0],
            [
                "rope",
                "2",
                "1.050 ± 0.071",
                "2.050 ± 0.071",
                "+1.000 ± 0.000"
            ]
        );
        assert_eq!(cells[1][0], "alibi");
        assert_eq!(cells[2][0], "rope/ft-yarn");
        assert_eq!(cells[2][4], "-1.000 ± 0.000");
        assert_eq!(table.with_verdict(Verdict::Rises), ["rope"]);
        assert_eq!(table.with_verdict(Verdict::Within), ["alibi"]);
        assert_eq!(table.with_verdict(Verdict::Falls), ["rope/ft-yarn"]);
        assert_eq!(table.rows[0].seeds, [0, 1]);
        // without windows: no change column, no verdicts
        let table = ResultsTable::new(&rows, None, Mode::Nonoverlap).unwrap();
        assert!(!table.has_change());
        assert_eq!(table.header().len(), 4);
        assert!(table.cells().iter().all(|c| c.len() == 4));
        assert_eq!(table.rows[1].verdict(), None);
        // no row of the mode
        let e = ResultsTable::new(&rows, None, Mode::Sliding).unwrap_err();
        assert!(e.to_string().contains("invalid mode = sliding"), "{e}");
    }
}
