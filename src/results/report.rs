//! `posenc report`: a sweep's results folder as markdown, whole or in the two parts the
//! documentation pastes ([`ReportPart`]): the README's results table with its tests and the
//! plateau totals, and a page of details with everything else (the tests against a reference
//! model, the budget controls against their schemes, the tables of the other window modes,
//! every training run's gain over its last 20 %).

use std::path::Path;

use super::budget::{budget_effects, budget_markdown};
use super::curves::plateaus;
use super::files::{read_curves, read_results_dir, CURVES_FILE};
use super::markdown::{
    main_markdown, plateau_markdown, plateau_summary, primary_mode, reference_markdown,
};
use super::rows::{Mode, ModelKey, ResultRow, Scheme};
use super::table::ResultsTable;
use crate::error::invalid;
use crate::named::Named;
use crate::Result;

/// The reference model of `posenc report` when none is named: ALiBi as trained, whose loss
/// the literature finds flat past the training length.
pub const DEFAULT_REFERENCE: Scheme = Scheme::Alibi;

/// Which part of the report [`report`] writes (`posenc report --part`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReportPart {
    /// The table with its tests, then the details.
    #[default]
    All,
    /// The README's part: the table of the primary mode with its tests, and how many runs
    /// reached their plateau in one sentence ([`plateau_summary`]).
    Table,
    /// The rest: the tests against the reference model, each budget control against its
    /// scheme ([`budget_markdown`]), the table of every other mode the results have (mean ± sd,
    /// without tests), and every run's gain ([`plateau_markdown`]).
    Details,
}

impl ReportPart {
    /// Every part, in the order of `--part`'s help.
    pub const ALL: [ReportPart; 3] = [ReportPart::All, ReportPart::Table, ReportPart::Details];

    /// `all`, `table` or `details`.
    pub fn name(self) -> &'static str {
        match self {
            ReportPart::All => "all",
            ReportPart::Table => "table",
            ReportPart::Details => "details",
        }
    }

    /// The part named `name`.
    ///
    /// # Errors
    /// [`crate::Error::InvalidParameter`] for a name that is none of [`ReportPart::name`]'s.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| invalid("part", name, "all, table or details"))
    }
}

/// `posenc report`: the results folder `dir` (`ppl_vs_length.csv` and, when present, its
/// `windows/` folder and `curves.csv`) as markdown, without the final newline. The table of
/// `mode` (default [`primary_mode`]) has its tests against `reference` (a model label such as
/// `alibi` or `rope/ft-yarn`; default [`DEFAULT_REFERENCE`] when the table has it; `none` for
/// no reference); `part` chooses what is written ([`ReportPart`]), sections separated by a
/// blank line.
///
/// # Errors
/// As [`read_results_dir`], [`read_curves`] and [`ResultsTable::with_reference`]; a mode the
/// rows do not have, or a reference that is not a model of the table.
pub fn report(
    dir: &Path,
    mode: Option<&str>,
    reference: Option<&str>,
    part: ReportPart,
) -> Result<String> {
    let (rows, windows) = read_results_dir(dir)?;
    let mode = match mode {
        Some(name) => Mode::from_name(name)?,
        None => primary_mode(&rows).unwrap_or(Mode::Matched),
    };
    let in_mode = |key: &ModelKey| rows.iter().any(|r| r.mode == mode && r.key() == *key);
    let reference = match reference {
        Some("none") => None,
        Some(label) => Some(model_of(&rows, label)?),
        None => Some(ModelKey::base(DEFAULT_REFERENCE)).filter(|k| in_mode(k)),
    };
    let table = ResultsTable::with_reference(&rows, windows.as_deref(), mode, reference.as_ref())?;
    let curves = dir.join(CURVES_FILE);
    let runs = match curves.is_file() {
        true => Some(plateaus(&read_curves(&curves)?)?),
        false => None,
    };
    let mut sections = Vec::new();
    if part != ReportPart::Details {
        sections.push(main_markdown(&table));
    }
    if part == ReportPart::Table {
        sections.extend(runs.as_deref().map(plateau_summary));
    } else {
        sections.push(reference_markdown(&table));
        if let Some(windows) = windows.as_deref().filter(|_| table.has_change()) {
            sections.push(budget_markdown(&budget_effects(&table, windows)?));
        }
        for other in Mode::ALL.into_iter().filter(|m| *m != mode) {
            if rows.iter().any(|r| r.mode == other) {
                sections.push(main_markdown(&ResultsTable::new(&rows, None, other)?));
            }
        }
        sections.extend(runs.as_deref().map(plateau_markdown));
    }
    let sections: Vec<&str> = sections
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    Ok(sections.join("\n\n"))
}

