//! Numbers over training seeds from the sweep's results: the mean and spread over seeds of
//! each row of `ppl_vs_length.csv` ([`seed_summaries`]), with the mean and standard deviation
//! written once, [`mean_and_sd`] (the curves over seeds of [`super::curves`], the paired
//! differences of [`super::paired`] and the tests of [`super::inference`] use it too).

use std::collections::HashMap;

use serde::Serialize;

use super::rows::{Mode, ModelKey, ResultRow, Scheme};
use crate::error::{ensure, invalid};
use crate::Result;

/// One model (scheme and variant) at one length in one mode, summarised over its seeds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SeedSummary {
    /// Position scheme.
    pub scheme: Scheme,
    /// As in [`ResultRow::variant`].
    pub variant: String,
    /// Training length (the same for every seed).
    pub train_len: usize,
    /// `matched`, `nonoverlap` or `sliding`.
    pub mode: Mode,
    /// Evaluated length.
    pub eval_len: usize,
    /// Mean over the $S$ seeds of [`ResultRow::nats_per_byte`]:
    /// $\bar x = \frac{1}{S}\sum_s x_s$.
    pub mean: f64,
    /// Sample standard deviation over the seeds,
    /// $\sqrt{\frac{1}{S-1}\sum_s (x_s - \bar x)^2}$; 0 with one seed (no spread to see, not
    /// an absence of it).
    pub sd: f64,
    /// The seeds, ascending.
    pub seeds: Vec<u64>,
    /// [`ResultRow::scaling_factor`], the same for every seed.
    pub scaling_factor: Option<f64>,
    /// [`ResultRow::params`], the same for every seed.
    pub params: usize,
}

impl SeedSummary {
    /// The summary's model.
    pub fn key(&self) -> ModelKey {
        ModelKey::new(self.scheme, self.variant.clone())
    }
}

/// `scheme/variant mode eval_len` ([`ModelKey::id`]), how the errors name a model at a length.
pub(crate) fn describe(key: &ModelKey, mode: Mode, eval_len: usize) -> String {
    format!("{} {} {eval_len}", key.id(), mode.name())
}

/// The rows of each model (scheme, variant) at each length in each mode, summarised over
/// seeds, in the order in which the groups first appear in `rows`: the mean
/// $\bar x = \frac{1}{S}\sum_s x_s$ of `nats_per_byte` and its sample standard deviation
/// $\sqrt{\sum_s (x_s - \bar x)^2 / (S-1)}$ (0 with one seed), summed in ascending seed order.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for two rows of one group with the same seed (naming them), a
/// `scaling_factor`, `train_len` or `params` that differs between the seeds of a group, or a
/// `nats_per_byte` that is not finite.
pub fn seed_summaries(rows: &[ResultRow]) -> Result<Vec<SeedSummary>> {
    let mut index: HashMap<(Scheme, &str, &str, usize), usize> = HashMap::new();
    let mut groups: Vec<Vec<&ResultRow>> = Vec::new();
    for r in rows {
        let name = || describe(&r.key(), r.mode, r.eval_len);
        ensure(
            r.nats_per_byte.is_finite(),
            "nats_per_byte",
            format!("{} for {} seed {}", r.nats_per_byte, name(), r.seed),
            "a finite loss",
        )?;
        let key = (r.scheme, r.variant.as_str(), r.mode.name(), r.eval_len);
        let i = *index.entry(key).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        let group = &mut groups[i];
        if let Some(first) = group.first() {
            if group.iter().any(|g| g.seed == r.seed) {
                return Err(invalid(
                    "rows",
                    format!("{} seed {} (twice)", name(), r.seed),
                    "one row per scheme, variant, mode, length and seed",
                ));
            }
            ensure(
                first.scaling_factor == r.scaling_factor,
                "scaling_factor",
                format!(
                    "{:?} for seed {} but {:?} for seed {} of {}",
                    first.scaling_factor,
                    first.seed,
                    r.scaling_factor,
                    r.seed,
                    name()
                ),
                "the same factor for every seed of a model at one length",
            )?;
            ensure(
                first.train_len == r.train_len,
                "train_len",
                format!(
                    "{} for seed {} but {} for seed {} of {}",
                    first.train_len,
                    first.seed,
                    r.train_len,
                    r.seed,
                    name()
                ),
                "the same training length for every seed of a model",
            )?;
            ensure(
                first.params == r.params,
                "params",
                format!(
                    "{} for seed {} but {} for seed {} of {}",
                    first.params,
                    first.seed,
                    r.params,
                    r.seed,
                    name()
                ),
                "the same parameter count for every seed of a model",
            )?;
        }
        group.push(r);
    }
    Ok(groups
        .into_iter()
        .map(|mut group| {
            group.sort_by_key(|r| r.seed);
            let values: Vec<f64> = group.iter().map(|r| r.nats_per_byte).collect();
            let (mean, sd) = mean_and_sd(&values);
            let first = group[0];
            SeedSummary {
                scheme: first.scheme,
                variant: first.variant.clone(),
                train_len: first.train_len,
                mode: first.mode,
                eval_len: first.eval_len,
                mean,
                sd,
                seeds: group.iter().map(|r| r.seed).collect(),
                scaling_factor: first.scaling_factor,
                params: first.params,
            }
        })
        .collect())
}

