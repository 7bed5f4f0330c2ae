//! The sweep's configuration ([`SweepConfig`], `posenc sweep --config FILE`): the model and
//! training shared by every scheme, the evaluation ([`SweepEval`]), and (in `extension.rs`)
//! the RoPE scalings' bounds, the fine-tunes and the controls. Missing fields take the
//! defaults; unknown keys are an error.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::extension::{SweepBudget, SweepFinetune, SWEEP_RAMP};
use super::inference::{Extension, InferenceMethod, TemperatureKind, DEFAULT_FLOOR_LOG_BETA};
use super::{ModelConfig, Scheme, TrainConfig, WeightDtype, MAX_EVAL_LEN};
use crate::encodings::rope::{RampBounds, ScalingKind};
use crate::error::{ensure, invalid, Result};
use crate::io::read_json;

/// The largest target segment of matched evaluation, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 1 << 20;

/// How windows are laid out and which bytes they score (`crate::lm::eval` has the details).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The primary metric: the same target bytes at every length, each scored once with
    /// between $\lfloor L/2 \rfloor + 1$ and $L$ bytes of context (windows of length $L$ at
    /// stride $\lceil L/2 \rceil$, their last $\lceil L/2 \rceil$ positions scored), in
    /// segments that pair across lengths, models and seeds.
    Matched,
    /// Windows of the longest length, prefixes of length $L$ scored: a secondary view, in
    /// which the context-free first positions weigh more at short lengths.
    Nonoverlap,
    /// Windows of length $L$ at stride $L/2$ from the split's start.
    Sliding,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Matched, Mode::Nonoverlap, Mode::Sliding];

    /// One line on the mode, for help texts.
    pub fn summary(&self) -> &'static str {
        match self {
            Mode::Matched => {
                "The same target bytes at every length, each with L/2 to L bytes of context"
            }
            Mode::Nonoverlap => "Windows of the longest length, prefixes of length L scored",
            Mode::Sliding => "Windows of length L at stride L/2",
        }
    }

    /// `matched`, `nonoverlap` or `sliding`.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::Matched => "matched",
            Mode::Nonoverlap => "nonoverlap",
            Mode::Sliding => "sliding",
        }
    }

    /// Whether the windows of two lengths score the same bytes, so that they pair across
    /// lengths (by seed and start): `matched` (the same target segments) and `nonoverlap` (the
    /// same window starts, prefixes of different lengths), not `sliding`.
    pub fn pairs_across_lengths(&self) -> bool {
        match self {
            Mode::Matched | Mode::Nonoverlap => true,
            Mode::Sliding => false,
        }
    }
}

crate::named::named!(Mode, "mode");

/// Checks the lengths and the window layout before any work: at least one length, each from
/// 1 to [`MAX_LEN`](super::MAX_LEN).
///
/// # Errors
/// [`crate::Error::InvalidParameter`] naming `lengths` and the bound.
pub fn check_lengths(lengths: &[usize]) -> Result<()> {
    let bad = lengths.iter().find(|&&l| l == 0 || l > MAX_EVAL_LEN);
    if lengths.is_empty() || bad.is_some() {
        return Err(invalid(
            "lengths",
            bad.map_or_else(|| "[]".to_string(), ToString::to_string),
            format!("one or more lengths, each from 1 to {MAX_EVAL_LEN}"),
        ));
    }
    Ok(())
}

