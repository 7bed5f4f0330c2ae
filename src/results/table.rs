//! The results table, computed once ([`ResultsTable`]) and rendered twice: as the README's
//! markdown ([`super::markdown`], `posenc report`) and as the notebooks' DataFrame
//! (`posenc::notebook::results::table_frame`, feature `notebook`). Both print the same
//! [`ResultsTable::header`] and [`ResultsTable::cells`].
//!
//! The rules: one window mode; a row per model (scheme and variant); a column per evaluated
//! length, ascending, headed with its multiple of the shortest training length (`256 (2x)`);
//! each cell the mean $\bar x$ and sample standard deviation over the seeds of the loss in nats
//! per byte ([`super::stats::seed_summaries`]), beside the model's parameter count and number
//! of seeds. With per-window losses in a mode whose windows pair across lengths (`matched`,
//! `nonoverlap`), each model's change from the shortest evaluated length to the longest,
//! $\Delta = \bar x_{L_{max}} - \bar x_{L_{min}}$ (the same columns for every model), is
//! tested ([`super::inference::compare`]: both uncertainties, a $t$ test over seeds) and the
//! rows are ranked by it, smallest first; with a reference model, each other model's change is
//! also tested against the reference's, $\Delta_m - \Delta_r$. Every test of the table is one
//! Holm family ([`super::inference::holm`]). Without windows the rows keep the order in which
//! the models first appear in the rows.

use super::inference::{change_terms, compare, difference_of_changes, holm, Tested, Verdict};
use super::paired::WindowKey;
use super::rows::{Mode, ModelKey, ResultRow, WindowRow};
use super::stats::{seed_summaries, SeedSummary};
use crate::error::{ensure, invalid};
use crate::Result;

/// One model's row of a [`ResultsTable`].
#[derive(Debug, Clone, PartialEq)]
pub struct TableRow {
    /// The model.
    pub model: ModelKey,
    /// Its trainable parameters ([`ResultRow::params`]).
    pub params: usize,
    /// Its seeds, ascending (the same at every length).
    pub seeds: Vec<u64>,
    /// Its summary over seeds at each of the table's lengths.
    pub cells: Vec<SeedSummary>,
    /// With windows that pair across lengths, its change from the shortest length to the
    /// longest, tested.
    pub change: Option<Tested>,
    /// With a reference model too (and for every model but it), its change minus the
    /// reference's, tested.
    pub vs_reference: Option<Tested>,
}

impl TableRow {
    /// Where the loss goes from the shortest length to the longest ([`Verdict::Above`]: it
    /// rises); `None` without a change or with one seed.
    pub fn verdict(&self) -> Option<Verdict> {
        self.change.as_ref().and_then(Tested::verdict)
    }

    /// Whether the change differs from the reference's ([`Verdict::Above`]: steeper).
    pub fn verdict_vs_reference(&self) -> Option<Verdict> {
        self.vs_reference.as_ref().and_then(Tested::verdict)
    }
}

/// The results table of one window mode (see the module documentation for the rules).
#[derive(Debug, Clone, PartialEq)]
pub struct ResultsTable {
    /// The window mode of every cell.
    pub mode: Mode,
    /// The evaluated lengths, ascending.
    pub lengths: Vec<usize>,
    /// The shortest training length of any model: lengths are headed as multiples of it (a
    /// fine-tune trained longer is read against the same columns).
    pub train_len: usize,
    /// One row per model: ranked by the change with one, else in order of first appearance.
    pub rows: Vec<TableRow>,
    /// The model whose change the others' are tested against.
    pub reference: Option<ModelKey>,
    /// The tests of the table's Holm family (those with two or more seeds).
    pub tests: usize,
}

impl ResultsTable {
    /// The table of the rows of `mode`, with the tested change when `windows` are given and
    /// pair across lengths in `mode`; no reference model.
    ///
    /// # Errors
    /// As [`ResultsTable::with_reference`].
    pub fn new(rows: &[ResultRow], windows: Option<&[WindowRow]>, mode: Mode) -> Result<Self> {
        Self::with_reference(rows, windows, mode, None)
    }

