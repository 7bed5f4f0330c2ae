//! Longer contexts in the sweep: the ramp bounds of YaRN and Llama 3 for the sweep's model
//! ([`SWEEP_RAMP`], the same for the scalings at inference and the fine-tunes), the
//! fine-tunes at longer lengths ([`SweepFinetune`]: RoPE with PI and YaRN at every factor, and
//! the equal-extra-bytes controls, [`FinetuneControl`]) and the budget control
//! ([`SweepBudget`]: some schemes trained again with more bytes).

use serde::{Deserialize, Serialize};

use super::{ModelConfig, Scheme, SweepConfig, TrainConfig, MAX_LEN};
use crate::encodings::rope::{RampBounds, ScalingKind};
use crate::error::{ensure, Result};

/// YaRN's $\beta_{fast}/\beta_{slow}$ and Llama 3's high/low frequency factors for the sweep's
/// model (original length $L = 128$, head width $d = 32$, so 16 pairs, base $10^4$): YaRN
/// $\beta_{fast} = 2$, $\beta_{slow} = 1$; Llama 3 `high_freq_factor` 2, `low_freq_factor` 1.
/// Both then keep the pairs that turn at least twice over the original context, interpolate
/// those that turn less than once, and blend the one between.
///
/// **Why.** Both scalings bound their ramp by rotations over the original context,
/// $r_i = L / \lambda_i = L\,b^{-2i/d} / 2\pi$ ([`crate::encodings::rope::rotations`]). Here
/// $r_i = 20.4 \cdot 10^{-i/4}$: 20.4, 11.5, 6.4, 3.6, 2.04, 1.15, 0.64, ..., 0.004. The
/// fastest pair turns 20 times, fewer than the reference $\beta_{fast} = 32$, so LLaMA's bounds
/// keep no pair by their rule (pair 0 stays only because the ramp's start, at pair $-0.8$, is
/// rounded and clipped to 0), where LLaMA 2 keeps 21 of its 64. With the same base and a
/// context 32 times shorter, ten of the sixteen pairs turn less than once in training (LLaMA 2:
/// 18 of 64).
///
/// - $\beta_{slow} = 1$ (and `low_freq_factor` 1) is kept: it is the one bound that does not
///   depend on the geometry. A pair that turned less than once has seen only part of the
///   circle, and any extrapolation of it meets angles it never saw.
/// - $\beta_{fast} = 2$ makes the kept share 5 of 16 (31%), LLaMA 2's 21 of 64 (33%; LLaMA 1,
///   $L = 2048$: 27%). Llama 3 with high 2 keeps the same five ($r_i > 2$) and interpolates the
///   same ten ($r_i < 1$); its own geometry (Llama 3.1: $L = 8192$, $d = 128$, base
///   $5 \cdot 10^5$) keeps 45%, which no `low_freq_factor` $\ge 1$ reaches here (at most 6 of
///   16, with high just above 1.15).
/// - Matching all three shares instead (5 kept, 6 ramped, 5 interpolated, as LLaMA 2's 33/39/28%)
///   needs $\beta_{slow} \approx 0.05$. That puts pairs 6-10, whose wavelengths are 1.6 to 16
///   times the original context, on the ramp, where at factor 16 they turn 3.1 to 11.7 times
///   further than in training: five pairs at angles never seen, against none.
///
/// Pairs per band (kept / ramp / interpolated), read off the scaled frequencies
/// ([`crate::encodings::rope::pair_bands`]), and the pairs with fewer than one rotation in
/// training that factor 16 turns past the largest angle they saw:
///
/// | geometry | bounds | kept | ramp | interpolated | past training |
/// |---|---|---|---|---|---|
/// | LLaMA 2 ($L$ 4096, $d$ 128, $b$ $10^4$) | YaRN 32 / 1 | 21 | 25 | 18 | 0 |
/// | LLaMA 1 ($L$ 2048) | YaRN 32 / 1 | 17 | 24 | 23 | 0 |
/// | Llama 3.1 ($L$ 8192, $d$ 128, $b$ $5 \cdot 10^5$) | Llama 3 1 / 4 | 29 | 6 | 29 | 0 |
/// | sweep ($L$ 128, $d$ 32, $b$ $10^4$) | YaRN 32 / 1 | 1 | 5 | 10 | 0 |
/// | sweep | Llama 3 1 / 4 | 3 | 3 | 10 | 0 |
/// | sweep | **YaRN 2 / 1, Llama 3 1 / 2** | 5 | 1 | 10 | 0 |
/// | sweep | YaRN 2 / 0.05, Llama 3 0.05 / 2 | 5 | 6 | 5 | 5 |
///
/// (`tests::ramp_bounds_for_the_sweep_geometry` computes every cell twice: from the
/// frequencies, and from $r_i$ against the bounds.)
pub const SWEEP_RAMP: RampBounds = RampBounds {
    beta_fast: 2.0,
    beta_slow: 1.0,
    low_freq_factor: 1.0,
    high_freq_factor: 2.0,
};

