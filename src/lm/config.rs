//! Every configuration of the language model, as serde types that need neither burn nor the
//! `train` feature: the model ([`ModelConfig`]) and its training ([`TrainConfig`]), saved in
//! every checkpoint's `config.json` ([`CheckpointInfo`]), and the sweep's ([`SweepConfig`]).
//! All reject unknown keys when read, and their `validate` methods check every value, upper
//! bounds included, before anything is built or trained.

pub mod checkpoint;
pub mod extension;
pub mod inference;
pub mod keys;
pub mod sweep;
pub mod train;

pub use checkpoint::{CheckpointInfo, WeightDtype};
pub use extension::{FinetuneControl, SweepBudget, SweepFinetune, SWEEP_RAMP};
pub use inference::{Extension, InferenceMethod};
pub use keys::MODEL_KEYS;
pub use sweep::{check_lengths, Mode, SweepConfig, SweepEval};
pub use train::TrainConfig;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::encodings::cope;
use crate::encodings::dd_alibi;
use crate::encodings::deberta::{self, LogBuckets};
use crate::encodings::fire;
use crate::encodings::rope::{
    p_rope_pairs, partial_rotary_dim, RandomEval, RandomPositions, RopeConfig, RopeScaling,
    NEOX_ROTARY_FACTOR, P_ROPE_KEPT,
};
use crate::encodings::t5::T5Buckets;
use crate::encodings::tupe;
use crate::error::{ensure, ensure_positive, invalid, Result};

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

/// Every position scheme of the crate, as selected on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheme {
    /// NoPE: no position information at all (causal masking alone).
    Nope,
    /// Sinusoidal absolute table added to the input.
    Sinusoidal,
    /// Learned absolute table added to the input.
    Learned,
    /// Shaw et al.: clipped relative key and value vectors.
    Shaw,
    /// Transformer-XL: $u$, $v$, $W_R$ and sinusoidal relative embeddings.
    Xl,
    /// T5: a learned scalar per bucket and head.
    T5,
    /// DeBERTa: content-to-position and position-to-content terms with log buckets.
    Deberta,
    /// TUPE: untied absolute position term plus a T5 bias.
    Tupe,
    /// RoPE (half layout).
    Rope,
    /// ALiBi: fixed per-head linear distance penalties.
    Alibi,
    /// xPos: RoPE with an exponential decay.
    Xpos,
    /// Kerple (log variant) with learned $r_1, r_2$.
    Kerple,
    /// FIRE: an MLP of the normalised log distance.
    Fire,
    /// Dynamic position bias: an MLP of the signed log distance per layer.
    Dpb,
    /// Partial RoPE: the first `partial_rotary_factor` of each head's channels rotated.
    #[serde(rename = "partial_rope")]
    PartialRope,
    /// p-RoPE: the lowest frequencies of RoPE dropped (`p_rope_kept` of the pairs rotate).
    #[serde(rename = "p_rope")]
    PRope,
    /// RoPE with a global NoPE layer every `nope_every` layers.
    #[serde(rename = "rope_nope")]
    RopeNope,
    /// RoPE trained at random ordered positions from `[0, random_positions_max)`.
    #[serde(rename = "random_rope")]
    RandomRope,
    /// Data-dependent ALiBi (the forgetting gate): a bias summing the log gates of the tokens
    /// between key and query.
    #[serde(rename = "dd_alibi")]
    DdAlibi,
    /// CoPE: positions counted by gates from the query's own logits, embeddings interpolated.
    Cope,
}

impl Scheme {
    /// All schemes, in the order of the results table.
    pub const ALL: [Scheme; 20] = [
        Scheme::Nope,
        Scheme::Sinusoidal,
        Scheme::Learned,
        Scheme::Shaw,
        Scheme::Xl,
        Scheme::T5,
        Scheme::Deberta,
        Scheme::Tupe,
        Scheme::Rope,
        Scheme::Alibi,
        Scheme::Xpos,
        Scheme::Kerple,
        Scheme::Fire,
        Scheme::Dpb,
        Scheme::PartialRope,
        Scheme::PRope,
        Scheme::RopeNope,
        Scheme::RandomRope,
        Scheme::DdAlibi,
        Scheme::Cope,
    ];

