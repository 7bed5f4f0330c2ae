//! Checks on a sweep's rows that a reader of its results relies on: which seeds each model has
//! ([`models_with_seeds`]) and whether a fresh evaluation reproduces the rows
//! ([`reproduction`]).

use super::rows::{Mode, ModelKey, ResultRow};
use crate::error::invalid;
use crate::Result;

/// Every model of the rows with its seeds (ascending), models in order of first appearance.
pub fn models_with_seeds(rows: &[ResultRow]) -> Vec<(ModelKey, Vec<u64>)> {
    let mut models: Vec<(ModelKey, Vec<u64>)> = Vec::new();
    for r in rows {
        match models.iter_mut().find(|(k, _)| *k == r.key()) {
            Some((_, seeds)) if !seeds.contains(&r.seed) => seeds.push(r.seed),
            Some(_) => {}
            None => models.push((r.key(), vec![r.seed])),
        }
    }
    for (_, seeds) in &mut models {
        seeds.sort_unstable();
    }
    models
}

/// A fresh evaluation against the shipped rows of one model and seed ([`reproduction`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Reproduction {
    /// The lengths compared, ascending.
    pub lengths: Vec<usize>,
    /// Each shipped row as the tables print it ([`printed`]).
    pub shipped: Vec<String>,
    /// Each fresh row as printed.
    pub live: Vec<String>,
    /// The lengths whose printed rows differ.
    pub differing: Vec<usize>,
    /// $\max_L |x^{shipped}_L - x^{live}_L|$, nats per byte.
    pub largest: f64,
}

/// A row as the tables print it: nats, standard error, bits and perplexity to 4 decimals, and
/// the bytes scored.
pub fn printed(r: &ResultRow) -> String {
    format!(
        "{:.4} {:.4} {:.4} {:.4} {}",
        r.nats_per_byte, r.std_error, r.bits_per_byte, r.perplexity, r.tokens_scored
    )
}

/// The `live` rows (a fresh `posenc eval` of one checkpoint) against the `shipped` rows of
/// `model` and `seed` in `mode`, at every length of the live rows.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for no live row, or a live length without a shipped
/// row.
pub fn reproduction(
    shipped: &[ResultRow],
    live: &[ResultRow],
    model: &ModelKey,
    seed: u64,
    mode: Mode,
) -> Result<Reproduction> {
    let mut live: Vec<&ResultRow> = live.iter().filter(|r| r.mode == mode).collect();
    live.sort_by_key(|r| r.eval_len);
    if live.is_empty() {
        return Err(invalid(
            "live rows",
            "none",
            format!("rows in {}", mode.name()),
        ));
    }
    let mut out = Reproduction {
        lengths: Vec::new(),
        shipped: Vec::new(),
        live: Vec::new(),
        differing: Vec::new(),
        largest: 0.0,
    };
    for again in live {
        let l = again.eval_len;
        let row = shipped
            .iter()
            .find(|r| r.key() == *model && r.seed == seed && r.mode == mode && r.eval_len == l)
            .ok_or_else(|| {
                invalid(
                    "length",
                    l,
                    format!("a shipped length of {} seed {seed}", model.label()),
                )
            })?;
        if printed(row) != printed(again) {
            out.differing.push(l);
        }
        out.largest = out
            .largest
            .max((row.nats_per_byte - again.nats_per_byte).abs());
        out.lengths.push(l);
        out.shipped.push(printed(row));
        out.live.push(printed(again));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::rows::Scheme;

    #[test]
    fn seeds_are_listed_per_model_in_order_of_appearance() {
        let rows: Vec<ResultRow> = [
            (Scheme::T5, 2),
            (Scheme::Rope, 0),
            (Scheme::T5, 0),
            (Scheme::T5, 2),
        ]
        .iter()
        .map(|&(s, seed)| ResultRow::example(s, "base", 128, seed, 1.0))
        .collect();
        let models = models_with_seeds(&rows);
        assert_eq!(models[0], (ModelKey::base(Scheme::T5), vec![0, 2]));
        assert_eq!(models[1], (ModelKey::base(Scheme::Rope), vec![0]));
    }

    /// Equal rows reproduce; a change in the fifth decimal of the loss does not print
    /// differently, one in the fourth does.
    #[test]
    fn a_reproduction_compares_the_printed_digits() {
        let rope = ModelKey::base(Scheme::Rope);
        let shipped: Vec<ResultRow> = [128, 256]
            .iter()
            .map(|&l| ResultRow::example(Scheme::Rope, "base", l, 0, 1.5))
            .collect();
        let mut live = shipped.clone();
        let same = reproduction(&shipped, &live, &rope, 0, Mode::Nonoverlap).unwrap();
        assert!(same.differing.is_empty() && same.largest == 0.0);
        assert_eq!(same.lengths, [128, 256]);
        live[1].nats_per_byte += 2e-4;
        let changed = reproduction(&shipped, &live, &rope, 0, Mode::Nonoverlap).unwrap();
        assert_eq!(changed.differing, [256]);
        assert!((changed.largest - 2e-4).abs() < 1e-12);
        assert!(reproduction(&shipped, &live, &rope, 1, Mode::Nonoverlap).is_err());
        assert!(reproduction(&shipped, &live, &rope, 0, Mode::Sliding).is_err());
    }
}
