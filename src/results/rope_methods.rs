//! What is done about RoPE's extrapolation, asked of a results table: every model of the RoPE
//! scheme other than RoPE as trained and its budget control (`budget-x2`, [`super::budget`]) —
//! a scaling or a ReRoPE-style method applied at inference (the variant names the method:
//! `yarn`, `rerope`, ...) or a fine-tune (`ft-*`) — and the RoPE variants trained from scratch
//! ([`TRAINED_ALTERNATIVES`], as trained), against plain RoPE ([`super::against_base`]: its
//! change $\Delta_m$ from the shortest length to the longest, and
//! $\Delta_m - \Delta_\text{rope}$, all methods one Holm family).
//! [`Verdict::Below`](super::inference::Verdict::Below) means the method makes RoPE's loss rise
//! less.

use super::against_base::{against_bases, AgainstBase};
use super::rows::{ModelKey, Scheme, WindowRow};
use super::table::ResultsTable;
use crate::error::ensure;
use crate::Result;

/// One RoPE method of a table: its `vs_base` is $\Delta_m - \Delta_\text{rope}$.
pub type RopeMethod = AgainstBase;

/// The schemes that change RoPE itself and are trained from scratch, each tested against plain
/// RoPE as a method: partial RoPE, p-RoPE (the slowest pairs left unrotated), randomized
/// positions, and RoPE layers with NoPE layers between.
pub const TRAINED_ALTERNATIVES: [Scheme; 4] = [
    Scheme::PartialRope,
    Scheme::PRope,
    Scheme::RandomRope,
    Scheme::RopeNope,
];

/// Every RoPE method of `table` (in its order) against plain RoPE ([`against_bases`]), on
/// `windows` in the table's mode.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a table without the tested change or without plain
/// RoPE; as [`super::inference::difference_of_changes`].
pub fn rope_methods(table: &ResultsTable, windows: &[WindowRow]) -> Result<Vec<RopeMethod>> {
    let rope = ModelKey::base(Scheme::Rope);
    ensure(
        table.has_change() && table.rows.iter().any(|r| r.model == rope),
        "results table",
        table.mode.name(),
        "a table with its tested change and plain RoPE",
    )?;
    let methods = table.rows.iter().filter(|r| {
        let m = &r.model;
        (m.scheme == Scheme::Rope && !m.is_base() && !m.is_budget_control())
            || (TRAINED_ALTERNATIVES.contains(&m.scheme) && m.is_base())
    });
    against_bases(
        table,
        windows,
        methods.map(|r| (r.model.clone(), rope.clone())),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::inference::Verdict;
    use crate::results::paired::rising_models;
    use crate::results::rows::{Mode, ResultRow};

    /// Plain RoPE rises by 1 + seed/100, `rope/yarn` and p-RoPE by 0.1 + seed/100, `rope/ntk`
    /// by 1 + seed/50: YaRN and p-RoPE rise less than RoPE, NTK no differently; the budget
    /// controls (RoPE's and p-RoPE's) are no method.
    #[test]
    fn methods_against_plain_rope() {
        let models = [
            (Scheme::Rope, "base", 1.0, 0.01),
            (Scheme::Rope, "yarn", 0.1, 0.01),
            (Scheme::Rope, "ntk", 1.0, 0.02),
            (Scheme::Rope, "budget-x2", 1.0, 0.01),
            (Scheme::PRope, "base", 0.1, 0.01),
            (Scheme::PRope, "budget-x2", 0.1, 0.01),
        ];
        let (rows, windows) = rising_models(&models, 5, Mode::Nonoverlap, |seed| seed as f64);
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        let methods = rope_methods(&table, &windows).unwrap();
        assert_eq!(methods.len(), 3);
        let of = |v: &str| methods.iter().find(|m| m.model.variant == v).unwrap();
        assert_eq!(of("yarn").vs_base.verdict(), Some(Verdict::Below));
        assert_eq!(of("base").model.scheme, Scheme::PRope);
        assert_eq!(of("base").vs_base.verdict(), Some(Verdict::Below));
        assert!((of("yarn").vs_base.comparison.mean + 0.9).abs() < 1e-9);
        assert_eq!(of("ntk").vs_base.verdict(), Some(Verdict::NotDetected));
        let no_rope: Vec<ResultRow> = rows
            .iter()
            .filter(|r| r.scheme != Scheme::Rope || r.variant != "base")
            .cloned()
            .collect();
        let table = ResultsTable::new(&no_rope, Some(&windows), Mode::Nonoverlap).unwrap();
        assert!(rope_methods(&table, &windows).is_err());
    }
}