    /// One line on the scheme, for help texts.
    pub fn summary(&self) -> &'static str {
        match self {
            Scheme::Nope => "NoPE: no position information at all (causal masking alone)",
            Scheme::Sinusoidal => "Sinusoidal absolute table added to the input",
            Scheme::Learned => "Learned absolute table added to the input",
            Scheme::Shaw => "Shaw et al.: clipped relative key and value vectors",
            Scheme::Xl => "Transformer-XL: u, v, W_R and sinusoidal relative embeddings",
            Scheme::T5 => "T5: a learned scalar per bucket and head",
            Scheme::Deberta => {
                "DeBERTa: content-to-position and position-to-content terms with log buckets"
            }
            Scheme::Tupe => "TUPE: untied absolute position term plus a T5 bias",
            Scheme::Rope => "RoPE (half layout)",
            Scheme::Alibi => "ALiBi: fixed per-head linear distance penalties",
            Scheme::Xpos => "xPos: RoPE with an exponential decay",
            Scheme::Kerple => "Kerple (log variant) with learned r1, r2",
            Scheme::Fire => "FIRE: an MLP of the normalised log distance",
            Scheme::Dpb => "Dynamic position bias: an MLP of the signed log distance per layer",
            Scheme::PartialRope => "Partial RoPE: the first part of each head's channels rotated",
            Scheme::PRope => "p-RoPE: RoPE with its slowest pairs left unrotated",
            Scheme::RopeNope => "RoPE layers with a global NoPE layer every few layers",
            Scheme::RandomRope => "RoPE trained at random ordered positions from a wider range",
            Scheme::DdAlibi => {
                "Data-dependent ALiBi: a forget gate per token and head sums to the bias"
            }
            Scheme::Cope => {
                "CoPE: contextual positions, counts of sigmoid gates of the query's logits"
            }
        }
    }

    /// The command-line name: `nope`, `sinusoidal`, ..., `fire`.
    pub fn name(&self) -> &'static str {
        match self {
            Scheme::Nope => "nope",
            Scheme::Sinusoidal => "sinusoidal",
            Scheme::Learned => "learned",
            Scheme::Shaw => "shaw",
            Scheme::Xl => "xl",
            Scheme::T5 => "t5",
            Scheme::Deberta => "deberta",
            Scheme::Tupe => "tupe",
            Scheme::Rope => "rope",
            Scheme::Alibi => "alibi",
            Scheme::Xpos => "xpos",
            Scheme::Kerple => "kerple",
            Scheme::Fire => "fire",
            Scheme::Dpb => "dpb",
            Scheme::PartialRope => "partial_rope",
            Scheme::PRope => "p_rope",
            Scheme::RopeNope => "rope_nope",
            Scheme::RandomRope => "random_rope",
            Scheme::DdAlibi => "dd_alibi",
            Scheme::Cope => "cope",
        }
    }
}