    /// [`ResultsTable::new`], and with `reference` each model's change tested against the
    /// reference's.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] when no row has `mode`, when a model lacks a length
    /// that another has, when its seeds or parameter count differ between lengths, for a
    /// reference that is not a model of the table, and for what [`seed_summaries`] and
    /// [`compare`] refuse.
    pub fn with_reference(
        rows: &[ResultRow],
        windows: Option<&[WindowRow]>,
        mode: Mode,
        reference: Option<&ModelKey>,
    ) -> Result<Self> {
        let rows: Vec<ResultRow> = rows.iter().filter(|r| r.mode == mode).cloned().collect();
        ensure(
            !rows.is_empty(),
            "mode",
            mode.name(),
            "a mode of the results (matched, nonoverlap or sliding)",
        )?;
        let summaries = seed_summaries(&rows)?;
        let mut lengths: Vec<usize> = summaries.iter().map(|s| s.eval_len).collect();
        lengths.sort_unstable();
        lengths.dedup();
        let train_len = summaries.iter().map(|s| s.train_len).min().unwrap_or(0);
        let mut models: Vec<ModelKey> = Vec::new();
        for s in &summaries {
            let key = s.key();
            if !models.contains(&key) {
                models.push(key);
            }
        }
        if let Some(r) = reference {
            ensure(
                models.contains(r),
                "reference",
                r.label(),
                &format!(
                    "a model of the {} table: {}",
                    mode.name(),
                    models
                        .iter()
                        .map(ModelKey::label)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )?;
        }
        // The change compares every model's longest and shortest columns, whatever length
        // the model itself was trained at.
        let (shortest, longest) = (lengths[0], lengths[lengths.len() - 1]);
        let windows = windows.filter(|_| mode.pairs_across_lengths());
        let mut table_rows = Vec::with_capacity(models.len());
        for model in models {
            let cells = cells_of(&summaries, &model, &lengths, mode)?;
            let (seeds, params) = (cells[0].seeds.clone(), cells[0].params);
            if let Some(c) = cells
                .iter()
                .find(|c| c.seeds != seeds || c.params != params)
            {
                return Err(invalid(
                    "seeds and params",
                    format!(
                        "{:?} and {} at length {} against {:?} and {} at {} for {}",
                        c.seeds,
                        c.params,
                        c.eval_len,
                        seeds,
                        params,
                        cells[0].eval_len,
                        c.key().label()
                    ),
                    "the same seeds and parameter count at every length of a model",
                ));
            }
            let (mut change, mut vs_reference) = (None, None);
            if let Some(windows) = windows {
                let span = (shortest, longest);
                let own = change_terms(&model, mode, span, 1.0);
                let terms: Vec<(f64, &WindowKey)> = own.iter().map(|(c, k)| (*c, k)).collect();
                change = Some(compare(windows, &terms)?);
                if let Some(r) = reference.filter(|r| **r != model) {
                    vs_reference = Some(difference_of_changes(windows, mode, &model, r, span)?);
                }
            }
            let untested = |comparison| Tested {
                comparison,
                p_holm: None,
            };
            table_rows.push(TableRow {
                model,
                params,
                seeds,
                cells,
                change: change.map(untested),
                vs_reference: vs_reference.map(untested),
            });
        }
        let tests = adjust(&mut table_rows)?;
        // ranked by the change, smallest first (a stable sort: ties keep their order)
        table_rows.sort_by(|a, b| match (&a.change, &b.change) {
            (Some(x), Some(y)) => x.comparison.mean.total_cmp(&y.comparison.mean),
            _ => std::cmp::Ordering::Equal,
        });
        Ok(ResultsTable {
            mode,
            lengths,
            train_len,
            rows: table_rows,
            reference: reference.filter(|_| windows.is_some()).cloned(),
            tests,
        })
    }

    /// The shortest and the longest evaluated length.
    pub fn span(&self) -> (usize, usize) {
        let shortest = self.lengths.first().copied().unwrap_or(0);
        (shortest, self.lengths.last().copied().unwrap_or(shortest))
    }

    /// Whether the table has the tested change (it was built with windows that pair across
    /// lengths).
    pub fn has_change(&self) -> bool {
        self.rows.first().is_some_and(|r| r.change.is_some())
    }

    /// The column titles: `model`, `params`, `seeds`, a length per column (`128 (1x)`, or the
    /// length alone when it is not a multiple of the training length) and, with the change,
    /// its columns: the change (`2048 − 128`), its standard error over seeds (`se seeds`) and
    /// over the text (`se text`), its `t` and Holm-adjusted $p$ (`p Holm`) and the
    /// `verdict`.
    pub fn header(&self) -> Vec<String> {
        let mut header = ["model", "params", "seeds"].map(String::from).to_vec();
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
            header.extend(test_header());
        }
        header
    }