/// Mean $\bar x = \frac1n \sum_i x_i$ and sample standard deviation
/// $\sqrt{\sum_i (x_i - \bar x)^2 / (n-1)}$ (0 for fewer than two values; the mean of no
/// values is 0), summed in the order given.
///
/// # Examples
/// ```
/// let (mean, sd) = posenc::results::mean_and_sd(&[1.0, 2.0, 3.0]);
/// assert_eq!((mean, sd), (2.0, 1.0));
/// assert_eq!(posenc::results::mean_and_sd(&[1.5]), (1.5, 0.0));
/// ```
pub fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len();
    let mean = values.iter().sum::<f64>() / n.max(1) as f64;
    if n < 2 {
        return (mean, 0.0);
    }
    let ss: f64 = values.iter().map(|x| (x - mean).powi(2)).sum();
    (mean, (ss / (n - 1) as f64).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(x: f64, y: f64) -> bool {
        (x - y).abs() < 1e-12
    }

    fn result(variant: &str, eval_len: usize, seed: u64, nats: f64) -> ResultRow {
        ResultRow {
            scaling_factor: (variant == "ntk").then_some(2.0),
            ..ResultRow::example(Scheme::Rope, variant, eval_len, seed, nats)
        }
    }

    #[test]
    fn seed_summaries_by_hand() {
        // rope 128: seeds 2, 0, 1 at 1.5, 1.2, 1.8 -> mean 1.5,
        //   sd = sqrt((0.09 + 0.09 + 0) / 2) = 0.3
        // rope/ntk 256: one seed -> mean 2.0, sd 0
        // rope 256: seeds 0, 1 at 1.0, 2.0 -> mean 1.5, sd = sqrt(0.5)
        let rows = vec![
            result("base", 128, 2, 1.5),
            result("ntk", 256, 0, 2.0),
            result("base", 128, 0, 1.2),
            result("base", 256, 0, 1.0),
            result("base", 128, 1, 1.8),
            result("base", 256, 1, 2.0),
        ];
        let s = seed_summaries(&rows).unwrap();
        let found: Vec<(String, usize)> = s.iter().map(|s| (s.key().label(), s.eval_len)).collect();
        assert_eq!(
            found,
            [
                ("rope".to_string(), 128),
                ("rope/ntk".to_string(), 256),
                ("rope".to_string(), 256)
            ]
        );
        assert!(close(s[0].mean, 1.5) && close(s[0].sd, 0.3), "{:?}", s[0]);
        assert_eq!(s[0].seeds, [0, 1, 2]);
        assert_eq!(
            (s[1].mean, s[1].sd, s[1].seeds.clone()),
            (2.0, 0.0, vec![0])
        );
        assert_eq!(s[1].scaling_factor, Some(2.0));
        assert!(close(s[2].mean, 1.5) && close(s[2].sd, 0.5f64.sqrt()));
        assert!(seed_summaries(&[]).unwrap().is_empty());
    }

    #[test]
    fn seed_summaries_reject_duplicates_and_disagreements() {
        let rows = vec![result("base", 128, 0, 1.5), result("base", 128, 0, 1.6)];
        let e = seed_summaries(&rows).unwrap_err().to_string();
        assert!(e.contains("rope/base nonoverlap 128 seed 0 (twice)"), "{e}");
        let mut other = result("ntk", 256, 1, 1.0);
        other.scaling_factor = Some(4.0);
        let rows = vec![result("ntk", 256, 0, 1.5), other];
        let e = seed_summaries(&rows).unwrap_err().to_string();
        assert!(
            e.contains("Some(2.0) for seed 0 but Some(4.0) for seed 1"),
            "{e}"
        );
        let mut other = result("base", 128, 1, 1.0);
        other.train_len = 256;
        let e = seed_summaries(&[result("base", 128, 0, 1.0), other])
            .unwrap_err()
            .to_string();
        assert!(e.contains("invalid train_len"), "{e}");
        let mut other = result("base", 128, 1, 1.0);
        other.params = 101;
        let e = seed_summaries(&[result("base", 128, 0, 1.0), other])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("invalid params = 100 for seed 0 but 101 for seed 1"),
            "{e}"
        );
        let e = seed_summaries(&[result("base", 128, 0, f64::INFINITY)]).unwrap_err();
        assert!(e.to_string().contains("a finite loss"), "{e}");
    }
}
