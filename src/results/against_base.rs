//! A model's change against a base model's, asked of a results table: for each pair (model,
//! base) of its rows, two tests on paired windows ([`super::inference::compare`]):
//!
//! - the model's change from the table's shortest length to its longest, $\Delta_m$, as the
//!   table tests it (the table's Holm family);
//! - the same change against the base's, $\Delta_m - \Delta_b$ on the seeds both have, all
//!   pairs one Holm family.
//!
//! The RoPE methods against plain RoPE ([`mod@super::rope_methods`]) and the budget controls
//! against their schemes as trained ([`super::budget`]) are two such families.

use super::inference::{difference_of_changes, holm_family, Tested, Verdict};
use super::rows::{ModelKey, WindowRow};
use super::table::ResultsTable;
use crate::Result;

/// One model of a table against its base.
#[derive(Debug, Clone, PartialEq)]
pub struct AgainstBase {
    /// The model.
    pub model: ModelKey,
    /// The model it is held against.
    pub base: ModelKey,
    /// $\Delta_m$, tested in the table's family.
    pub change: Tested,
    /// $\Delta_m - \Delta_b$, tested in the family of the pairs.
    pub vs_base: Tested,
}

/// Each pair of `pairs` (model, base) whose model has its tested change in `table` and whose
/// base is a row of it, in the order of `pairs`, on `windows` in the table's mode; the
/// differences of changes one Holm family.
///
/// # Errors
/// As [`difference_of_changes`] (a pair without paired windows).
pub fn against_bases(
    table: &ResultsTable,
    windows: &[WindowRow],
    pairs: impl IntoIterator<Item = (ModelKey, ModelKey)>,
) -> Result<Vec<AgainstBase>> {
    let (mut kept, mut comparisons) = (Vec::new(), Vec::new());
    for (model, base) in pairs {
        let change = table
            .rows
            .iter()
            .find(|r| r.model == model)
            .and_then(|r| r.change.clone());
        if let (Some(change), true) = (change, table.rows.iter().any(|r| r.model == base)) {
            let d = difference_of_changes(windows, table.mode, &model, &base, table.span())?;
            comparisons.push(d);
            kept.push((model, base, change));
        }
    }
    Ok(kept
        .into_iter()
        .zip(holm_family(comparisons)?)
        .map(|((model, base, change), vs_base)| AgainstBase {
            model,
            base,
            change,
            vs_base,
        })
        .collect())
}

/// The labels of the models of `tested` whose difference from their base has `verdict`
/// (`None`: untested, one seed), in order.
pub fn labels_with(tested: &[AgainstBase], verdict: Option<Verdict>) -> Vec<String> {
    tested
        .iter()
        .filter(|t| t.vs_base.verdict() == verdict)
        .map(|t| t.model.label())
        .collect()
}
