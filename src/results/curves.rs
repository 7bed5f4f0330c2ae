//! Curves over training seeds, for figures with a band per model: the loss against evaluation
//! length ([`seed_curves`], from the rows of `ppl_vs_length.csv`) and the validation loss
//! against training steps ([`curve_summaries`], from `curves.csv`); and whether each run has
//! reached its plateau ([`plateaus`]): the validation loss it gained over its last 20 % of
//! steps, and nothing else.

use std::collections::BTreeMap;

use super::record::planned_seeds;
use super::rows::{with_seed_count, CurveRow, Mode, ModelKey, ResultRow};
use super::stats::{mean_and_sd, seed_summaries, SeedSummary};
use crate::error::{ensure, invalid};
use crate::lm::config::SweepConfig;
use crate::Result;

/// One model's loss against length over its training seeds ([`seed_curves`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SeedCurve {
    /// The model.
    pub model: ModelKey,
    /// Every seed of the model at any of its lengths, ascending.
    pub seeds: Vec<u64>,
    /// The lengths the model was evaluated at, ascending.
    pub lengths: Vec<f64>,
    /// The mean over seeds of nats per byte at each length.
    pub mean: Vec<f64>,
    /// The sample standard deviation over seeds at each length ($n - 1$ denominator; 0 with
    /// one seed).
    pub sd: Vec<f64>,
}

impl SeedCurve {
    /// `mean - sd` at each length, the lower side of a band.
    pub fn lower(&self) -> Vec<f64> {
        self.mean.iter().zip(&self.sd).map(|(m, s)| m - s).collect()
    }

    /// `mean + sd` at each length.
    pub fn upper(&self) -> Vec<f64> {
        self.mean.iter().zip(&self.sd).map(|(m, s)| m + s).collect()
    }

    /// The curve as one series of a figure with bands (`(name, x, y, lower, upper)`, the
    /// notebooks' `BandSeries`): its label with its seed count when it has fewer than the
    /// `record` plans for it ([`with_seed_count`], [`planned_seeds`]), the lengths, the mean,
    /// and mean ∓ sd.
    pub fn band(&self, record: &SweepConfig) -> (String, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
        let planned = planned_seeds(record, &self.model).len();
        (
            with_seed_count(&self.model.label(), self.seeds.len(), planned),
            self.lengths.clone(),
            self.mean.clone(),
            self.lower(),
            self.upper(),
        )
    }
}

/// Nats per byte against length over training seeds, one [`SeedCurve`] per model of `mode`
/// that `keep` accepts, in order of first appearance: at each length the mean over the seeds
/// and their sample standard deviation (as [`seed_summaries`]).
///
/// # Errors
/// [`crate::Error::InvalidParameter`] when no row has `mode`, and as [`seed_summaries`].
pub fn seed_curves(
    rows: &[ResultRow],
    mode: Mode,
    keep: impl Fn(&ModelKey) -> bool,
) -> Result<Vec<SeedCurve>> {
    let in_mode: Vec<ResultRow> = rows.iter().filter(|r| r.mode == mode).cloned().collect();
    ensure(
        !in_mode.is_empty(),
        "mode",
        mode.name(),
        "a mode present in the results (nonoverlap or sliding)",
    )?;
    let mut models: Vec<(ModelKey, BTreeMap<usize, SeedSummary>)> = Vec::new();
    for summary in seed_summaries(&in_mode)? {
        let key = summary.key();
        match models.iter_mut().find(|(k, _)| *k == key) {
            Some((_, m)) => {
                m.insert(summary.eval_len, summary);
            }
            None => models.push((key, BTreeMap::from([(summary.eval_len, summary)]))),
        }
    }
    Ok(models
        .into_iter()
        .filter(|(key, _)| keep(key))
        .map(|(model, by_length)| {
            let mut seeds: Vec<u64> = by_length.values().flat_map(|s| s.seeds.clone()).collect();
            seeds.sort_unstable();
            seeds.dedup();
            SeedCurve {
                seeds,
                lengths: by_length.keys().map(|&l| l as f64).collect(),
                mean: by_length.values().map(|s| s.mean).collect(),
                sd: by_length.values().map(|s| s.sd).collect(),
                model,
            }
        })
        .collect())
}

/// The validation loss of one model at one training step over its seeds
/// ([`curve_summaries`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CurvePoint {
    /// The model.
    pub model: ModelKey,
    /// Steps done.
    pub step: usize,
    /// Training bytes seen at that step (the same for every seed).
    pub bytes: usize,
    /// How many seeds reached the step.
    pub seeds: usize,
    /// Mean of the seeds' validation losses (nats per byte).
    pub mean: f64,
    /// The lowest of them.
    pub min: f64,
    /// The highest of them.
    pub max: f64,
}