    /// The text of every cell, a row per model under [`ResultsTable::header`]: the model's
    /// label ([`ModelKey::label`]), its parameters (`826,112`), its number of seeds,
    /// `mean ± sd` at each length to 3 decimals (the mean alone with one seed) and the change
    /// with its sign, both standard errors, $t$, the adjusted $p$ and the verdict (`rises`,
    /// `falls`, `not detected`; `–` with one seed).
    pub fn cells(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .map(|row| {
                let mut cells = vec![
                    row.model.label(),
                    thousands(row.params),
                    row.seeds.len().to_string(),
                ];
                cells.extend(row.cells.iter().map(mean_sd));
                if let Some(change) = &row.change {
                    cells.extend(test_cells(change, ["rises", "falls"]));
                }
                cells
            })
            .collect()
    }

    /// The column titles of the test against the reference: `model`, `seeds`, the difference
    /// of changes (`change − alibi's`) and the test's columns as in [`ResultsTable::header`];
    /// empty without a reference.
    pub fn reference_header(&self) -> Vec<String> {
        let Some(r) = &self.reference else {
            return Vec::new();
        };
        let mut header = vec![
            "model".to_string(),
            "seeds".to_string(),
            format!("change − {}'s", r.label()),
        ];
        header.extend(test_header());
        header
    }

    /// A row per model but the reference under [`ResultsTable::reference_header`], in the
    /// table's order; verdicts `steeper`, `flatter`, `not detected`.
    pub fn reference_cells(&self) -> Vec<Vec<String>> {
        self.rows
            .iter()
            .filter_map(|row| {
                let tested = row.vs_reference.as_ref()?;
                let mut cells = vec![row.model.label(), row.seeds.len().to_string()];
                cells.extend(test_cells(tested, ["steeper", "flatter"]));
                Some(cells)
            })
            .collect()
    }

    /// The labels of the models whose change has `verdict`, in table order.
    pub fn with_verdict(&self, verdict: Verdict) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| r.verdict() == Some(verdict))
            .map(|r| r.model.label())
            .collect()
    }

    /// The labels of the models whose change against the reference's has `verdict`.
    pub fn with_verdict_vs_reference(&self, verdict: Verdict) -> Vec<String> {
        self.rows
            .iter()
            .filter(|r| r.verdict_vs_reference() == Some(verdict))
            .map(|r| r.model.label())
            .collect()
    }
}

/// The summaries of `model` at each of `lengths`.
fn cells_of(
    summaries: &[SeedSummary],
    model: &ModelKey,
    lengths: &[usize],
    mode: Mode,
) -> Result<Vec<SeedSummary>> {
    lengths
        .iter()
        .map(|&l| {
            summaries
                .iter()
                .find(|s| s.key() == *model && s.eval_len == l)
                .cloned()
                .ok_or_else(|| {
                    invalid(
                        "rows",
                        format!("{} without length {l} in {}", model.id(), mode.name()),
                        "every model at every length",
                    )
                })
        })
        .collect()
}

