//! Every configuration of the language model, as serde types that need neither burn nor the
//! `train` feature: the model ([`ModelConfig`]) and its training ([`TrainConfig`]), saved in
//! every checkpoint's `config.json` ([`CheckpointInfo`]), and the sweep's ([`SweepConfig`]).
//! All reject unknown keys when read, and their `validate` methods check every value, upper
//! bounds included, before anything is built or trained.

pub mod checkpoint;
pub mod extension;
pub mod inference;
pub mod keys;
pub mod scheme;
pub mod sweep;
pub mod train;
mod validate;

pub use checkpoint::{CheckpointInfo, WeightDtype};
pub use extension::{FinetuneControl, SweepBudget, SweepFinetune, SWEEP_RAMP};
pub use inference::{Extension, InferenceMethod, TemperatureKind};
pub use keys::MODEL_KEYS;
pub use scheme::Scheme;
pub use sweep::{check_lengths, Mode, SweepConfig, SweepEval};
pub use train::TrainConfig;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::encodings::cope;
use crate::encodings::dd_alibi;
use crate::encodings::deberta;
use crate::encodings::fire;
use crate::encodings::rope::{RandomEval, RopeScaling, NEOX_ROTARY_FACTOR, P_ROPE_KEPT};
use crate::encodings::tupe;

/// Most blocks a model may have.
pub const MAX_LAYERS: usize = 64;
/// Largest model width $d$ and FFN width.
pub const MAX_WIDTH: usize = 16_384;
/// Most attention heads.
pub const MAX_HEADS: usize = 256;
/// Longest sequence a model trains at (training length, absolute tables, relative distances,
/// the exported attention maps' length); evaluation goes to [`MAX_EVAL_LEN`].
pub const MAX_LEN: usize = 16_384;
/// Longest evaluation length: the fused attention's memory grows linearly in $L$, and
/// `posenc eval` refuses a length whose pass will not fit in the memory available before it
/// starts.
pub const MAX_EVAL_LEN: usize = 65_536;
/// Most trainable parameters (1 GiB of `f32` weights; Adam keeps three times that).
pub const MAX_PARAMS: usize = 1 << 28;
/// Most sequences per training step.
pub const MAX_BATCH: usize = 4096;
/// Most bytes per training step ($B \cdot L$).
pub const MAX_TOKENS_PER_STEP: usize = 1 << 18;
/// Most attention weights of one training step, $B \cdot H \cdot L^2$ (4 GiB in `f32`).
pub const MAX_ATTENTION_ENTRIES: usize = 1 << 30;
/// Most optimiser steps.
pub const MAX_STEPS: usize = 100_000_000;
/// The most bytes of the validation split scored at each measurement during training.
pub const MAX_VALID_BYTES: usize = 1 << 20;

