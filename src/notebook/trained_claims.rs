//! Notebook 10's two questions to the trained models ([`crate::results::families`]) as
//! DataFrames and as the sentences the verdicts carry, and what the RoPE methods change
//! ([`crate::results::rope_methods()`]).

use polars::prelude::DataFrame;

use super::columns::Columns;
use super::results::frame;
use crate::results::markdown::joined_or_none;
use crate::results::{
    labels_with, KeepTest, Keeps, PairTest, Relation, ResultsTable, RopeMethod, Scheme,
    SchemeChange, Verdict,
};
use crate::Result;

/// The name of a [`Relation`].
fn relation_name(relation: Relation) -> &'static str {
    match relation {
        Relation::Absolute => "absolute",
        Relation::Relative => "relative",
        Relation::Neither => "neither",
    }
}

/// The models trained from scratch ([`crate::results::scheme_changes`]), one row each:
/// `model`, `family`, `relation`, `capped`, `seeds`, `change` (from the windows, nats/byte),
/// `change from the rows`, `se seeds`, `p Holm` (both NaN with one seed) and `verdict`
/// (`rises`, `falls`, `not detected`, `one seed`).
///
/// # Errors
/// [`crate::Error::Io`] if polars refuses the columns.
pub fn changes_frame(changes: &[SchemeChange]) -> Result<DataFrame> {
    let c = Columns(changes);
    frame(vec![
        c.text("model", |c| c.model.label()),
        c.text("family", |c| c.family.name.into()),
        c.text("relation", |c| relation_name(c.family.relation).into()),
        c.column("capped", |c| c.family.capped),
        c.count("seeds", |c| c.change.comparison.n_seeds),
        c.number("change", |c| c.change.comparison.mean),
        c.number("change from the rows", |c| c.change_rows),
        c.seed_se(|c| &c.change),
        c.p_holm(|c| &c.change),
        c.verdict("verdict", |c| &c.change, ["rises", "falls"]),
    ])
}

/// Question 1, one row per pair ([`crate::results::relative_against_absolute`]): `relative`,
/// `absolute`, `change r − change a` (nats/byte), `se seeds`, `p Holm` (both NaN with one
/// seed) and `verdict` (`relative changes less`, `relative changes more`, `not detected`, `one
/// seed`).
///
/// # Errors
/// [`crate::Error::Io`] if polars refuses the columns.
pub fn pairs_frame(pairs: &[PairTest]) -> Result<DataFrame> {
    let c = Columns(pairs);
    frame(vec![
        c.text("relative", |p| p.relative.label()),
        c.text("absolute", |p| p.absolute.label()),
        c.number("change r − change a", |p| p.tested.comparison.mean),
        c.seed_se(|p| &p.tested),
        c.p_holm(|p| &p.tested),
        c.verdict(
            "verdict",
            |p| &p.tested,
            ["relative changes more", "relative changes less"],
        ),
    ])
}

/// The words of a [`Keeps`] verdict.
fn keeps_words(test: &KeepTest) -> &'static str {
    match test.verdict() {
        Some(Keeps::Within) => "keeps its loss",
        Some(Keeps::Beyond) => "does not keep its loss",
        Some(Keeps::Undecided) => "undecided",
        None => "one seed",
    }
}

/// Question 2, one row per capped model ([`crate::results::capped_keep_their_loss`]):
/// `model`, `change` (nats/byte), `se seeds`, `p within`, `p beyond` (Holm-adjusted; all three
/// NaN with one seed) and `verdict` (`keeps its loss`, `does not keep its loss`, `undecided`, `one
/// seed`).
///
/// # Errors
/// [`crate::Error::Io`] if polars refuses the columns.
pub fn keeps_frame(tests: &[KeepTest]) -> Result<DataFrame> {
    let c = Columns(tests);
    frame(vec![
        c.text("model", |t| t.model.label()),
        c.number("change", |t| t.change.mean),
        c.number("se seeds", |t| t.change.seed_se().unwrap_or(f64::NAN)),
        c.number("p within", |t| t.p_within.unwrap_or(f64::NAN)),
        c.number("p beyond", |t| t.p_beyond.unwrap_or(f64::NAN)),
        c.text("verdict", |t| keeps_words(t).into()),
    ])
}