/// The validation curves of a sweep over seeds: one [`CurvePoint`] per model and step, models
/// in order of first appearance and steps ascending, with the mean, lowest and highest
/// validation loss of the seeds that reached the step.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] when the seeds of a model disagree on the bytes of a
/// step, or a seed of a model has a step twice.
pub fn curve_summaries(curves: &[CurveRow]) -> Result<Vec<CurvePoint>> {
    // model -> step -> (bytes, [(seed, valid_loss)])
    type Steps = BTreeMap<usize, (usize, Vec<(u64, f64)>)>;
    let mut models: Vec<(ModelKey, Steps)> = Vec::new();
    for c in curves {
        let key = c.key();
        let at = match models.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                models.push((key, BTreeMap::new()));
                models.len() - 1
            }
        };
        let (key, steps) = &mut models[at];
        let label = key.label();
        let (s, k) = (c.step, c.seed);
        let (b, losses) = steps.entry(s).or_insert((c.bytes, Vec::new()));
        ensure(
            *b == c.bytes,
            "bytes",
            format!(
                "{} for seed {k} of {label} at step {s}, {} for another seed",
                c.bytes, b
            ),
            "the same training bytes at a step for every seed",
        )?;
        if losses.iter().any(|(other, _)| *other == k) {
            return Err(invalid(
                "curves",
                format!("{label} seed {k} step {s} (twice)"),
                "one row per model, seed and step",
            ));
        }
        losses.push((k, c.valid_loss));
    }
    let mut points = Vec::new();
    for (model, by_step) in models {
        for (step, (bytes, losses)) in by_step {
            let losses: Vec<f64> = losses.iter().map(|l| l.1).collect();
            points.push(CurvePoint {
                model: model.clone(),
                step,
                bytes,
                seeds: losses.len(),
                mean: mean_and_sd(&losses).0,
                min: losses.iter().copied().fold(f64::INFINITY, f64::min),
                max: losses.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            });
        }
    }
    Ok(points)
}

/// A run has reached its plateau when its validation loss fell by less than this over its
/// last 20 % of steps: 0.01 nats per byte.
pub const PLATEAU_GAIN: f64 = 0.01;

/// What one training run (a model and a seed) gained over its last 20 % of steps
/// ([`plateaus`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Plateau {
    /// The model.
    pub model: ModelKey,
    /// The training seed.
    pub seed: u64,
    /// The run's last step with a validation loss, $S$.
    pub last_step: usize,
    /// The validation loss there, nats per byte.
    pub final_loss: f64,
    /// The last step with a validation loss at or before $0.8\,S$, and that loss; `None`
    /// when the run has no validation point that early (a single point).
    pub from: Option<(usize, f64)>,
}

impl Plateau {
    /// The validation loss gained over the last 20 %: the loss at [`Plateau::from`] minus the
    /// final loss (positive while the run still improves); `None` without an earlier point.
    pub fn gain(&self) -> Option<f64> {
        self.from.map(|(_, loss)| loss - self.final_loss)
    }

    /// Whether the run has reached its plateau: [`Plateau::gain`] below [`PLATEAU_GAIN`];
    /// `None` when the gain cannot be measured.
    pub fn reached(&self) -> Option<bool> {
        self.gain().map(|g| g < PLATEAU_GAIN)
    }
}

