//! What more training changes, asked of a results table: each budget control (a scheme
//! trained from scratch on a multiple of the bytes, `budget-x2`) against its scheme as trained
//! ([`super::against_base`]: its change $\Delta_b$ from the shortest length to the longest, and
//! $\Delta_b - \Delta_\text{base}$, all budget controls one Holm family). A detected difference
//! says that the scheme's change moves with the budget, so a gap between schemes of that size
//! may be training, not position encoding.

use super::against_base::{against_bases, labels_with, AgainstBase};
use super::inference::Verdict;
use super::markdown::{list, markdown_table};
use super::rows::{ModelKey, WindowRow};
use super::table::{test_cells, test_header, ResultsTable};
use crate::error::ensure;
use crate::Result;

/// One budget control of a table against its scheme as trained ([`AgainstBase::base`]).
pub type BudgetEffect = AgainstBase;

/// Every budget control of `table` whose scheme as trained is in it too (in the table's
/// order) against that scheme ([`against_bases`]), on `windows` in the table's mode.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a table without the tested change; as
/// [`super::inference::difference_of_changes`].
pub fn budget_effects(table: &ResultsTable, windows: &[WindowRow]) -> Result<Vec<BudgetEffect>> {
    ensure(
        table.has_change(),
        "results table",
        table.mode.name(),
        "a table with its tested change",
    )?;
    let controls = table.rows.iter().filter(|r| r.model.is_budget_control());
    against_bases(
        table,
        windows,
        controls.map(|r| (r.model.clone(), ModelKey::base(r.model.scheme))),
    )
}

/// The budget controls as markdown: a table (control, seeds, its change, its scheme's change as
/// trained, then the difference with its tests) and a sentence naming the
/// controls by verdict; empty without a control.
pub fn budget_markdown(effects: &[BudgetEffect]) -> String {
    if effects.is_empty() {
        return String::new();
    }
    let mut header = ["model", "seeds", "change", "as trained", "difference"]
        .map(String::from)
        .to_vec();
    header.extend(test_header());
    let cells: Vec<Vec<String>> = effects
        .iter()
        .map(|e| {
            let (change, diff) = (e.change.comparison.mean, e.vs_base.comparison.mean);
            let mut row = vec![
                e.model.label(),
                e.vs_base.comparison.n_seeds.to_string(),
                format!("{change:+.3}"),
                format!("{:+.3}", change - diff),
            ];
            row.extend(test_cells(&e.vs_base, ["moves up", "moves down"]));
            row
        })
        .collect();
    let named = |v: Verdict| list(&labels_with(effects, Some(v)));
    let untested = labels_with(effects, None);
    let untested = match untested.is_empty() {
        true => String::new(),
        false => format!(" With one seed, untested: {}.", list(&untested)),
    };
    format!(
        "Each budget control (a scheme trained from scratch on more bytes) against its scheme as \
         trained: the change from the shortest length to the longest of each, and their difference \
         on the same windows and seeds, the controls one Holm family:\n\n{}\nThe change moves up \
         with more training for {}; down for {}; no move is detected for {}.{untested}\n",
        markdown_table(&header, &cells),
        named(Verdict::Above),
        named(Verdict::Below),
        named(Verdict::NotDetected),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::inference::Verdict;
    use crate::results::paired::rising_models;
    use crate::results::rows::{Mode, Scheme};

    /// NoPE rises by 1 + seed/100 as trained and by 0.5 + seed/100 on twice the bytes (its
    /// change moves: -0.5); RoPE by 1 + seed/100 and 1 + seed/50 (no move detected); ALiBi's
    /// control has no ALiBi as trained to pair with and is left out.
    #[test]
    fn budget_controls_against_their_scheme() {
        let models = [
            (Scheme::Nope, "base", 1.0, 0.01),
            (Scheme::Nope, "budget-x2", 0.5, 0.01),
            (Scheme::Rope, "base", 1.0, 0.01),
            (Scheme::Rope, "budget-x2", 1.0, 0.02),
            (Scheme::Alibi, "budget-x2", 0.0, 0.01),
        ];
        let (rows, windows) = rising_models(&models, 3, Mode::Matched, |seed| (seed + 1) as f64);
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Matched).unwrap();
        let effects = budget_effects(&table, &windows).unwrap();
        let labels: Vec<String> = effects.iter().map(|e| e.model.label()).collect();
        assert_eq!(labels, ["nope/budget-x2", "rope/budget-x2"]);
        let (nope, rope) = (&effects[0], &effects[1]);
        assert_eq!(nope.base, ModelKey::base(Scheme::Nope));
        assert!((nope.vs_base.comparison.mean + 0.5).abs() < 1e-9);
        assert_eq!(nope.vs_base.verdict(), Some(Verdict::Below));
        // RoPE: differences 0.01, -0.02, 0.03 over the seeds, mean 0.02/3
        assert!((rope.vs_base.comparison.mean - 0.02 / 3.0).abs() < 1e-9);
        assert_eq!(rope.vs_base.verdict(), Some(Verdict::NotDetected));
        assert!((nope.change.comparison.mean - (0.5 + 0.02 / 3.0)).abs() < 1e-9);
        let md = budget_markdown(&effects);
        assert!(
            md.contains("| model | seeds | change | as trained | difference | se seeds |"),
            "{md}"
        );
        assert!(
            md.contains("| nope/budget-x2 | 3 | +0.507 | +1.007 | -0.500 |"),
            "{md}"
        );
        assert!(
            md.contains("down for `nope/budget-x2`; no move is detected for `rope/budget-x2`."),
            "{md}"
        );
        assert_eq!(budget_markdown(&[]), "");
        let without = ResultsTable::new(&rows, None, Mode::Matched).unwrap();
        assert!(budget_effects(&without, &windows).is_err());
    }
}