/// Evaluation settings of the sweep. The table is scored on the test split; the validation
/// split keeps the training curves, the plateau check and any selection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SweepEval {
    /// Lengths; default 128, 256, ..., 8192 (1x to 64x the training length).
    pub lengths: Vec<usize>,
    /// Only the first bytes of the split in non-overlapping mode; default null (the whole
    /// split).
    pub max_bytes: Option<usize>,
    /// Only the first bytes of the split in sliding mode; default 32768. Sliding windows score
    /// every byte of the budget at every length, at about twice the cost per byte.
    pub sliding_max_bytes: Option<usize>,
    /// Only the first bytes of the split in matched mode; default null (the whole split).
    pub matched_max_bytes: Option<usize>,
    /// Bytes of one target segment in matched mode, the unit that pairs across lengths,
    /// models and seeds and that the text bootstrap resamples; default 1024.
    pub segment_bytes: usize,
    /// Split; default `test`.
    pub split: String,
    /// Window layouts, each evaluated; default matched (the primary metric) and nonoverlap
    /// (the prefix view).
    pub modes: Vec<Mode>,
}

impl Default for SweepEval {
    fn default() -> Self {
        Self {
            lengths: vec![128, 256, 512, 1024, 2048, 4096, 8192],
            max_bytes: None,
            sliding_max_bytes: Some(32_768),
            matched_max_bytes: None,
            segment_bytes: 1024,
            split: "test".into(),
            modes: vec![Mode::Matched, Mode::Nonoverlap],
        }
    }
}

impl SweepEval {
    /// The byte budget of `mode`: [`SweepEval::matched_max_bytes`],
    /// [`SweepEval::max_bytes`] or [`SweepEval::sliding_max_bytes`].
    pub fn budget(&self, mode: Mode) -> Option<usize> {
        match mode {
            Mode::Matched => self.matched_max_bytes,
            Mode::Nonoverlap => self.max_bytes,
            Mode::Sliding => self.sliding_max_bytes,
        }
    }
}