/// Model hyper-parameters. Defaults: the sweep's ~1M-parameter model. Read from JSON, missing
/// keys take the defaults and unknown keys are an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelConfig {
    /// Position scheme; default RoPE.
    pub scheme: Scheme,
    /// Vocabulary: 256 bytes.
    pub vocab: usize,
    /// Number of blocks; default 4.
    pub layers: usize,
    /// Model width $d$; default 128.
    pub d_model: usize,
    /// Attention heads; default 4 (head width 32).
    pub heads: usize,
    /// FFN hidden width; default 512.
    pub d_ff: usize,
    /// Training length; default 128.
    pub train_len: usize,
    /// Rows of the learned absolute and TUPE tables; default 128 (the training length).
    /// Positions past the table reuse its last row.
    pub max_positions: usize,
    /// Shaw clipping distance $k$; default 32.
    pub shaw_max_relative: usize,
    /// T5 (and TUPE) buckets; default 32 (causal: 16 exact, 16 logarithmic).
    pub t5_num_buckets: usize,
    /// T5 distance where the last bucket starts; default 128.
    pub t5_max_distance: usize,
    /// DeBERTa `position_buckets` (the span $s$); default 64.
    pub deberta_bucket_size: usize,
    /// DeBERTa `max_relative_positions`; default 128.
    pub deberta_max_position: usize,
    /// RoPE base; default 10000.
    pub rope_base: f64,
    /// RoPE context-extension scaling the model was trained (fine-tuned) with; default none.
    pub rope_scaling: RopeScaling,
    /// xPos scale base $B$; default 512.
    pub xpos_scale_base: f64,
    /// FIRE MLP width; default 32.
    pub fire_hidden: usize,
    /// FIRE's initial $c$, learned per layer from there; default 0.1 (the paper's).
    pub fire_c: f32,
    /// FIRE's initial threshold $L_0$, learned per layer as $|m L_0|$ from $m = 1$; default 32,
    /// a quarter of the default training length 128 as the paper's 512 of 2,048
    /// ([`crate::encodings::fire::initial_threshold`], what `posenc train` uses for a fresh
    /// model at any training length). A checkpoint written before $c$ and $L$ were learned
    /// keeps both fixed at `fire_c` and this.
    pub fire_threshold: f32,
    /// DPB MLP width; default 32 ($d_{model}/4$: x-transformers' `dim // 4`, CrossFormer).
    pub dpb_hidden: usize,
    /// DPB hidden layers; default 2 (x-transformers' `dynamic_pos_bias_mlp_depth`).
    pub dpb_depth: usize,
    /// DPB input $\operatorname{sign}(d)\ln(|d| + 1)$ rather than $d$; default true (the
    /// signed log distance; SwinV2's log-spaced coordinates).
    pub dpb_log_distance: bool,
    /// DPB LayerNorm after each hidden layer; default false (x-transformers' default).
    pub dpb_norm: bool,
    /// Partial RoPE's fraction $f$ of each head's channels rotated; default 0.25 (GPT-NeoX,
    /// Pythia).
    pub partial_rotary_factor: f64,
    /// p-RoPE's fraction $p$ of the pairs that rotate (the fastest); default 0.75 (Barbero et
    /// al. 2024).
    pub p_rope_kept: f64,
    /// RoPE/NoPE: layer $\ell$ (from 0) has no position encoding when
    /// $(\ell + 1) \bmod n = 0$; default 4 (Llama 4, Command A): the last of 4 layers.
    pub nope_every: usize,
    /// Randomized RoPE's range $N$ of training positions; default 32768 (four times the
    /// longest evaluated length, 8192, as Ruoss et al.'s 2048 to 500).
    pub random_positions_max: usize,
    /// Randomized RoPE's positions at evaluation; default sampled (as the reference code).
    pub random_positions_eval: RandomEval,
    /// Data-dependent ALiBi's initial gate bias $b_h$; default 5 (x-transformers'
    /// `bias_init`: $\sigma(5) \approx 0.993$, a nearly open gate).
    pub dd_alibi_gate_bias: f32,
    /// CoPE's positions $P$ (rows of its embedding table; counts clamp at $P - 1$); default
    /// 16 (x-transformers' `cope_max_pos`).
    pub cope_max_pos: usize,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            scheme: Scheme::Rope,
            vocab: 256,
            layers: 4,
            d_model: 128,
            heads: 4,
            d_ff: 512,
            train_len: 128,
            max_positions: 128,
            shaw_max_relative: 32,
            t5_num_buckets: 32,
            t5_max_distance: 128,
            deberta_bucket_size: 64,
            deberta_max_position: 128,
            rope_base: 10_000.0,
            rope_scaling: RopeScaling::None,
            xpos_scale_base: 512.0,
            fire_hidden: 32,
            fire_c: fire::DEFAULT_C,
            fire_threshold: 32.0,
            dpb_hidden: 32,
            dpb_depth: 2,
            dpb_log_distance: true,
            dpb_norm: false,
            partial_rotary_factor: NEOX_ROTARY_FACTOR,
            p_rope_kept: P_ROPE_KEPT,
            nope_every: 4,
            random_positions_max: 32_768,
            random_positions_eval: RandomEval::Sampled,
            dd_alibi_gate_bias: dd_alibi::GATE_BIAS_INIT,
            cope_max_pos: cope::DEFAULT_MAX_POS,
        }
    }
}

impl ModelConfig {
    /// The length a RoPE model's positions were originally trained at: its training length,
    /// or, for a model trained with a scaling of factor $s$ (a fine-tune at a longer length),
    /// $L_{train} / s$.
    pub fn original_len(&self) -> usize {
        match self.rope_scaling.factor() {
            Some(s) if s >= 1.0 => ((self.train_len as f64 / s).round() as usize).max(1),
            _ => self.train_len,
        }
    }

    /// A tiny model of `scheme` for tests and examples: 1 layer, width 16, 2 heads of 8,
    /// feed-forward 32, training length 12, and position hyper-parameters that fit that
    /// length (Shaw's clip 3, 8 T5 buckets to distance 10, DeBERTa's 6 buckets to 10, FIRE's
    /// 4 hidden units and threshold 12, DPB's 4 hidden units).
    pub fn tiny(scheme: Scheme) -> Self {
        Self {
            scheme,
            layers: 1,
            d_model: 16,
            heads: 2,
            d_ff: 32,
            train_len: 12,
            max_positions: 12,
            shaw_max_relative: 3,
            t5_num_buckets: 8,
            t5_max_distance: 10,
            deberta_bucket_size: 6,
            deberta_max_position: 10,
            fire_hidden: 4,
            fire_threshold: 12.0,
            dpb_hidden: 4,
            ..Self::default()
        }
    }