/// The answer to question 1 that the verdicts carry: yes only when every pair was tested and
/// every relative model changes less than every absolute one; no when some relative model
/// changes more than some absolute one; otherwise how many pairs are shown either way.
pub fn relative_answer(pairs: &[PairTest]) -> String {
    let count = |v: Verdict| {
        pairs
            .iter()
            .filter(|p| p.tested.verdict() == Some(v))
            .count()
    };
    let (less, more) = (count(Verdict::Below), count(Verdict::Above));
    let untested = pairs.iter().filter(|p| p.tested.p_holm.is_none()).count();
    let n = pairs.len();
    if n == 0 {
        "no relative and absolute models to compare yet".into()
    } else if untested > 0 {
        format!("{untested} of {n} pairs have one seed: no verdict for them")
    } else if less == n {
        format!("yes in this table: in all {n} pairs the relative model changes less")
    } else if more > 0 {
        format!("no: in {more} of {n} pairs the relative model changes more than the absolute one")
    } else {
        format!(
            "not shown: the relative model changes less in {less} of {n} pairs, \
             no difference is detected in the other {}",
            n - less
        )
    }
}

/// The answer to question 2 that the verdicts carry: which capped models keep their loss,
/// which do not, which are undecided or have one seed.
pub fn capped_answer(tests: &[KeepTest]) -> String {
    let named = |words: &str| {
        let names: Vec<String> = tests
            .iter()
            .filter(|t| keeps_words(t) == words)
            .map(|t| t.model.label())
            .collect();
        joined_or_none(&names)
    };
    let beyond = tests.iter().any(|t| t.verdict() == Some(Keeps::Beyond));
    format!(
        "keep their loss: {}; do not: {}; undecided: {}; one seed: {}{}",
        named("keeps its loss"),
        named("does not keep its loss"),
        named("undecided"),
        named("one seed"),
        if beyond {
            " (so being capped is not enough)"
        } else {
            ""
        }
    )
}

/// The RoPE methods ([`crate::results::rope_methods()`]), one row each: `method`, `seeds`,
/// `change` (nats/byte), `change verdict` (`rises`, `falls`, `not detected`, `one seed`),
/// `change − RoPE's`, `se seeds` and `p Holm` of that contrast (NaN with one seed), and
/// `against RoPE` (`rises less`, `rises more`, `not detected`, `one seed`).
///
/// # Errors
/// [`crate::Error::Io`] if polars refuses the columns.
pub fn rope_methods_frame(methods: &[RopeMethod]) -> Result<DataFrame> {
    let c = Columns(methods);
    frame(vec![
        c.text("method", |m| m.model.label()),
        c.count("seeds", |m| m.change.comparison.n_seeds),
        c.number("change", |m| m.change.comparison.mean),
        c.verdict("change verdict", |m| &m.change, ["rises", "falls"]),
        c.number("change − RoPE's", |m| m.vs_base.comparison.mean),
        c.seed_se(|m| &m.vs_base),
        c.p_holm(|m| &m.vs_base),
        c.verdict("against RoPE", |m| &m.vs_base, ["rises more", "rises less"]),
    ])
}

/// The answer the verdicts carry to *what do the RoPE methods do about RoPE's rise*: the
/// methods whose change is shown smaller than plain RoPE's, larger, neither, or untested (one
/// seed); and of the first, those whose own change is not shown to rise either.
pub fn rope_answer(methods: &[RopeMethod]) -> String {
    let named = |v: Option<Verdict>| joined_or_none(&labels_with(methods, v));
    let flat_and_less: Vec<String> = methods
        .iter()
        .filter(|m| {
            m.vs_base.verdict() == Some(Verdict::Below)
                && m.change.verdict() != Some(Verdict::Above)
        })
        .map(|m| m.model.label())
        .collect();
    format!(
        "rise less than plain RoPE: {}; of those, no rise detected at all: {}; rise more: {}; \
         no difference detected: {}; one seed, untested: {}",
        named(Some(Verdict::Below)),
        joined_or_none(&flat_and_less),
        named(Some(Verdict::Above)),
        named(Some(Verdict::NotDetected)),
        named(None),
    )
}