/// The sweep's configuration (`posenc sweep --config FILE`, JSON; missing fields take the
/// defaults, which are the sweep of record's (`data/configs/sweep.json`) except for the
/// folders, under `target/sweep/`; unknown keys are an error).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SweepConfig {
    /// The model (its `scheme` is replaced by each scheme in turn).
    pub model: ModelConfig,
    /// Training of every scheme, the same budget for all; default 2000 steps of 32 x 128
    /// bytes (8.2 MB), the validation loss every 100 steps, otherwise [`TrainConfig`]'s
    /// defaults.
    pub train: TrainConfig,
    /// Schemes; default every scheme ([`Scheme::ALL`]).
    pub schemes: Vec<Scheme>,
    /// Evaluation.
    pub eval: SweepEval,
    /// Extensions applied at inference to the RoPE checkpoint ([`InferenceMethod`]): the
    /// scalings (factor $L/L_{train}$ at each length), dynamic YaRN with a key cache, ReRoPE
    /// and Leaky ReRoPE (window [`SweepConfig::rerope_window`], $k$
    /// [`SweepConfig::rerope_leak`]), Self-Extend, and a query temperature (log-$n$ or
    /// floor-log) alone or on an extension; default the six scalings (NTK-by-parts beside YaRN
    /// separates YaRN's two ingredients: its frequencies and its temperature), then `rerope`,
    /// `leaky-rerope`, `self-extend`, `log-n`, `ntk+log-n`, `yarn+log-n`, `rerope+log-n` (Su's
    /// ReRoPE code applies log-$n$ with it), `dynamic-yarn`, `floor-log` and `yarn+floor-log`
    /// (Ministral 3's pair).
    pub rope_inference: Vec<InferenceMethod>,
    /// YaRN's betas and Llama 3's frequency factors, the same for the scalings at inference and
    /// the fine-tunes; default [`SWEEP_RAMP`] (2 / 1 and 1 / 2, chosen for the sweep's model;
    /// the references' are 32 / 1 and 1 / 4).
    pub rope_bounds: RampBounds,
    /// The fine-tunes at longer lengths: RoPE with PI and YaRN at every factor, and the
    /// equal-extra-bytes controls.
    pub finetune: SweepFinetune,
    /// The budget control: some schemes trained again with more bytes.
    pub budget_control: SweepBudget,
    /// Checkpoint folder; default `target/sweep/checkpoints` (the shipped ones are in
    /// `data/checkpoints`, written only by a configuration that names it).
    pub checkpoints: PathBuf,
    /// Results CSV; default `target/sweep/results/ppl_vs_length.csv` (the sweep of record
    /// writes `data/sweep/results/ppl_vs_length.csv`).
    pub results: PathBuf,
    /// Precision of saved weights; default f16.
    pub dtype: WeightDtype,
    /// Reuse a finished checkpoint with the same configuration, and a finished item's results
    /// when its weights and evaluation are the same; default true.
    pub reuse: bool,
    /// Training seeds (weights and data order); every from-scratch model is trained with each
    /// (the fine-tunes and the budget control with theirs); default 0 to 4.
    pub seeds: Vec<u64>,
    /// Checkpoint folder of every seed but the first (the first seed's go to `checkpoints`);
    /// default `target/sweep/seed-checkpoints` (the sweep of record keeps them, in
    /// `data/sweep/seed-checkpoints`, so that a later sitting reuses their items).
    pub seed_checkpoints: PathBuf,
    /// Dynamic NTK's fixed factor $s$ at inference (the base grows with the evaluated length
    /// $L$: $b\,(sL/L_{train} - s + 1)^{d/(d-2)}$ for $L > L_{train}$); default 2.
    pub dynamic_factor: f64,
    /// ReRoPE's and Leaky ReRoPE's window $w$ at inference, at least 1 and, where RoPE is
    /// extended with either, below the training length; default 64 ([`DEFAULT_REROPE_WINDOW`]).
    pub rerope_window: usize,
    /// Leaky ReRoPE's $k \ge 1$ (slope $1/k$ beyond the window); default 32
    /// ([`DEFAULT_REROPE_LEAK`]).
    pub rerope_leak: f64,
    /// Self-Extend's neighbour window $w$ at inference (`self-extend` in
    /// [`SweepConfig::rope_inference`]), at least 1 and, where RoPE is extended with it, below
    /// the training length; default 32 ([`DEFAULT_SELF_EXTEND`]).
    pub self_extend_window: usize,
    /// Self-Extend's group size $G \ge 1$; default 32 ([`DEFAULT_SELF_EXTEND`]).
    pub self_extend_group: usize,
    /// The floor-log temperature's $\beta \ge 0$ (`floor-log` in
    /// [`SweepConfig::rope_inference`]: $\tau_m = 1 + \beta \ln(1 + \lfloor m / L_{train}
    /// \rfloor)$); default 0.1 ([`DEFAULT_FLOOR_LOG_BETA`]).
    pub floor_log_beta: f64,
}

/// Self-Extend's default window and group for the sweep's model (training length
/// $L = 128$): $(w, G) = (32, 32)$. Jin et al. keep a neighbour window of about a quarter of
/// the training length (1024 of Llama 2's 4096), so $w = L/4 = 32$; beyond it a model
/// trained at $L$ reaches $(L - w)\,G + w$ positions, and $G = 32$ is the smallest power of
/// two that reaches 16x ($96 \cdot 32 + 32 = 3104 \ge 2048$; $G = 16$ reaches 1568).
pub const DEFAULT_SELF_EXTEND: (usize, usize) = (32, 32);

/// ReRoPE's default window for the sweep's model (training length $L = 128$): $w = L/2 = 64$.
/// Su's ReRoPE post (<https://kexue.fm/archives/9708>) keeps the relative positions below $w$
/// exact and must keep every position a pair is scored at inside the trained range, $w < L$;
/// Leaky ReRoPE also needs room beyond the window for its interpolated far keys,
/// $L - 1 - w$ positions. $w = L/2$ splits the trained positions evenly between the two: the
/// nearest 64 bytes (about a dozen words) keep their exact distances, the far keys share the
/// other 63 positions. (Su's `rerope_patch.py` takes $w = 512$ at $L = 4096$, $L/8$: in bytes
/// that would be a 16-byte window, a few words, which leaves little of a byte model's local
/// context exact.)
pub const DEFAULT_REROPE_WINDOW: usize = 64;