    /// Head width $d / H$.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.heads.max(1)
    }

    /// The scale of content scores: $1/\sqrt{d_h}$, DeBERTa $1/\sqrt{3 d_h}$ (three terms),
    /// TUPE $1/\sqrt{2 d_h}$ (two terms), as the reference schemes' `score_scale`.
    pub fn score_scale(&self) -> f32 {
        let dh = self.head_dim();
        match self.scheme {
            Scheme::Deberta => deberta::score_scale(dh),
            Scheme::Tupe => tupe::score_scale(dh),
            Scheme::Nope
            | Scheme::Sinusoidal
            | Scheme::Learned
            | Scheme::Shaw
            | Scheme::Xl
            | Scheme::T5
            | Scheme::Rope
            | Scheme::Alibi
            | Scheme::Xpos
            | Scheme::Kerple
            | Scheme::Fire
            | Scheme::Dpb
            | Scheme::PartialRope
            | Scheme::PRope
            | Scheme::RopeNope
            | Scheme::RandomRope
            | Scheme::DdAlibi
            | Scheme::Cope => 1.0 / (dh as f32).sqrt(),
        }
    }

    /// Trainable parameters of the content part (embedding, blocks, final LayerNorm), without
    /// the position parameters; saturates instead of overflowing.
    pub fn content_params(&self) -> usize {
        let (d, f) = (self.d_model, self.d_ff);
        // per block: W_q, W_k, W_v, W_o with biases, FFN up and down with biases, 2 LayerNorms
        let block = 4usize
            .saturating_mul(d.saturating_mul(d).saturating_add(d))
            .saturating_add(2usize.saturating_mul(d.saturating_mul(f)))
            .saturating_add(f)
            .saturating_add(5usize.saturating_mul(d));
        self.layers
            .saturating_mul(block)
            .saturating_add(self.vocab.saturating_mul(d))
            .saturating_add(2 * d)
    }
}

impl fmt::Display for ModelConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} | {} layers, d={}, {} heads, ffn {}, train length {}",
            self.scheme, self.layers, self.d_model, self.heads, self.d_ff, self.train_len
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Result;

    fn message<T: std::fmt::Debug>(r: Result<T>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn the_defaults_are_valid() {
        ModelConfig::default().validate().unwrap();
        TrainConfig::default()
            .validate_for(&ModelConfig::default())
            .unwrap();
    }

    #[test]
    fn unknown_keys_are_errors_that_name_the_key() {
        let e = serde_json::from_str::<ModelConfig>(r#"{"layers": 2, "rope_scalling": null}"#)
            .unwrap_err();
        assert!(e.to_string().contains("rope_scalling"), "{e}");
        let e = serde_json::from_str::<TrainConfig>(r#"{"stpes": 3}"#).unwrap_err();
        assert!(e.to_string().contains("stpes"), "{e}");
        let e = serde_json::from_str::<ModelConfig>(
            r#"{"rope_scaling": {"type": "linear", "factor": 2, "facter": 3}}"#,
        )
        .unwrap_err();
        assert!(e.to_string().contains("facter"), "{e}");
        // missing keys take the defaults
        let c: ModelConfig = serde_json::from_str(r#"{"layers": 2}"#).unwrap();
        assert_eq!(c.layers, 2);
        assert_eq!(c.d_model, ModelConfig::default().d_model);
    }

    #[test]
    fn out_of_range_values_name_the_key_and_the_bound() {
        let bad = |f: fn(&mut ModelConfig)| {
            let mut c = ModelConfig::default();
            f(&mut c);
            message(c.validate())
        };
        assert!(bad(|c| c.heads = 4_294_967_296).contains("heads"));
        assert!(bad(|c| c.train_len = 1_000_000).contains(&format!("2 to {MAX_LEN}")));
        assert!(bad(|c| c.layers = 0).contains("layers"));
        assert!(bad(|c| c.d_model = 10).contains("d_model"));
        assert!(bad(|c| {
            c.scheme = Scheme::T5;
            c.t5_num_buckets = 1;
        })
        .contains("num_buckets"));
        assert!(bad(|c| c.rope_base = f64::NAN).contains("base"));
        assert!(bad(|c| {
            c.scheme = Scheme::Alibi;
            c.rope_scaling = RopeScaling::yarn(2.0, 64);
        })
        .contains("rope_scaling"));
        assert!(bad(|c| {
            c.layers = 64;
            c.d_model = 16_384;
        })
        .contains("parameters"));

        let bad = |f: fn(&mut TrainConfig)| {
            let mut t = TrainConfig::default();
            f(&mut t);
            message(t.validate_for(&ModelConfig::default()))
        };
        assert!(bad(|t| t.batch = 0).contains("invalid batch = 0"));
        assert!(bad(|t| t.lr = f64::NAN).contains("invalid lr = NaN"));
        assert!(bad(|t| t.lr = -1.0).contains("invalid lr = -1"));
        assert!(bad(|t| t.steps = 0).contains("steps"));
        assert!(bad(|t| t.min_lr_ratio = 2.0).contains("min_lr_ratio"));
        assert!(bad(|t| t.grad_clip = 0.0).contains("grad_clip"));
        assert!(bad(|t| t.batch = 4096).contains("bytes per step"));
    }
}