/// Holm's adjustment over every test of the rows (changes and differences from the
/// reference); returns the number of tests in the family.
fn adjust(rows: &mut [TableRow]) -> Result<usize> {
    let mut tests: Vec<&mut Tested> = rows
        .iter_mut()
        .flat_map(|r| r.change.iter_mut().chain(r.vs_reference.iter_mut()))
        .collect();
    let p: Vec<Option<f64>> = tests.iter().map(|t| t.comparison.p).collect();
    for (t, adjusted) in tests.iter_mut().zip(holm(&p)?) {
        t.p_holm = adjusted;
    }
    Ok(p.iter().flatten().count())
}

/// The columns of a test after its difference: `se seeds`, `se text`, `t`, `p Holm`,
/// `verdict`.
pub(super) fn test_header() -> Vec<String> {
    ["se seeds", "se text", "t", "p Holm", "verdict"]
        .map(String::from)
        .to_vec()
}

/// `+0.123`, `0.004`, `0.006`, `+10.39`, `0.012`, `rises`: a test's cells, its verdict in the
/// words `[above, below]` (or `not detected`; `–` for the seeds' standard error, $t$, $p$ and
/// the verdict with one seed: there is no spread over seeds to estimate).
pub(super) fn test_cells(tested: &Tested, [above, below]: [&str; 2]) -> Vec<String> {
    let c = &tested.comparison;
    let t = match (c.p, c.t) {
        (None, _) => "–".to_string(),
        (Some(_), t) if t.is_infinite() => if t > 0.0 { "+∞" } else { "−∞" }.to_string(),
        (Some(_), t) if t.abs() >= 1e4 => format!("{t:+.1e}"),
        (Some(_), t) => format!("{t:+.2}"),
    };
    let p = match tested.p_holm {
        None => "–".to_string(),
        Some(p) if p < 0.001 => "<0.001".to_string(),
        Some(p) => format!("{p:.3}"),
    };
    let verdict = tested.verdict_words(above, below, "–");
    vec![
        format!("{:+.3}", c.mean),
        c.seed_se()
            .map_or_else(|| "–".to_string(), |se| format!("{se:.3}")),
        format!("{:.3}", c.text.se),
        t,
        p,
        verdict.to_string(),
    ]
}