/// A scheme that needs no scaling, fine-tuned like the RoPE fine-tunes: the
/// equal-extra-bytes control ([`SweepFinetune::controls`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FinetuneControl {
    /// The scheme, fine-tuned from its own checkpoint of the same seed.
    pub scheme: Scheme,
    /// Its length factors, each one fine-tune.
    pub factors: Vec<usize>,
}

/// The fine-tunes at longer lengths: RoPE with each scaling of `kinds` at each factor of
/// `factors`, and the controls.
///
/// **The budget rule.** Every fine-tune, whatever its kind and factor, sees the same bytes:
/// `steps` steps of `batch` $\cdot$ `train_len` bytes. At factor $f$ it trains on sequences
/// of $f \cdot$ `train_len` bytes, `batch` $/ f$ of them per step (so `batch` is a multiple of
/// every factor), with the same steps, learning-rate schedule and validation points. By default
/// 200 steps of 4096 bytes (32 $\times$ 128 at factor 1, 2 $\times$ 2048 at factor 16):
/// 819,200 bytes, a tenth of a from-scratch training, with the validation loss every 50 steps.
/// A RoPE fine-tune at $f$ uses the scaling with factor $f$ and original length `train_len`;
/// it is scored with that scaling at every length of the sweep, its own ($f \cdot$ `train_len`)
/// and `train_len` among them, so that its rows pair with its base model's and the table keeps
/// one column per length (the `scaling_factor` column says $f$ at every length).
///
/// **The controls** ([`FinetuneControl`]) separate the fine-tunes' gain from "more training at
/// a longer length": a scheme that needs no scaling, fine-tuned from its own checkpoint with the
/// same bytes, lengths, steps and schedule, and scored the same way. By default ALiBi at every
/// factor, so that each RoPE fine-tune row has a control at its own length (the effect of extra
/// training at length $128f$ need not be the same at every $f$), for half the bytes of the RoPE
/// fine-tunes (one control per factor against two scalings); and T5, a learned bias, at the
/// largest factor only, where the extra training reaches the most unseen distances, for a
/// quarter of ALiBi's bytes (T5 trains about half as fast as RoPE at 2048 bytes).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SweepFinetune {
    /// RoPE scalings to fine-tune with; default PI (`linear`) and YaRN.
    pub kinds: Vec<ScalingKind>,
    /// Length factors of the RoPE fine-tunes; default 2, 4, 8, 16.
    pub factors: Vec<usize>,
    /// The equal-extra-bytes controls; default ALiBi at 2, 4, 8, 16 and T5 at 16.
    pub controls: Vec<FinetuneControl>,
    /// Steps of every fine-tune; default 200.
    pub steps: usize,
    /// Sequences per step at factor 1 ($f$ times fewer at factor $f$); default 32.
    pub batch: usize,
    /// Peak learning rate; default 1e-3.
    pub lr: f64,
    /// Warm-up steps; default 10.
    pub warmup: usize,
    /// Steps between two validation points (and one at the last step); default 50.
    pub valid_every: usize,
    /// Seeds fine-tuned, each from the checkpoint of its seed (a subset of the sweep's);
    /// default 0, 1, 2.
    pub seeds: Vec<u64>,
}

impl Default for SweepFinetune {
    fn default() -> Self {
        Self {
            kinds: vec![ScalingKind::Linear, ScalingKind::Yarn],
            factors: vec![2, 4, 8, 16],
            controls: vec![
                FinetuneControl {
                    scheme: Scheme::Alibi,
                    factors: vec![2, 4, 8, 16],
                },
                FinetuneControl {
                    scheme: Scheme::T5,
                    factors: vec![16],
                },
            ],
            steps: 200,
            batch: 32,
            lr: 1e-3,
            warmup: 10,
            valid_every: 50,
            seeds: vec![0, 1, 2],
        }
    }
}