/// Leaky ReRoPE's default $k$ for the sweep's model: 32, the smallest power of two at which
/// the largest position of a 16x input stays inside the trained range. Su's criterion (Leaky
/// ReRoPE interpolates beyond the window so that no pair leaves the positions training saw):
/// $w + (\ell - 1 - w)/k \le L - 1$, i.e. $k \ge (\ell - 1 - w)/(L - 1 - w)$, which is
/// $(2047 - 64)/63 = 31.5$ at $\ell = 2048$ (16x). Beyond 16x the far keys extrapolate
/// slowly (at 64x the largest position is $64 + 8127/32 \approx 318$). Su's
/// `leaky_rerope_patch.py` takes $k = 16$ with $w = L/8$, which covers 14x.
pub const DEFAULT_REROPE_LEAK: f64 = 32.0;

impl Default for SweepConfig {
    fn default() -> Self {
        Self {
            model: ModelConfig::default(),
            train: TrainConfig {
                steps: 2000,
                valid_every: 100,
                ..TrainConfig::default()
            },
            schemes: Scheme::ALL.to_vec(),
            eval: SweepEval::default(),
            rope_inference: ScalingKind::ALL
                .iter()
                .map(|&k| InferenceMethod::scaling(k))
                .chain([
                    InferenceMethod::of(Extension::ReRope),
                    InferenceMethod::of(Extension::LeakyReRope),
                    InferenceMethod::of(Extension::SelfExtend),
                    InferenceMethod::with_log_n(Extension::Plain),
                    InferenceMethod::with_log_n(Extension::Scaling(ScalingKind::Ntk)),
                    InferenceMethod::with_log_n(Extension::Scaling(ScalingKind::Yarn)),
                    InferenceMethod::with_log_n(Extension::ReRope),
                    InferenceMethod::of(Extension::DynamicYarn),
                    InferenceMethod::tempered(Extension::Plain, TemperatureKind::FloorLog),
                    InferenceMethod::tempered(
                        Extension::Scaling(ScalingKind::Yarn),
                        TemperatureKind::FloorLog,
                    ),
                ])
                .collect(),
            rope_bounds: SWEEP_RAMP,
            finetune: SweepFinetune::default(),
            budget_control: SweepBudget::default(),
            checkpoints: "target/sweep/checkpoints".into(),
            results: "target/sweep/results/ppl_vs_length.csv".into(),
            dtype: WeightDtype::F16,
            reuse: true,
            seeds: vec![0, 1, 2, 3, 4],
            seed_checkpoints: "target/sweep/seed-checkpoints".into(),
            dynamic_factor: 2.0,
            rerope_window: DEFAULT_REROPE_WINDOW,
            rerope_leak: DEFAULT_REROPE_LEAK,
            self_extend_window: DEFAULT_SELF_EXTEND.0,
            self_extend_group: DEFAULT_SELF_EXTEND.1,
            floor_log_beta: DEFAULT_FLOOR_LOG_BETA,
        }
    }
}

impl SweepConfig {
    /// Reads a JSON file.
    ///
    /// # Errors
    /// An unreadable or invalid file.
    pub fn read(path: &Path) -> Result<Self> {
        read_json(path)
    }