/// `826,112`.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
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
    use crate::results::paired::window;
    use crate::results::rows::Scheme;

    /// Two seeds each, seed 1 higher by 0.1, two windows per seed (0.01 either side), matched
    /// mode: rope rises 1.0 -> 2.0 (by 1.0 and 1.05 over the seeds), alibi stays at 1.0,
    /// rope/ft-yarn (trained at 256) falls 2.0 -> 1.0 (by 1.0 and 0.95).
    fn sample() -> (Vec<ResultRow>, Vec<WindowRow>) {
        let (mut rows, mut windows) = (Vec::new(), Vec::new());
        for seed in [0, 1] {
            let shift = 0.1 * seed as f64;
            let wobble = 0.05 * seed as f64;
            for (scheme, variant, lo, hi) in [
                (Scheme::Rope, "base", 1.0, 2.0 + wobble),
                (Scheme::Alibi, "base", 1.0, 1.0),
                (Scheme::Rope, "ft-yarn", 2.0, 1.0 + wobble),
            ] {
                for (l, x) in [(128, lo), (512, hi)] {
                    let mut r = ResultRow::example(scheme, variant, l, seed, x + shift);
                    r.mode = Mode::Matched;
                    if variant != "base" {
                        r.train_len = 256;
                    }
                    if scheme == Scheme::Alibi {
                        r.params = 1_234_567;
                    }
                    rows.push(r);
                    let key = WindowKey::new(scheme, variant, Mode::Matched, l);
                    for (start, noise) in [(512, -0.01), (1024, 0.01)] {
                        windows.push(window(&key, seed, start, 512, x + shift + noise));
                    }
                }
            }
        }
        (rows, windows)
    }

    /// The variants of RoPE extended at inference (ReRoPE, Leaky ReRoPE, log-n alone or on a
    /// scaling) are models of the table like the scalings: a row each, labelled
    /// `rope/VARIANT`, in the order the rows give them (no windows), and any of them can be
    /// the reference.
    #[test]
    fn extensions_at_inference_are_models_of_the_table() {
        let variants = ["yarn", "rerope", "leaky-rerope", "log-n", "yarn+log-n"];
        let rows: Vec<ResultRow> = variants
            .iter()
            .enumerate()
            .flat_map(|(v, name)| {
                [128, 512].map(|l| ResultRow::example(Scheme::Rope, name, l, 0, 1.0 + v as f64))
            })
            .collect();
        let table = ResultsTable::new(&rows, None, Mode::Nonoverlap).unwrap();
        let labels: Vec<String> = table.cells().iter().map(|c| c[0].clone()).collect();
        let want: Vec<String> = variants.iter().map(|v| format!("rope/{v}")).collect();
        assert_eq!(labels, want);
        let leaky = ModelKey::new(Scheme::Rope, "leaky-rerope");
        assert!(!leaky.is_finetune() && !leaky.is_base());
        assert!(ResultsTable::with_reference(&rows, None, Mode::Nonoverlap, Some(&leaky)).is_ok());
    }

    #[test]
    fn cells_follow_the_readme_rules() {
        let (rows, windows) = sample();
        let alibi = ModelKey::base(Scheme::Alibi);
        let table =
            ResultsTable::with_reference(&rows, Some(&windows), Mode::Matched, Some(&alibi))
                .unwrap();
        assert_eq!(table.lengths, [128, 512]);
        assert_eq!(table.train_len, 128);
        assert_eq!(table.span(), (128, 512));
        assert_eq!(
            table.header(),
            [
                "model",
                "params",
                "seeds",
                "128 (1x)",
                "512 (4x)",
                "512 − 128",
                "se seeds",
                "se text",
                "t",
                "p Holm",
                "verdict"
            ]
        );
        // ranked by the change: ft-yarn (-0.975), alibi (0), rope (+1.025)
        let cells = table.cells();
        let order: Vec<&str> = cells.iter().map(|c| c[0].as_str()).collect();
        assert_eq!(order, ["rope/ft-yarn", "alibi", "rope"]);
        // rope: 1.0 and 1.1 at 128 -> 1.050 ± 0.071; 2.0 and 2.15 at 512 -> 2.075 ± 0.106;
        // change per seed 1.0, 1.05 (the windows' noise cancels: se text 0): mean 1.025,
        // sd 0.0354, se 0.025, t = 41; 1 df: p = 1 - 2 atan(41)/pi = 0.0155. ft-yarn the same
        // downwards (-1.0, -0.95: t = -39, p = 0.0163), alibi's change exactly 0 (t 0, p 1);
        // against alibi the same contrasts again: 5 tests, sorted p 0.0155, 0.0155, 0.0163,
        // 0.0163, 1 -> Holm 5 x 0.0155 = 0.078 for rope's change: not detected
        assert_eq!(
            cells[2][..9],
            [
                "rope",
                "100",
                "2",
                "1.050 ± 0.071",
                "2.075 ± 0.106",
                "+1.025",
                "0.025",
                "0.000",
                "+41.00"
            ]
        );
        assert_eq!(table.tests, 5);
        let p = 1.0 - 2.0 * 41f64.atan() / std::f64::consts::PI;
        let adjusted = table.rows[2].change.as_ref().unwrap().p_holm.unwrap();
        assert!(
            (adjusted - 5.0 * p).abs() < 1e-9,
            "{adjusted} vs {}",
            5.0 * p
        );
        assert_eq!(cells[2][9..], ["0.078", "not detected"]);
        assert_eq!(cells[1][..3], ["alibi", "1,234,567", "2"]);
        assert_eq!(
            cells[1][5..],
            ["+0.000", "0.000", "0.000", "+0.00", "1.000", "not detected"]
        );
        assert_eq!(table.with_verdict(Verdict::NotDetected).len(), 3);
        // against the reference: alibi has no row
        assert_eq!(
            table.reference_header(),
            [
                "model",
                "seeds",
                "change − alibi's",
                "se seeds",
                "se text",
                "t",
                "p Holm",
                "verdict"
            ]
        );
        let reference = table.reference_cells();
        assert_eq!(reference.len(), 2);
        assert_eq!(reference[1][..3], ["rope", "2", "+1.025"]);
        // without windows: no change columns, no verdicts, order of first appearance
        let table = ResultsTable::new(&rows, None, Mode::Matched).unwrap();
        assert!(!table.has_change());
        assert_eq!(table.header().len(), 5);
        assert!(table.cells().iter().all(|c| c.len() == 5));
        assert_eq!(table.rows[0].model.label(), "rope");
        assert_eq!((table.rows[1].verdict(), table.tests), (None, 0));
        assert!(table.reference_header().is_empty());
        // no row of the mode; a reference that is not a model
        let e = ResultsTable::new(&rows, None, Mode::Sliding).unwrap_err();
        assert!(e.to_string().contains("invalid mode = sliding"), "{e}");
        let e = ResultsTable::with_reference(
            &rows,
            Some(&windows),
            Mode::Matched,
            Some(&ModelKey::base(Scheme::T5)),
        )
        .unwrap_err();
        assert!(e.to_string().contains("invalid reference = t5"), "{e}");
    }

    #[test]
    fn verdicts_come_from_the_holm_adjusted_t_test() {
        // five seeds (k = 0..4), exact binary fractions: rope's change 1 + k/4 (mean 1.5,
        // sd 0.25 sqrt(2.5) = 0.395, se 0.177, t = 8.49 with 4 df: p = 0.0011), alibi's
        // k/4 - 1/2 (mean 0: t 0, p 1); rope against alibi 1.5 in every seed (se 0, t
        // infinite, p 0). Holm over 3: 0, 2 x 0.0011, 1: rope rises and is steeper.
        let (mut rows, mut windows) = (Vec::new(), Vec::new());
        for seed in 0..5u64 {
            let k = seed as f64 / 4.0;
            for (scheme, rise) in [(Scheme::Rope, 1.0 + k), (Scheme::Alibi, k - 0.5)] {
                for (l, x) in [(128, 1.0), (512, 1.0 + rise)] {
                    let mut r = ResultRow::example(scheme, "base", l, seed, x);
                    r.mode = Mode::Matched;
                    rows.push(r);
                    let key = WindowKey::new(scheme, "base", Mode::Matched, l);
                    windows.push(window(&key, seed, 512, 512, x));
                    windows.push(window(&key, seed, 1024, 512, x));
                }
            }
        }
        let alibi = ModelKey::base(Scheme::Alibi);
        let table =
            ResultsTable::with_reference(&rows, Some(&windows), Mode::Matched, Some(&alibi))
                .unwrap();
        assert_eq!(table.tests, 3);
        assert_eq!(table.with_verdict(Verdict::Above), ["rope"]);
        assert_eq!(table.with_verdict(Verdict::NotDetected), ["alibi"]);
        assert_eq!(table.with_verdict_vs_reference(Verdict::Above), ["rope"]);
        let rope = &table.cells()[1];
        let t = 1.5 / (0.25 * 2.5f64.sqrt() / 5f64.sqrt());
        assert_eq!(
            rope[rope.len() - 3..],
            [format!("{t:+.2}").as_str(), "0.002", "rises"]
        );
        assert_eq!(format!("{t:+.2}"), "+8.49");
        let vs = &table.reference_cells()[0];
        assert_eq!(vs[vs.len() - 3..], ["+∞", "<0.001", "steeper"]);
        // sliding windows do not pair across lengths: no change, no error
        let sliding = ResultRow::in_mode(&rows, Mode::Sliding);
        let table = ResultsTable::new(&sliding, Some(&windows), Mode::Sliding).unwrap();
        assert!(!table.has_change());
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(826_112), "826,112");
        assert_eq!(thousands(12_345_678), "12,345,678");
    }
}
