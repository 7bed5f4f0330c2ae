//! The source notes' answer to *why do relative encodings extrapolate?* (seed 003), asked of
//! the trained models of a [`ResultsTable`]. Notebook 10 checks its five claims on the
//! position math; two sharper questions need trained models, and each answer here is a set of
//! tests on paired windows ([`super::inference::compare`]) with a verdict only where the seeds carry it:
//!
//! 1. **Is being relative enough?** For every relative scheme $r$ and absolute scheme $a$
//!    ([`Relation`]), the difference of their changes from the table's shortest length to its
//!    longest, $(x^r_{L_{max}} - x^r_{L_{min}}) - (x^a_{L_{max}} - x^a_{L_{min}})$, is tested
//!    over seeds ($t$ with $S - 1$ degrees of freedom), one Holm family for all the pairs
//!    ([`relative_against_absolute`]). [`Verdict::Below`](super::inference::Verdict::Below): $r$ changes less.
//! 2. **Is being capped enough?** A scheme whose attention at an unseen distance reuses a
//!    trained value ([`Family::capped`]) *keeps its loss* when its change $\Delta$ lies within
//!    $\pm\delta$, $\delta$ = [`KEEPS`] nats per byte (a perplexity within 5 %). Two one-sided
//!    tests decide it ([`capped_keep_their_loss`]): *within* rejects both $\Delta \le -\delta$
//!    and $\Delta \ge \delta$, $p_\text{within} = \max\{1 - F_\nu((\bar D + \delta)/\mathrm{se}),
//!    F_\nu((\bar D - \delta)/\mathrm{se})\}$; *beyond* rejects $|\Delta| \le \delta$,
//!    $p_\text{beyond} = 1 - F_\nu((|\bar D| - \delta)/\mathrm{se})$; both $p$ of every capped
//!    scheme form one Holm family.

use super::inference::{difference_of_changes, holm, holm_family, Comparison, Tested, ALPHA};
use super::rows::{ModelKey, Scheme, WindowRow};
use super::student::t_cdf;
use super::table::ResultsTable;
use crate::error::ensure;
use crate::Result;

/// A change of at most this many nats per byte (a perplexity within 5 %, $e^{0.05} = 1.051$)
/// counts as keeping the loss.
pub const KEEPS: f64 = 0.05;

/// Whether a scheme's logits depend on positions only through $i - j$ (or counts of the tokens
/// between), on absolute positions, or on neither alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Relation {
    /// A position's own vector or table row enters the scores.
    Absolute,
    /// Only the pair's distance (or the tokens between them) enters.
    Relative,
    /// No position at all (NoPE), or both kinds (TUPE).
    Neither,
}

/// What attention is given at a distance never seen in training.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Family {
    /// The family's name, as notebook 10 lists it (`relative vectors, capped`).
    pub name: &'static str,
    /// Absolute, relative or neither.
    pub relation: Relation,
    /// Whether every distance past a cap reuses a value trained at the cap (Shaw's clip,
    /// DeBERTa's and T5's last bucket, CoPE's largest position).
    pub capped: bool,
}

/// The [`Family`] of each trained scheme.
pub fn family(scheme: Scheme) -> Family {
    let (name, relation, capped) = match scheme {
        Scheme::Nope => ("none", Relation::Neither, false),
        Scheme::Sinusoidal | Scheme::Learned => ("absolute", Relation::Absolute, false),
        Scheme::Shaw | Scheme::Deberta => ("relative vectors, capped", Relation::Relative, true),
        Scheme::Xl => ("relative vectors, uncapped", Relation::Relative, false),
        Scheme::T5 => ("bucket bias, capped", Relation::Relative, true),
        Scheme::Tupe => ("absolute + bucket bias", Relation::Neither, false),
        Scheme::Rope | Scheme::PartialRope | Scheme::PRope | Scheme::RandomRope => {
            ("rotation", Relation::Relative, false)
        }
        Scheme::RopeNope => ("rotation + NoPE layers", Relation::Relative, false),
        Scheme::Xpos => ("rotation with decay", Relation::Relative, false),
        Scheme::Alibi | Scheme::Kerple => ("distance penalty", Relation::Relative, false),
        Scheme::DdAlibi => ("gated distance penalty", Relation::Relative, false),
        Scheme::Fire | Scheme::Dpb => ("learned function of distance", Relation::Relative, false),
        Scheme::Cope => ("contextual positions, capped", Relation::Relative, true),
    };
    Family {
        name,
        relation,
        capped,
    }
}