/// The budget control: schemes trained again from scratch with `multiple` times the bytes
/// (`multiple` times the steps; the same batch, warm-up and peak learning rate, the cosine
/// spanning the longer run), reported as their own rows (variant `budget-xM`), so that a
/// change between lengths can be compared with how much it moves when the models train longer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SweepBudget {
    /// Schemes; default NoPE, RoPE, ALiBi, T5 and Shaw (no position, rotation, a fixed bias, a
    /// learned bias, relative vectors).
    pub schemes: Vec<Scheme>,
    /// Times the bytes of the sweep's training; default 2.
    pub multiple: usize,
    /// Seeds (a subset of the sweep's); default 0, 1, 2.
    pub seeds: Vec<u64>,
}

impl Default for SweepBudget {
    fn default() -> Self {
        Self {
            schemes: vec![
                Scheme::Nope,
                Scheme::Rope,
                Scheme::Alibi,
                Scheme::T5,
                Scheme::Shaw,
            ],
            multiple: 2,
            seeds: vec![0, 1, 2],
        }
    }
}

impl SweepConfig {
    /// The model of a fine-tune of `scheme` at length factor `factor`: the sweep's model at
    /// `factor` times its length, for RoPE with `scaling` of that factor (and original length
    /// the sweep's, bounds [`SweepConfig::rope_bounds`]).
    pub fn finetune_model(
        &self,
        scheme: Scheme,
        scaling: Option<ScalingKind>,
        factor: usize,
    ) -> ModelConfig {
        let mut model = ModelConfig {
            scheme,
            ..self.model.clone()
        };
        model.train_len = self.model.train_len.saturating_mul(factor);
        if let Some(kind) = scaling {
            model.rope_scaling =
                kind.scaling_with(factor as f64, self.model.train_len, &self.rope_bounds);
        }
        model
    }

    /// The training of a fine-tune at length factor `factor` with `seed`: `batch / factor`
    /// sequences per step (the budget rule of [`SweepFinetune`]).
    pub fn finetune_train(&self, factor: usize, seed: u64) -> TrainConfig {
        let ft = &self.finetune;
        TrainConfig {
            batch: ft.batch / factor.max(1),
            steps: ft.steps,
            lr: ft.lr,
            warmup: ft.warmup,
            valid_every: ft.valid_every,
            seed,
            ..self.train.clone()
        }
    }

    /// The training of a budget-control model with `seed`: `multiple` times the steps.
    pub fn budget_train(&self, seed: u64) -> TrainConfig {
        TrainConfig {
            steps: self
                .train
                .steps
                .saturating_mul(self.budget_control.multiple),
            seed,
            ..self.train.clone()
        }
    }

    /// Every fine-tune as (scheme, scaling, factor): the RoPE ones by factor then kind, then
    /// the controls.
    pub fn finetunes(&self) -> Vec<(Scheme, Option<ScalingKind>, usize)> {
        let ft = &self.finetune;
        let rope = ft
            .factors
            .iter()
            .flat_map(|&f| ft.kinds.iter().map(move |&k| (Scheme::Rope, Some(k), f)));
        let controls = ft
            .controls
            .iter()
            .flat_map(|c| c.factors.iter().map(|&f| (c.scheme, None, f)));
        rope.chain(controls).collect()
    }