    /// Checks every value before any work: each scheme's model and training, the lengths and
    /// byte budgets of the evaluation, the fine-tunes.
    ///
    /// # Errors
    /// The first invalid value, named by its key.
    pub fn validate(&self) -> Result<()> {
        for &scheme in &self.schemes {
            let model = ModelConfig {
                scheme,
                ..self.model.clone()
            };
            model
                .validate()
                .and_then(|()| self.train.validate_for(&model))
                .map_err(|e| e.context(format!("model of {scheme}")))?;
        }
        let e = &self.eval;
        check_lengths(&e.lengths).map_err(|err| err.context("eval"))?;
        ensure(
            !e.modes.is_empty(),
            "eval.modes",
            "[]",
            "one or more of matched, nonoverlap and sliding",
        )?;
        ensure(
            (1..=MAX_SEGMENT_BYTES).contains(&e.segment_bytes),
            "eval.segment_bytes",
            e.segment_bytes,
            &format!("1 to {MAX_SEGMENT_BYTES}"),
        )?;
        ensure(
            ["valid", "test"].contains(&e.split.as_str()),
            "eval.split",
            &e.split,
            "valid or test",
        )?;
        let longest = e.lengths.iter().copied().max().unwrap_or(1);
        for (name, budget) in [
            ("eval.max_bytes", e.max_bytes),
            ("eval.sliding_max_bytes", e.sliding_max_bytes),
            ("eval.matched_max_bytes", e.matched_max_bytes),
        ] {
            if let Some(b) = budget {
                ensure(
                    b > longest,
                    name,
                    b,
                    &format!("more than the longest length {longest} (one window of {} bytes), or null for all", longest + 1),
                )?;
            }
        }
        ensure(
            !self.seeds.is_empty()
                && self
                    .seeds
                    .iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
                    == self.seeds.len(),
            "seeds",
            format!("{:?}", self.seeds),
            "one or more distinct seeds",
        )?;
        ensure(
            self.dynamic_factor.is_finite() && self.dynamic_factor >= 1.0,
            "dynamic_factor",
            self.dynamic_factor,
            "a finite number >= 1",
        )?;
        // a window counts against the training length only where an item applies it
        let applied = |kinds: &[Extension]| {
            self.schemes.contains(&Scheme::Rope)
                && self
                    .rope_inference
                    .iter()
                    .any(|m| kinds.contains(&m.extension))
        };
        for (key, window, used) in [
            (
                "rerope_window",
                self.rerope_window,
                applied(&[Extension::ReRope, Extension::LeakyReRope]),
            ),
            (
                "self_extend_window",
                self.self_extend_window,
                applied(&[Extension::SelfExtend]),
            ),
        ] {
            ensure(
                window >= 1 && (!used || window < self.model.train_len),
                key,
                window,
                &format!(
                    "1 to {} (below the training length)",
                    self.model.train_len.saturating_sub(1)
                ),
            )?;
        }
        ensure(
            self.self_extend_group >= 1,
            "self_extend_group",
            self.self_extend_group,
            "at least 1",
        )?;
        ensure(
            self.rerope_leak.is_finite() && self.rerope_leak >= 1.0,
            "rerope_leak",
            self.rerope_leak,
            "a finite number >= 1 (Leaky ReRoPE's slope beyond the window is 1/k)",
        )?;
        ensure(
            self.floor_log_beta.is_finite() && self.floor_log_beta >= 0.0,
            "floor_log_beta",
            self.floor_log_beta,
            "a finite number >= 0",
        )?;
        self.validate_extension()?;
        if self.schemes.is_empty() && self.finetunes().is_empty() {
            return Err(invalid("schemes", "[]", "at least one scheme or fine-tune"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_mode_has_its_budget_and_pairing() {
        let e = SweepEval {
            max_bytes: Some(1),
            sliding_max_bytes: Some(2),
            matched_max_bytes: Some(3),
            ..SweepEval::default()
        };
        assert_eq!(Mode::ALL.map(|m| e.budget(m)), [Some(3), Some(1), Some(2)]);
        assert_eq!(
            Mode::ALL.map(|m| m.pairs_across_lengths()),
            [true, true, false]
        );
        // the default: matched and nonoverlap on the whole test split
        let d = SweepEval::default();
        assert_eq!(
            (d.split.as_str(), d.modes.as_slice()),
            ("test", &[Mode::Matched, Mode::Nonoverlap][..])
        );
        assert_eq!(
            (d.budget(Mode::Matched), d.budget(Mode::Nonoverlap)),
            (None, None)
        );
    }
}