/// One [`Plateau`] per run (model and seed) of the validation curves, runs in order of first
/// appearance: the last validation point, and the last one at or before 80 % of its steps
/// ($5\,\text{step} \le 4 S$).
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for a step twice in one run, or a validation loss that
/// is not finite.
pub fn plateaus(curves: &[CurveRow]) -> Result<Vec<Plateau>> {
    let mut runs: Vec<(ModelKey, u64, BTreeMap<usize, f64>)> = Vec::new();
    for c in curves {
        let key = c.key();
        ensure(
            c.valid_loss.is_finite(),
            "valid_loss",
            format!(
                "{} for {} seed {} step {}",
                c.valid_loss,
                key.label(),
                c.seed,
                c.step
            ),
            "a finite loss",
        )?;
        let at = match runs.iter().position(|r| r.0 == key && r.1 == c.seed) {
            Some(at) => at,
            None => {
                runs.push((key, c.seed, BTreeMap::new()));
                runs.len() - 1
            }
        };
        let run = &mut runs[at];
        if run.2.insert(c.step, c.valid_loss).is_some() {
            return Err(invalid(
                "curves",
                format!("{} seed {} step {} (twice)", run.0.label(), c.seed, c.step),
                "one row per model, seed and step",
            ));
        }
    }
    Ok(runs
        .into_iter()
        .filter_map(|(model, seed, points)| {
            let (&last_step, &final_loss) = points.iter().next_back()?;
            let from = points
                .range(..last_step)
                .rev()
                .find(|(&step, _)| 5 * step <= 4 * last_step)
                .map(|(&step, &loss)| (step, loss));
            Some(Plateau {
                model,
                seed,
                last_step,
                final_loss,
                from,
            })
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::rows::Scheme;

    fn row(scheme: Scheme, variant: &str, eval_len: usize, nats: f64) -> ResultRow {
        ResultRow {
            train_len: if variant.starts_with("ft-") { 256 } else { 128 },
            ..ResultRow::example(scheme, variant, eval_len, 0, nats)
        }
    }

    fn sample() -> Vec<ResultRow> {
        let mut rows = Vec::new();
        for (l, a, b, c) in [
            (128, 1.5, 1.4, 1.6),
            (256, 1.6, 1.4, 1.5),
            (2048, 3.0, 1.45, 1.5),
        ] {
            rows.push(row(Scheme::Rope, "base", l, a));
            rows.push(row(Scheme::Alibi, "base", l, b));
            rows.push(row(Scheme::Rope, "ft-yarn", l, c));
        }
        rows
    }

    /// `sample()` with a second seed whose rope is much worse at 2048.
    fn two_seeds() -> Vec<ResultRow> {
        let mut rows = sample();
        rows.extend(sample().into_iter().map(|mut r| {
            r.seed = 1;
            if r.scheme == Scheme::Rope && r.eval_len == 2048 {
                r.nats_per_byte = 4.0;
                r.perplexity = 4f64.exp();
            }
            r
        }));
        rows
    }

    #[test]
    fn seed_curves_give_mean_and_sd_per_length() {
        // rope at 2048: 3.0 and 4.0 -> mean 3.5, sd sqrt(0.5); alibi identical seeds -> sd 0
        let curves = seed_curves(&two_seeds(), Mode::Nonoverlap, ModelKey::is_base).unwrap();
        let labels: Vec<String> = curves.iter().map(|c| c.model.label()).collect();
        assert_eq!(labels, ["rope", "alibi"]);
        let rope = &curves[0];
        assert_eq!(rope.seeds, [0, 1]);
        assert_eq!(rope.lengths, [128.0, 256.0, 2048.0]);
        assert_eq!(rope.mean[2], 3.5);
        assert!((rope.sd[2] - 0.5f64.sqrt()).abs() < 1e-12);
        assert_eq!((rope.mean[0], rope.sd[0]), (1.5, 0.0));
        assert!((rope.upper()[2] - (3.5 + 0.5f64.sqrt())).abs() < 1e-12);
        assert!((rope.lower()[2] - (3.5 - 0.5f64.sqrt())).abs() < 1e-12);
        assert_eq!(curves[1].sd, [0.0, 0.0, 0.0]);
        let mut record = SweepConfig {
            seeds: vec![0, 1, 2],
            ..SweepConfig::default()
        };
        let (name, x, mean, lower, upper) = rope.band(&record);
        assert_eq!(name, "rope (2 of 3 seeds)");
        assert_eq!((x, mean), (rope.lengths.clone(), rope.mean.clone()));
        assert_eq!((lower, upper), (rope.lower(), rope.upper()));
        record.seeds = vec![0, 1];
        assert_eq!(rope.band(&record).0, "rope");
        // one seed: sd 0, the row's own values
        let one =
            seed_curves(&sample(), Mode::Nonoverlap, |m| m.label() == "rope/ft-yarn").unwrap();
        assert_eq!(one[0].seeds, [0]);
        assert_eq!(one[0].mean, [1.6, 1.5, 1.5]);
        assert!(seed_curves(&sample(), Mode::Sliding, |_| true).is_err());
    }

    fn curve(
        scheme: Scheme,
        variant: &str,
        seed: u64,
        step: usize,
        bytes: usize,
        valid: f64,
    ) -> CurveRow {
        CurveRow {
            scheme,
            variant: variant.into(),
            seed,
            step,
            bytes,
            train_loss: 3.0,
            valid_loss: valid,
        }
    }

    #[test]
    fn plateaus_by_hand() {
        use Scheme::{Alibi, Rope};
        // rope seed 0: 2000 steps; 80 % is step 1600, the last point at or before it is 1500
        // (loss 1.530); final 1.515: gained 0.015, not a plateau.
        // rope seed 1: points at 1600 (1.520) and 2000 (1.512): 0.008, a plateau.
        // alibi: one point, no gain to measure.
        let rows = vec![
            curve(Rope, "base", 0, 1000, 10, 1.6),
            curve(Rope, "base", 0, 1500, 15, 1.53),
            curve(Rope, "base", 0, 1700, 17, 1.52),
            curve(Rope, "base", 0, 2000, 20, 1.515),
            curve(Rope, "base", 1, 2000, 20, 1.512),
            curve(Rope, "base", 1, 1600, 16, 1.52),
            curve(Alibi, "base", 0, 100, 1, 2.0),
        ];
        let p = plateaus(&rows).unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].model.label(), p[0].seed), ("rope".to_string(), 0));
        assert_eq!((p[0].last_step, p[0].from), (2000, Some((1500, 1.53))));
        assert!((p[0].gain().unwrap() - 0.015).abs() < 1e-12);
        assert_eq!(p[0].reached(), Some(false));
        assert_eq!((p[1].seed, p[1].from), (1, Some((1600, 1.52))));
        assert!((p[1].gain().unwrap() - 0.008).abs() < 1e-12);
        assert_eq!(p[1].reached(), Some(true));
        assert_eq!(
            (p[2].model.label(), p[2].from, p[2].gain()),
            ("alibi".to_string(), None, None)
        );
        assert_eq!(p[2].reached(), None);
        // a loss that still falls counts whatever its level: no absolute-loss prong
        let low = vec![
            curve(Rope, "base", 0, 80, 1, 0.5),
            curve(Rope, "base", 0, 100, 1, 0.48),
        ];
        assert_eq!(plateaus(&low).unwrap()[0].reached(), Some(false));
        // a step twice; a loss that is not finite
        let twice = vec![
            curve(Rope, "base", 0, 100, 1, 2.0),
            curve(Rope, "base", 0, 100, 1, 2.1),
        ];
        let e = plateaus(&twice).unwrap_err().to_string();
        assert!(e.contains("rope seed 0 step 100 (twice)"), "{e}");
        assert!(plateaus(&[curve(Rope, "base", 0, 100, 1, f64::NAN)]).is_err());
        assert!(plateaus(&[]).unwrap().is_empty());
    }

    #[test]
    fn curves_by_seed_give_mean_and_range() {
        use Scheme::{Alibi, Rope};
        // rope: seeds 0 and 1 at steps 100 and 200, seed 2 only at 100; alibi one seed
        let rows = vec![
            curve(Rope, "base", 0, 100, 10, 2.0),
            curve(Rope, "base", 0, 200, 20, 1.5),
            curve(Alibi, "base", 0, 100, 10, 2.5),
            curve(Rope, "base", 1, 100, 10, 2.4),
            curve(Rope, "base", 1, 200, 20, 1.7),
            curve(Rope, "base", 2, 100, 10, 2.3),
            curve(Rope, "ntk", 0, 100, 10, 2.6),
        ];
        let points = curve_summaries(&rows).unwrap();
        let labels: Vec<String> = points.iter().map(|p| p.model.label()).collect();
        assert_eq!(labels, ["rope", "rope", "alibi", "rope/ntk"]);
        let steps: Vec<usize> = points.iter().map(|p| p.step).collect();
        assert_eq!(steps, [100, 200, 100, 100]);
        let bytes: Vec<usize> = points.iter().map(|p| p.bytes).collect();
        assert_eq!(bytes, [10, 20, 10, 10]);
        let seeds: Vec<usize> = points.iter().map(|p| p.seeds).collect();
        assert_eq!(seeds, [3, 2, 1, 1]);
        // (2.0 + 2.4 + 2.3) / 3 and (1.5 + 1.7) / 2
        assert!((points[0].mean - 6.7 / 3.0).abs() < 1e-12);
        assert!((points[1].mean - 1.6).abs() < 1e-12);
        let min: Vec<f64> = points.iter().map(|p| p.min).collect();
        let max: Vec<f64> = points.iter().map(|p| p.max).collect();
        assert_eq!(min, [2.0, 1.5, 2.5, 2.6]);
        assert_eq!(max, [2.4, 1.7, 2.5, 2.6]);
        // seeds that disagree on the bytes of a step; a step twice
        let rows = vec![
            curve(Rope, "base", 0, 100, 10, 2.0),
            curve(Rope, "base", 1, 100, 12, 2.0),
        ];
        let e = curve_summaries(&rows).unwrap_err().to_string();
        assert!(e.contains("12 for seed 1 of rope at step 100, 10"), "{e}");
        let rows = vec![
            curve(Rope, "base", 0, 100, 10, 2.0),
            curve(Rope, "base", 0, 100, 10, 2.1),
        ];
        let e = curve_summaries(&rows).unwrap_err().to_string();
        assert!(e.contains("rope seed 0 step 100 (twice)"), "{e}");
    }
}