    /// Checks the ramp bounds, the fine-tunes and the budget control: each fine-tune's model
    /// and training (its length at most [`MAX_LEN`] and among the evaluated lengths, as the
    /// sweep's own length is, `batch` a multiple of its factor, at least two validation points),
    /// and seeds that the sweep trains.
    ///
    /// # Errors
    /// The first invalid value, named by its key.
    pub(super) fn validate_extension(&self) -> Result<()> {
        self.rope_bounds
            .validate()
            .map_err(|e| e.context("rope_bounds"))?;
        let ft = &self.finetune;
        let lengths = &self.eval.lengths;
        let base_len = self.model.train_len;
        let finetunes = self.finetunes();
        // each item once: no list names a value twice
        once("schemes", &self.schemes)?;
        once("rope_inference", &self.rope_inference)?;
        once("finetune.kinds and factors, controls", &finetunes)?;
        once("budget_control.schemes", &self.budget_control.schemes)?;
        if !finetunes.is_empty() {
            self.check_seeds("finetune.seeds", &ft.seeds)?;
            ensure(
                lengths.contains(&base_len),
                "eval.lengths",
                format!("{lengths:?}"),
                &format!("a list with train_len {base_len}, where every fine-tune is scored"),
            )?;
            ensure(
                ft.valid_every >= 1 && ft.steps / ft.valid_every >= 2,
                "finetune.valid_every",
                ft.valid_every,
                &format!(
                    "from 1 to half of finetune.steps ({}): at least two validation points",
                    ft.steps
                ),
            )?;
        }
        for (scheme, scaling, factor) in finetunes {
            let len = base_len.saturating_mul(factor);
            ensure(
                factor >= 2 && len <= MAX_LEN && lengths.contains(&len),
                "finetune factor",
                factor,
                &format!(
                    "at least 2, with train_len x factor ({base_len} x {factor}) at most {MAX_LEN} and one of eval.lengths {lengths:?}"
                ),
            )?;
            ensure(
                ft.batch.is_multiple_of(factor),
                "finetune.batch",
                ft.batch,
                &format!("a multiple of every factor ({factor}: a fine-tune at factor f takes batch / f sequences)"),
            )?;
            let model = self.finetune_model(scheme, scaling, factor);
            let name = match scaling {
                Some(kind) => format!("fine-tune {scheme} {kind} x{factor}"),
                None => format!("fine-tune {scheme} x{factor}"),
            };
            model
                .validate()
                .and_then(|()| self.finetune_train(factor, 0).validate_for(&model))
                .map_err(|e| e.context(name))?;
        }
        let budget = &self.budget_control;
        if !budget.schemes.is_empty() {
            self.check_seeds("budget_control.seeds", &budget.seeds)?;
            ensure(
                budget.multiple >= 2,
                "budget_control.multiple",
                budget.multiple,
                "at least 2",
            )?;
            for &scheme in &budget.schemes {
                let model = ModelConfig {
                    scheme,
                    ..self.model.clone()
                };
                self.budget_train(0)
                    .validate_for(&model)
                    .map_err(|e| e.context(format!("budget control of {scheme}")))?;
            }
        }
        Ok(())
    }

    /// Checks that `seeds` are distinct, at least one, and seeds of the sweep.
    fn check_seeds(&self, key: &'static str, seeds: &[u64]) -> Result<()> {
        let distinct = seeds
            .iter()
            .collect::<std::collections::BTreeSet<_>>()
            .len();
        ensure(
            !seeds.is_empty()
                && distinct == seeds.len()
                && seeds.iter().all(|s| self.seeds.contains(s)),
            key,
            format!("{seeds:?}"),
            &format!("one or more distinct seeds of the sweep's {:?}", self.seeds),
        )
    }
}