/// One model trained from scratch, its change across the table and the same change from the
/// results rows.
#[derive(Debug, Clone, PartialEq)]
pub struct SchemeChange {
    /// The model (variant `base`).
    pub model: ModelKey,
    /// Its family.
    pub family: Family,
    /// $\Delta = x_{L_{max}} - x_{L_{min}}$ on paired windows, tested in the table's family.
    pub change: Tested,
    /// The same $\Delta$ from the rows: the mean over seeds of each length's nats per byte
    /// (total nats over total bytes, computed by the sweep without the windows).
    pub change_rows: f64,
}

/// The models trained from scratch of `table`, in its order (ranked by the change).
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a table without the tested change (built without
/// windows, or in a mode whose windows do not pair across lengths).
pub fn scheme_changes(table: &ResultsTable) -> Result<Vec<SchemeChange>> {
    ensure(
        table.has_change(),
        "results table",
        table.mode.name(),
        "a table with its tested change (windows that pair across lengths)",
    )?;
    Ok(table
        .rows
        .iter()
        .filter(|r| r.model.is_base())
        .filter_map(|r| {
            let (first, last) = (r.cells.first()?, r.cells.last()?);
            Some(SchemeChange {
                model: r.model.clone(),
                family: family(r.model.scheme),
                change: r.change.clone()?,
                change_rows: last.mean - first.mean,
            })
        })
        .collect())
}

/// Question 1 for one relative and one absolute model.
#[derive(Debug, Clone, PartialEq)]
pub struct PairTest {
    /// The relative model.
    pub relative: ModelKey,
    /// The absolute model.
    pub absolute: ModelKey,
    /// $\Delta_r - \Delta_a$, Holm-adjusted over every pair.
    pub tested: Tested,
}

/// Question 1: every relative model of `changes` against every absolute one, on `windows`
/// in the table's mode between its shortest and longest length.
///
/// # Errors
/// As [`difference_of_changes`] and [`holm`].
pub fn relative_against_absolute(
    table: &ResultsTable,
    changes: &[SchemeChange],
    windows: &[WindowRow],
) -> Result<Vec<PairTest>> {
    let of = |relation| {
        changes
            .iter()
            .filter(move |c| c.family.relation == relation)
    };
    let (mut models, mut comparisons) = (Vec::new(), Vec::new());
    for r in of(Relation::Relative) {
        for a in of(Relation::Absolute) {
            let d = difference_of_changes(windows, table.mode, &r.model, &a.model, table.span())?;
            comparisons.push(d);
            models.push((r.model.clone(), a.model.clone()));
        }
    }
    Ok(models
        .into_iter()
        .zip(holm_family(comparisons)?)
        .map(|((relative, absolute), tested)| PairTest {
            relative,
            absolute,
            tested,
        })
        .collect())
}

/// Question 2's verdict for one capped model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keeps {
    /// Its change is within $\pm$[`KEEPS`].
    Within,
    /// Its change is beyond $\pm$[`KEEPS`].
    Beyond,
    /// Neither is shown.
    Undecided,
}

/// Question 2 for one capped model.
#[derive(Debug, Clone, PartialEq)]
pub struct KeepTest {
    /// The model.
    pub model: ModelKey,
    /// Its change $\Delta$.
    pub change: Comparison,
    /// Holm-adjusted $p$ of *within* (`None` with one seed).
    pub p_within: Option<f64>,
    /// Holm-adjusted $p$ of *beyond* (`None` with one seed).
    pub p_beyond: Option<f64>,
}

impl KeepTest {
    /// The verdict at level [`ALPHA`]; `None` with one seed.
    pub fn verdict(&self) -> Option<Keeps> {
        let (within, beyond) = (self.p_within?, self.p_beyond?);
        Some(if within < ALPHA {
            Keeps::Within
        } else if beyond < ALPHA {
            Keeps::Beyond
        } else {
            Keeps::Undecided
        })
    }
}

/// $1 - F_\nu(x / \mathrm{se})$, the one-sided $p$ of $x > 0$; with $\mathrm{se} = 0$, 0 for
/// $x > 0$ and 1 otherwise.
fn upper_p(x: f64, se: f64, df: usize) -> Result<f64> {
    if se == 0.0 {
        return Ok(if x > 0.0 { 0.0 } else { 1.0 });
    }
    Ok(1.0 - t_cdf(x / se, df)?)
}

