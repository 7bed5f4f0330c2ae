//! What is done about RoPE's extrapolation, asked of a results table: every model of the RoPE
//! scheme other than RoPE as trained and its budget control (`budget-x2`, [`super::budget`]) —
//! a scaling or a ReRoPE-style method applied at inference (the variant names the method:
//! `yarn`, `rerope`, ...) or a fine-tune (`ft-*`) — with two
//! tests on paired windows ([`super::inference::compare`]):
//!
//! - its change from the table's shortest length to its longest, $\Delta_m$, as the table
//!   tests it (the table's Holm family);
//! - the same change against plain RoPE's, $\Delta_m - \Delta_\text{rope}$, all methods one
//!   Holm family: [`Verdict::Below`] means the method makes RoPE's loss rise less.

use super::inference::{difference_of_changes, holm_family, Tested};
use super::rows::{ModelKey, Scheme, WindowRow};
use super::table::ResultsTable;
use crate::error::ensure;
use crate::Result;

/// One RoPE method of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct RopeMethod {
    /// The model (scheme RoPE, a variant other than `base`).
    pub model: ModelKey,
    /// $\Delta_m$, tested in the table's family.
    pub change: Tested,
    /// $\Delta_m - \Delta_\text{rope}$, tested in the methods' family.
    pub vs_rope: Tested,
}

/// Every RoPE method of `table` (in its order), on `windows` in the table's mode.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a table without the tested change or without plain
/// RoPE; as [`difference_of_changes`].
pub fn rope_methods(table: &ResultsTable, windows: &[WindowRow]) -> Result<Vec<RopeMethod>> {
    let rope = ModelKey::base(Scheme::Rope);
    ensure(
        table.has_change() && table.rows.iter().any(|r| r.model == rope),
        "results table",
        table.mode.name(),
        "a table with its tested change and plain RoPE",
    )?;
    let (mut models, mut comparisons) = (Vec::new(), Vec::new());
    for row in table.rows.iter().filter(|r| {
        r.model.scheme == Scheme::Rope && !r.model.is_base() && !r.model.is_budget_control()
    }) {
        if let Some(change) = row.change.clone() {
            let d = difference_of_changes(windows, table.mode, &row.model, &rope, table.span())?;
            comparisons.push(d);
            models.push((row.model.clone(), change));
        }
    }
    Ok(models
        .into_iter()
        .zip(holm_family(comparisons)?)
        .map(|((model, change), vs_rope)| RopeMethod {
            model,
            change,
            vs_rope,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::inference::Verdict;
    use crate::results::paired::{window, WindowKey};
    use crate::results::rows::{Mode, ResultRow};

    /// Plain RoPE rises by 1 + seed/100, `rope/yarn` by 0.1 + seed/100, `rope/ntk` by
    /// 1 + seed/50: YaRN rises less than RoPE, NTK no differently; the budget control is no
    /// method.
    #[test]
    fn methods_against_plain_rope() {
        let (mut rows, mut windows) = (Vec::new(), Vec::new());
        for (variant, rise, per_seed) in [
            ("base", 1.0, 0.01),
            ("yarn", 0.1, 0.01),
            ("ntk", 1.0, 0.02),
            ("budget-x2", 1.0, 0.01),
        ] {
            let model = ModelKey::new(Scheme::Rope, variant);
            for seed in 0..5u64 {
                let flip = if seed % 2 == 0 { 1.0 } else { -1.0 };
                for (len, add) in [
                    (128usize, 0.0),
                    (2048, rise + flip * per_seed * seed as f64),
                ] {
                    let k = WindowKey::of(&model, Mode::Nonoverlap, len);
                    for w in 0..3 {
                        windows.push(window(&k, seed, w * 2048, 10, 1.5 + add));
                    }
                    rows.push(ResultRow::example(
                        Scheme::Rope,
                        variant,
                        len,
                        seed,
                        1.5 + add,
                    ));
                }
            }
        }
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        let methods = rope_methods(&table, &windows).unwrap();
        assert_eq!(methods.len(), 2);
        let of = |v: &str| methods.iter().find(|m| m.model.variant == v).unwrap();
        assert_eq!(of("yarn").vs_rope.verdict(), Some(Verdict::Below));
        assert!((of("yarn").vs_rope.comparison.mean + 0.9).abs() < 1e-9);
        assert_eq!(of("ntk").vs_rope.verdict(), Some(Verdict::NotDetected));
        let no_rope: Vec<ResultRow> = rows
            .iter()
            .filter(|r| r.variant != "base")
            .cloned()
            .collect();
        let table = ResultsTable::new(&no_rope, Some(&windows), Mode::Nonoverlap).unwrap();
        assert!(rope_methods(&table, &windows).is_err());
    }
}
