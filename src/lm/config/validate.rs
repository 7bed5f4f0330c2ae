//! [`ModelConfig::validate`]: every field of a model's configuration checked, with its upper
//! bound, and the scheme's position objects built once, before any training or evaluation.

use super::{ModelConfig, Scheme, MAX_HEADS, MAX_LAYERS, MAX_LEN, MAX_PARAMS, MAX_WIDTH};
use crate::encodings::cope;
use crate::encodings::deberta::LogBuckets;
use crate::encodings::rope::{
    p_rope_pairs, partial_rotary_dim, RandomPositions, RopeConfig, RopeScaling,
};
use crate::encodings::t5::T5Buckets;
use crate::error::{ensure, ensure_positive, invalid, Result};

impl ModelConfig {
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