/// The RoPE variants of `table` whose mean loss at the table's shortest length is more than
/// `threshold` nats/byte above plain RoPE's, each as `label (+gap)`, joined by `, `; `none`
/// when there are none (or no plain RoPE).
///
/// A change $\Delta = \bar x_{L_{max}} - \bar x_{L_{min}}$ measured from such a start (a
/// `-matched` fine-tune runs at $s = L/L_{train} = 1$ there, not at its fine-tuning factor)
/// says little about extrapolation: a small change may be a bad start, not a flat line.
pub fn rope_baseline_gaps(table: &ResultsTable, threshold: f64) -> String {
    let first = |r: &crate::results::TableRow| r.cells.first().map_or(f64::NAN, |c| c.mean);
    let rows = || table.rows.iter().filter(|r| r.model.scheme == Scheme::Rope);
    let Some(rope) = rows().find(|r| r.model.is_base()).map(first) else {
        return "none".to_string();
    };
    let gaps: Vec<String> = rows()
        .filter(|r| first(r) - rope > threshold)
        .map(|r| format!("{} ({:+.3})", r.model.label(), first(r) - rope))
        .collect();
    joined_or_none(&gaps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::results::{column_f64, column_str};
    use crate::results::{
        capped_keep_their_loss, relative_against_absolute, scheme_changes, Mode, ResultsTable,
        KEEPS,
    };

    /// The shipped results: every frame has a row per model or pair, the change from the
    /// windows equals the change from the rows, and the answers name what the frames show.
    #[test]
    fn frames_and_answers_of_the_shipped_results() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results");
        let (rows, windows) = crate::results::read_results_dir(&dir).unwrap();
        let windows = windows.unwrap();
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        let changes = scheme_changes(&table).unwrap();
        let df = changes_frame(&changes).unwrap();
        assert_eq!(df.height(), changes.len());
        let (a, b) = (
            column_f64(&df, "change").unwrap(),
            column_f64(&df, "change from the rows").unwrap(),
        );
        assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-9));
        let pairs = relative_against_absolute(&table, &changes, &windows).unwrap();
        let df = pairs_frame(&pairs).unwrap();
        assert_eq!(df.height(), pairs.len());
        let verdicts = column_str(&df, "verdict").unwrap();
        let less = verdicts
            .iter()
            .filter(|v| *v == "relative changes less")
            .count();
        let answer = relative_answer(&pairs);
        assert_eq!(answer.starts_with("yes"), less == pairs.len(), "{answer}");
        let keeps = capped_keep_their_loss(&changes, KEEPS).unwrap();
        let df = keeps_frame(&keeps).unwrap();
        let answer = capped_answer(&keeps);
        for (model, verdict) in column_str(&df, "model")
            .unwrap()
            .iter()
            .zip(column_str(&df, "verdict").unwrap())
        {
            assert!(
                answer.contains(model.as_str()),
                "{answer} lacks {model} ({verdict})"
            );
        }
    }

    /// The shipped results' RoPE methods: a row each, and every one named in the answer.
    #[test]
    fn rope_methods_of_the_shipped_results() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results");
        let (rows, windows) = crate::results::read_results_dir(&dir).unwrap();
        let windows = windows.unwrap();
        let table = ResultsTable::new(&rows, Some(&windows), Mode::Nonoverlap).unwrap();
        let methods = crate::results::rope_methods(&table, &windows).unwrap();
        assert!(methods.len() >= 4);
        let df = rope_methods_frame(&methods).unwrap();
        assert_eq!(df.height(), methods.len());
        let answer = rope_answer(&methods);
        for m in column_str(&df, "method").unwrap() {
            assert!(answer.contains(m.as_str()), "{answer} lacks {m}");
        }
        // ft-linear-matched runs at s = 1 at 128 bytes, 1 nat/byte above plain RoPE there
        let gaps = rope_baseline_gaps(&table, 0.1);
        assert!(gaps.contains("rope/ft-linear-matched (+1.0"), "{gaps}");
        assert!(
            !gaps.contains("rope/yarn") && !gaps.contains("rope (") && !gaps.contains("rope/ntk"),
            "{gaps}"
        );
        assert_eq!(rope_baseline_gaps(&table, 10.0), "none");
    }

    #[test]
    fn empty_inputs_say_so() {
        assert!(relative_answer(&[]).starts_with("no relative"));
        assert!(capped_answer(&[]).contains("keep their loss: none"));
        assert_eq!(changes_frame(&[]).unwrap().height(), 0);
    }
}