crate::named::named!(Scheme, "scheme");

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

    /// Checks every field, with upper bounds, and the position objects of the scheme (so a bad
    /// bucket count fails here, before any training).
    ///
    /// # Errors
    /// A zero or too large size, a width not divisible by the heads, an odd head width, a
    /// vocabulary other than 256, a non-finite or out-of-range base, a RoPE scaling on a
    /// scheme that is not RoPE, or position parameters the encodings reject.
    pub fn validate(&self) -> Result<()> {
        let at_most = |max: usize| format!("1 to {max}");
        ensure(self.vocab == 256, "vocab", self.vocab, "256 (bytes)")?;
        ensure(
            (1..=MAX_LAYERS).contains(&self.layers),
            "layers",
            self.layers,
            &at_most(MAX_LAYERS),
        )?;
        ensure(
            (1..=MAX_HEADS).contains(&self.heads),
            "heads",
            self.heads,
            &at_most(MAX_HEADS),
        )?;
        ensure(
            self.d_model > 0
                && self.d_model <= MAX_WIDTH
                && self.d_model.is_multiple_of(self.heads)
                && self.head_dim().is_multiple_of(2),
            "d_model",
            self.d_model,
            &format!(
                "a multiple of 2 x heads = {} up to {MAX_WIDTH}",
                2 * self.heads
            ),
        )?;
        ensure(
            (1..=MAX_WIDTH).contains(&self.d_ff),
            "d_ff",
            self.d_ff,
            &at_most(MAX_WIDTH),
        )?;
        ensure(
            (2..=MAX_LEN).contains(&self.train_len),
            "train_len",
            self.train_len,
            &format!("2 to {MAX_LEN}"),
        )?;
        ensure(
            (1..=MAX_LEN).contains(&self.max_positions),
            "max_positions",
            self.max_positions,
            &at_most(MAX_LEN),
        )?;
        ensure(
            (1..=MAX_LEN).contains(&self.shaw_max_relative),
            "shaw_max_relative",
            self.shaw_max_relative,
            &at_most(MAX_LEN),
        )?;
        ensure(
            self.t5_num_buckets <= MAX_LEN,
            "t5_num_buckets",
            self.t5_num_buckets,
            &format!("at most {MAX_LEN}"),
        )?;
        ensure(
            self.t5_max_distance <= MAX_LEN,
            "t5_max_distance",
            self.t5_max_distance,
            &format!("at most {MAX_LEN}"),
        )?;
        ensure(
            self.deberta_bucket_size <= MAX_LEN,
            "deberta_bucket_size",
            self.deberta_bucket_size,
            &format!("at most {MAX_LEN}"),
        )?;
        ensure(
            self.deberta_max_position <= MAX_LEN,
            "deberta_max_position",
            self.deberta_max_position,
            &format!("at most {MAX_LEN}"),
        )?;
        ensure(
            (1..=MAX_WIDTH).contains(&self.fire_hidden),
            "fire_hidden",
            self.fire_hidden,
            &at_most(MAX_WIDTH),
        )?;
        ensure_positive("fire_c", self.fire_c)?;
        ensure(
            self.fire_threshold.is_finite() && self.fire_threshold >= 1.0,
            "fire_threshold",
            self.fire_threshold,
            "a finite number >= 1",
        )?;
        ensure_positive("xpos_scale_base", self.xpos_scale_base)?;
        ensure(
            self.content_params() <= MAX_PARAMS,
            "layers, d_model, d_ff",
            format!(
                "{} x {} x {} ({} parameters)",
                self.layers,
                self.d_model,
                self.d_ff,
                self.content_params()
            ),
            &format!("at most {MAX_PARAMS} parameters"),
        )?;
        if self.rope_scaling != RopeScaling::None && self.scheme != Scheme::Rope {
            return Err(invalid(
                "rope_scaling",
                self.rope_scaling.name(),
                format!(
                    "none for scheme {} (RoPE scalings apply to rope)",
                    self.scheme
                ),
            ));
        }
        // the scheme's own position objects, as the model will build them
        match self.scheme {
            Scheme::Rope => {
                RopeConfig::with_scaling(self.head_dim(), self.rope_base, self.rope_scaling)?;
            }
            Scheme::T5 | Scheme::Tupe => {
                T5Buckets::new(self.t5_num_buckets, self.t5_max_distance, false)?;
            }
            Scheme::Deberta => {
                LogBuckets::new(self.deberta_bucket_size, self.deberta_max_position)?;
            }
            Scheme::Nope
            | Scheme::Sinusoidal
            | Scheme::Learned
            | Scheme::Shaw
            | Scheme::Xl
            | Scheme::Alibi
            | Scheme::Xpos
            | Scheme::Kerple
            | Scheme::Fire => {}
            Scheme::Dpb => {
                ensure(
                    (1..=MAX_WIDTH).contains(&self.dpb_hidden),
                    "dpb_hidden",
                    self.dpb_hidden,
                    &at_most(MAX_WIDTH),
                )?;
                ensure(
                    (1..=MAX_LAYERS).contains(&self.dpb_depth),
                    "dpb_depth",
                    self.dpb_depth,
                    &at_most(MAX_LAYERS),
                )?;
            }
            Scheme::PartialRope => {
                partial_rotary_dim(self.head_dim(), self.partial_rotary_factor)?;
            }
            Scheme::PRope => {
                p_rope_pairs(self.head_dim(), self.p_rope_kept)?;
            }
            Scheme::RopeNope => ensure(
                (1..=MAX_LAYERS).contains(&self.nope_every),
                "nope_every",
                self.nope_every,
                &format!("1 to {MAX_LAYERS} (more than layers: no NoPE layer)"),
            )?,
            Scheme::RandomRope => {
                RandomPositions::new(self.random_positions_max, self.random_positions_eval)?;
                ensure(
                    self.random_positions_max >= self.train_len,
                    "random_positions_max",
                    self.random_positions_max,
                    &format!("at least train_len = {}", self.train_len),
                )?;
            }
            Scheme::DdAlibi => ensure(
                self.dd_alibi_gate_bias.is_finite(),
                "dd_alibi_gate_bias",
                self.dd_alibi_gate_bias,
                "a finite number",
            )?,
            Scheme::Cope => ensure(
                (1..=cope::MAX_POS).contains(&self.cope_max_pos),
                "cope_max_pos",
                self.cope_max_pos,
                &format!("1 to {}", cope::MAX_POS),
            )?,
        }
        ensure(
            self.rope_base.is_finite() && self.rope_base > 1.0,
            "rope_base",
            self.rope_base,
            "a finite number > 1",
        )?;
        self.rope_scaling.validate()
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