/// Question 2: every capped model of `changes`, its change tested against $\pm$`margin`
/// (see the module documentation).
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a margin that is not positive and finite.
pub fn capped_keep_their_loss(changes: &[SchemeChange], margin: f64) -> Result<Vec<KeepTest>> {
    ensure(
        margin.is_finite() && margin > 0.0,
        "margin",
        margin,
        "a positive number of nats per byte",
    )?;
    let capped: Vec<&SchemeChange> = changes.iter().filter(|c| c.family.capped).collect();
    let mut p = Vec::with_capacity(2 * capped.len());
    for c in &capped {
        let d = &c.change.comparison;
        if d.n_seeds < 2 {
            p.extend([None, None]);
            continue;
        }
        let (se, df) = (d.se_seeds, d.df);
        let above = upper_p(d.mean + margin, se, df)?; // rejects mean <= -margin
        let below = upper_p(margin - d.mean, se, df)?; // rejects mean >= margin
        p.push(Some(above.max(below)));
        p.push(Some(upper_p(d.mean.abs() - margin, se, df)?));
    }
    let adjusted = holm(&p)?;
    Ok(capped
        .iter()
        .enumerate()
        .map(|(i, c)| KeepTest {
            model: c.model.clone(),
            change: c.change.comparison.clone(),
            p_within: adjusted[2 * i],
            p_beyond: adjusted[2 * i + 1],
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::inference::Verdict;
    use crate::results::paired::{window, WindowKey};
    use crate::results::rows::{Mode, ResultRow};

    /// Rows and windows of base models at 128 and 2048 bytes: model `scheme`, seed `s`,
    /// window `w` has loss `level + w / 100 + (rise + seed_offset(s)) at 2048`.
    fn synthetic(models: &[(Scheme, f64)], seeds: u64) -> (Vec<ResultRow>, Vec<WindowRow>) {
        let (mut rows, mut windows) = (Vec::new(), Vec::new());
        for &(scheme, rise) in models {
            let model = ModelKey::base(scheme);
            for seed in 0..seeds {
                let jitter = 0.002 * seed as f64;
                for (len, add) in [(128usize, 0.0), (2048, rise + jitter)] {
                    let key = WindowKey::of(&model, Mode::Nonoverlap, len);
                    let losses: Vec<f64> = (0..4).map(|w| 1.5 + w as f64 / 100.0 + add).collect();
                    for (w, loss) in losses.iter().enumerate() {
                        windows.push(window(&key, seed, w * 2048, 100, *loss));
                    }
                    let mean = losses.iter().sum::<f64>() / 4.0;
                    rows.push(ResultRow::example(scheme, "base", len, seed, mean));
                }
            }
        }
        (rows, windows)
    }

    #[test]
    fn every_scheme_has_a_family() {
        assert_eq!(family(Scheme::Shaw).relation, Relation::Relative);
        assert!(family(Scheme::T5).capped && !family(Scheme::Alibi).capped);
        assert_eq!(family(Scheme::Learned).relation, Relation::Absolute);
        assert_eq!(family(Scheme::Nope).relation, Relation::Neither);
    }

    #[test]
    fn changes_match_the_rows_and_the_answers_follow_the_seeds() {
        let models = [
            (Scheme::Learned, 1.0),
            (Scheme::Alibi, 0.0),
            (Scheme::T5, 0.01),
            (Scheme::Shaw, 0.4),
        ];
        let (rows, windows) = synthetic(&models, 5);
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        let changes = scheme_changes(&table).unwrap();
        assert_eq!(changes.len(), 4);
        for c in &changes {
            let rise = models.iter().find(|m| m.0 == c.model.scheme).unwrap().1;
            // seeds add 0, 0.002, ..., 0.008: mean 0.004
            assert!((c.change.comparison.mean - (rise + 0.004)).abs() < 1e-12);
            assert!((c.change_rows - c.change.comparison.mean).abs() < 1e-12);
        }
        let pairs = relative_against_absolute(&table, &changes, &windows).unwrap();
        assert_eq!(pairs.len(), 3);
        assert!(pairs
            .iter()
            .all(|p| p.tested.verdict() == Some(Verdict::Below)));
        let keep = capped_keep_their_loss(&changes, KEEPS).unwrap();
        let verdict = |s: Scheme| keep.iter().find(|k| k.model.scheme == s).unwrap().verdict();
        assert_eq!(keep.len(), 2);
        assert_eq!(verdict(Scheme::T5), Some(Keeps::Within));
        assert_eq!(verdict(Scheme::Shaw), Some(Keeps::Beyond));
        assert!(capped_keep_their_loss(&changes, 0.0).is_err());
    }

    #[test]
    fn one_seed_gives_no_verdict() {
        let (rows, windows) = synthetic(&[(Scheme::Learned, 1.0), (Scheme::T5, 0.0)], 1);
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        let changes = scheme_changes(&table).unwrap();
        let pairs = relative_against_absolute(&table, &changes, &windows).unwrap();
        assert_eq!(pairs[0].tested.verdict(), None);
        let keep = capped_keep_their_loss(&changes, KEEPS).unwrap();
        assert_eq!(keep[0].verdict(), None);
        let without = ResultsTable::new(&rows, None, Mode::Nonoverlap).unwrap();
        assert!(scheme_changes(&without).is_err());
    }
}