/// Checks that `list` names no value twice.
fn once<T: PartialEq + std::fmt::Debug>(key: &'static str, list: &[T]) -> Result<()> {
    match list
        .iter()
        .enumerate()
        .find(|(i, x)| list[..*i].contains(x))
    {
        Some((_, twice)) => Err(crate::error::invalid(
            key,
            format!("{twice:?}"),
            "each value once (every item of the sweep once)",
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::rope::{pair_bands, rotations, Band, BandCounts, RopeScaling};

    /// kept / ramped / interpolated pairs and the pairs with r < 1 that factor 16 turns past
    /// their largest training angle, from the frequencies
    fn from_frequencies(dim: usize, base: f64, scaling: &RopeScaling) -> [usize; 4] {
        let bands = pair_bands(dim, base, scaling).unwrap();
        let c = BandCounts::of(&bands);
        let scaled = crate::encodings::rope::RopeConfig::with_scaling(dim, base, *scaling)
            .unwrap()
            .frequencies(None)
            .unwrap()
            .inv_freq;
        let plain = crate::encodings::rope::RopeConfig::new(dim, base)
            .unwrap()
            .frequencies(None)
            .unwrap()
            .inv_freq;
        let l = match *scaling {
            RopeScaling::Yarn { original_max, .. } | RopeScaling::Llama3 { original_max, .. } => {
                original_max
            }
            _ => unreachable!(),
        };
        let r = rotations(dim, base, l);
        // theta'_i s L > theta_i L: past the largest angle of training
        let past = (0..dim / 2)
            .filter(|&i| r[i] < 1.0 && f64::from(scaled[i]) * 16.0 > f64::from(plain[i]) * 1.0001)
            .count();
        [c.kept, c.ramped, c.interpolated, past]
    }

    /// The same counts from r_i against the bounds alone: YaRN keeps r >= beta_fast (and pair
    /// 0 when its ramp's start is clipped to 0) and interpolates r <= beta_slow; Llama 3 keeps
    /// r > high and interpolates r < low. A ramped pair with r < 1 is past its training angles.
    fn from_rotations(
        dim: usize,
        base: f64,
        l: usize,
        kind: ScalingKind,
        b: &RampBounds,
    ) -> [usize; 3] {
        let r = rotations(dim, base, l);
        let bands: Vec<Band> = r
            .iter()
            .enumerate()
            .map(|(i, &r)| {
                let (kept, interpolated) = match kind {
                    ScalingKind::Yarn => (
                        r >= b.beta_fast || (i == 0 && r < b.beta_fast),
                        r <= b.beta_slow,
                    ),
                    _ => (r > b.high_freq_factor, r < b.low_freq_factor),
                };
                if kept {
                    Band::Kept
                } else if interpolated {
                    Band::Interpolated
                } else {
                    Band::Ramped
                }
            })
            .collect();
        let c = BandCounts::of(&bands);
        [c.kept, c.ramped, c.interpolated]
    }

    #[test]
    fn ramp_bounds_for_the_sweep_geometry() {
        let llama = RampBounds::default();
        let matched = RampBounds {
            beta_slow: 0.05,
            low_freq_factor: 0.05,
            ..SWEEP_RAMP
        };
        let (yarn, llama3) = (ScalingKind::Yarn, ScalingKind::Llama3);
        // (d, base, L, kind, bounds, the table's row)
        let table = [
            (128, 1e4, 4096, yarn, llama, [21, 25, 18, 0]),
            (128, 1e4, 2048, yarn, llama, [17, 24, 23, 0]),
            (128, 5e5, 8192, llama3, llama, [29, 6, 29, 0]),
            (32, 1e4, 128, yarn, llama, [1, 5, 10, 0]),
            (32, 1e4, 128, llama3, llama, [3, 3, 10, 0]),
            (32, 1e4, 128, yarn, SWEEP_RAMP, [5, 1, 10, 0]),
            (32, 1e4, 128, llama3, SWEEP_RAMP, [5, 1, 10, 0]),
            (32, 1e4, 128, yarn, matched, [5, 6, 5, 5]),
            (32, 1e4, 128, llama3, matched, [5, 6, 5, 5]),
        ];
        for (d, b, l, kind, bounds, row) in table {
            let scaling = kind.scaling_with(16.0, l, &bounds);
            let freq = from_frequencies(d, b, &scaling);
            assert_eq!(freq, row, "{kind} d={d} L={l} {bounds:?}");
            assert_eq!(
                from_rotations(d, b, l, kind, &bounds),
                row[..3],
                "{kind} d={d} L={l} {bounds:?}"
            );
        }
        // the reference YaRN keeps pair 0 only by clipping: no pair turns 32 times in 128
        let r = rotations(32, 1e4, 128);
        assert!(r[0] < 32.0 && (r[0] - 20.37).abs() < 0.01);
        // the shares the doc compares: 5/16 against LLaMA 2's 21/64 and LLaMA 1's 17/64
        let share = |k: usize, n: usize| (100.0 * k as f64 / n as f64).round();
        assert_eq!(
            [share(5, 16), share(21, 64), share(17, 64)],
            [31.0, 33.0, 27.0]
        );
        // the matched bounds: pairs 6-10 (wavelengths 1.6 to 16 times L) turn 3.1 to 11.7
        // times further at factor 16 than in training
        let scaling = yarn.scaling_with(16.0, 128, &matched);
        let f = crate::encodings::rope::RopeConfig::with_scaling(32, 1e4, scaling)
            .unwrap()
            .frequencies(None)
            .unwrap();
        let plain = crate::encodings::rope::RopeConfig::new(32, 1e4)
            .unwrap()
            .frequencies(None)
            .unwrap();
        let further: Vec<f64> = (6..=10)
            .map(|i| 16.0 * f64::from(f.inv_freq[i]) / f64::from(plain.inv_freq[i]))
            .collect();
        assert!(
            (further[0] - 11.714).abs() < 1e-3 && (further[4] - 3.143).abs() < 1e-3,
            "{further:?}"
        );
        assert!((1.0 / r[6] - 1.55).abs() < 0.01 && (1.0 / r[10] - 15.5).abs() < 0.1);
        // the largest kept share with low 1: pairs 0-5 with high just above r_5 = 1.15
        assert!((r[5] - 1.1456).abs() < 1e-4);
    }

    #[test]
    fn every_finetune_sees_the_same_bytes() {
        let c = SweepConfig::default();
        let base_len = c.model.train_len;
        let bytes: Vec<usize> = c
            .finetunes()
            .iter()
            .map(|&(scheme, scaling, f)| {
                let m = c.finetune_model(scheme, scaling, f);
                let t = c.finetune_train(f, 1);
                assert_eq!(m.train_len, base_len * f);
                assert_eq!((t.seed, t.steps, t.valid_every), (1, 200, 50));
                if scheme == Scheme::Rope {
                    assert_eq!(m.rope_scaling.factor(), Some(f as f64));
                    assert_eq!(m.original_len(), base_len);
                } else {
                    assert_eq!(m.rope_scaling, RopeScaling::None);
                }
                t.steps * t.batch * m.train_len
            })
            .collect();
        // 2 kinds x 4 factors, ALiBi at 4, T5 at 1: 200 x 32 x 128 bytes each
        assert_eq!(bytes.len(), 13);
        assert!(bytes.iter().all(|&b| b == 819_200), "{bytes:?}");
        // YaRN with the sweep's bounds
        let yarn = c.finetune_model(Scheme::Rope, Some(ScalingKind::Yarn), 4);
        assert!(matches!(
            yarn.rope_scaling,
            RopeScaling::Yarn { beta_fast, beta_slow, factor, original_max: 128, .. }
                if beta_fast == 2.0 && beta_slow == 1.0 && factor == 4.0
        ));
        // the budget control: twice the steps, all else the sweep's
        let b = c.budget_train(2);
        assert_eq!((b.steps, b.seed, b.batch), (4000, 2, c.train.batch));
    }

    #[test]
    fn bad_finetunes_and_controls_are_refused_by_key() {
        let bad = |json: &str| {
            let c: SweepConfig = serde_json::from_str(json).unwrap();
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(r#"{"finetune": {"batch": 12}}"#).contains("finetune.batch"));
        assert!(bad(r#"{"finetune": {"factors": [3]}}"#).contains("finetune factor"));
        assert!(bad(r#"{"finetune": {"factors": [1]}}"#).contains("finetune factor"));
        assert!(bad(r#"{"finetune": {"valid_every": 150}}"#).contains("two validation points"));
        assert!(bad(r#"{"finetune": {"seeds": [7]}}"#).contains("finetune.seeds"));
        assert!(bad(r#"{"finetune": {"seeds": [0, 0]}}"#).contains("finetune.seeds"));
        assert!(bad(r#"{"budget_control": {"seeds": [9]}}"#).contains("budget_control.seeds"));
        assert!(bad(r#"{"budget_control": {"multiple": 1}}"#).contains("budget_control.multiple"));
        assert!(bad(r#"{"rope_bounds": {"beta_fast": 1}}"#).contains("beta_fast"));
        assert!(bad(r#"{"finetune": {"factors": [2, 2]}}"#).contains("each value once"));
        assert!(bad(r#"{"schemes": ["t5", "t5"]}"#).contains("invalid schemes = T5"));
        // a control's factor is checked like the others', naming the control
        assert!(
            bad(r#"{"finetune": {"controls": [{"scheme": "alibi", "factors": [3]}]}}"#)
                .contains("invalid finetune factor = 3")
        );
        let e = serde_json::from_str::<SweepConfig>(
            r#"{"finetune": {"controls": [{"scheme": "alibi", "factor": [2]}]}}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("factor"), "{e}");
        // no fine-tunes, no budget control: their seeds are not checked
        let none: SweepConfig = serde_json::from_str(
            r#"{"finetune": {"kinds": [], "controls": [], "seeds": []},
                "budget_control": {"schemes": [], "seeds": []}}"#,
        )
        .unwrap();
        none.validate().unwrap();
        assert!(none.finetunes().is_empty());
    }
}