/// The model of the rows whose label ([`ModelKey::label`]) is `label`.
fn model_of(rows: &[ResultRow], label: &str) -> Result<ModelKey> {
    rows.iter()
        .map(ResultRow::key)
        .find(|k| k.label() == label)
        .ok_or_else(|| {
            invalid(
                "reference",
                label,
                "a model of the results (its label, as the table names it), or none",
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::csv::csv_bytes;
    use crate::results::markdown::tests::{curve, sample, A};

    /// `posenc report` of a folder: the primary mode, the default reference when present,
    /// `none` for no reference, an unknown reference named, the plateau section with
    /// `curves.csv`.
    #[test]
    fn report_reads_a_results_folder() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (rows, windows) = sample();
        std::fs::write(dir.join("ppl_vs_length.csv"), csv_bytes(&rows).unwrap()).unwrap();
        std::fs::create_dir(dir.join("windows")).unwrap();
        std::fs::write(dir.join("windows/a.csv"), csv_bytes(&windows).unwrap()).unwrap();
        let all = |mode, reference| report(dir, mode, reference, ReportPart::All);
        let md = all(None, None).unwrap();
        assert!(md.contains("mode `nonoverlap`"), "{md}");
        assert!(md.contains("against `alibi`'s"), "{md}");
        assert!(!md.contains("Training:"), "{md}");
        let md = all(None, Some("none")).unwrap();
        assert!(!md.contains("against"), "{md}");
        let md = all(Some("nonoverlap"), Some("t5")).unwrap();
        assert!(md.contains("against `t5`'s"), "{md}");
        let e = all(None, Some("rope")).unwrap_err().to_string();
        assert!(e.contains("invalid reference = rope"), "{e}");
        assert!(all(Some("matched"), None).is_err());
        std::fs::write(
            dir.join("curves.csv"),
            csv_bytes(&[curve(A, 0, 80, 2.0), curve(A, 0, 100, 1.999)]).unwrap(),
        )
        .unwrap();
        let md = all(None, None).unwrap();
        assert!(
            md.ends_with("Runs on their plateau: 1 of 1 with a gain to measure."),
            "{md}"
        );
    }

    /// The table part and the details part together hold what the whole report holds: the
    /// table and the plateau totals in one, the reference, the other modes and every run in
    /// the other; each section once.
    #[test]
    fn the_parts_split_the_report() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let (mut rows, windows) = sample();
        rows.extend(ResultRow::in_mode(&rows, Mode::Sliding));
        std::fs::write(dir.join("ppl_vs_length.csv"), csv_bytes(&rows).unwrap()).unwrap();
        std::fs::create_dir(dir.join("windows")).unwrap();
        std::fs::write(dir.join("windows/a.csv"), csv_bytes(&windows).unwrap()).unwrap();
        std::fs::write(
            dir.join("curves.csv"),
            csv_bytes(&[curve(A, 0, 80, 2.0), curve(A, 0, 100, 1.999)]).unwrap(),
        )
        .unwrap();
        let part = |p| report(dir, None, None, p).unwrap();
        let (all, table, details) = (
            part(ReportPart::All),
            part(ReportPart::Table),
            part(ReportPart::Details),
        );
        let count = |md: &str, needle: &str| md.matches(needle).count();
        for (needle, in_table, in_details) in [
            ("mode `nonoverlap`", 1, 0),
            ("Rows are ranked by the change", 1, 0),
            ("Each change against `alibi`'s", 0, 1),
            ("mode `sliding`", 0, 1),
            ("Training: the validation loss", 0, 1),
            ("Runs on their plateau: 1 of 1", 1, 1),
        ] {
            assert_eq!(count(&table, needle), in_table, "{needle}: {table}");
            assert_eq!(count(&details, needle), in_details, "{needle}: {details}");
            assert_eq!(
                count(&all, needle),
                in_details.max(in_table),
                "{needle}: {all}"
            );
        }
        assert!(all.starts_with(table.lines().next().unwrap()), "{all}");
        assert!(all.ends_with(&details), "{all}");
        assert!(!table.ends_with('\n') && !details.starts_with('\n'));
        for p in ReportPart::ALL {
            assert_eq!(ReportPart::from_name(p.name()).unwrap(), p);
        }
        let e = ReportPart::from_name("readme").unwrap_err().to_string();
        assert!(e.contains("invalid part = readme"), "{e}");
    }
}
