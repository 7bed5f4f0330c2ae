//! The trained form of every position scheme, one file each: its burn parameters (initialised
//! by the scheme's own constructor in [`crate::encodings`]), its position-only objects for one
//! length (built by [`crate::encodings`] as data), and the [`ScoreTerms`] it hands to attention.
//!
//! This file is the dispatch: two enums with a variant per [`Scheme`] (the parameters of a
//! layer, [`LayerPositions`], and of the model, [`AbsolutePositions`]) and one `match` over
//! [`Scheme`] for the objects, none with a catch-all, so a new scheme fails to compile until
//! each names it. Adding a scheme: its math file in [`crate::encodings`], its file here, and
//! one arm in each of these. A layer reads its
//! scheme's objects from the [`PositionContext`] by type ([`PositionContext::objects`]): a
//! context built for another scheme is an error, never a missing term.
//!
//! In `model.safetensors` a parameter is named by its module path, the scheme's variant joined
//! to the field after it (`blocks.0.attn.positions.shaw_keys`, `positions.learned`); see
//! [`crate::lm::checkpoint::ParamPath`].

pub mod alibi;
pub mod cope;
pub mod dd_alibi;
pub mod deberta;
pub mod dpb;
pub mod fire;
pub mod kerple;
pub mod learned;
pub mod nope;
pub mod p_rope;
pub mod partial_rope;
pub mod random_rope;
pub mod rope;
pub mod rope_nope;
pub mod shaw;
pub mod sinusoidal;
pub mod t5;
pub mod tupe;
pub mod xl;
pub mod xpos;

use std::any::Any;
use std::sync::Arc;

use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::tensor::{Device, Tensor};

use super::context::PositionContext;
use crate::encodings::rope::{RandomEval, RopeScaling};
use crate::error::{invalid, Result};
use crate::lm::config::{ModelConfig, Scheme};
use crate::lm::ops::{Ops, ScoreTerms};
pub use rope::{ReRopeWindow, RopeInference, SelfExtendWindow};

/// The payload of a scheme without parameters of its own in a layer or in the model.
#[derive(Module, Debug)]
pub struct NoParams {}

/// What a layer's scheme needs besides its parameters and its objects.
pub struct LayerInput<'a> {
    /// The model's configuration.
    pub config: &'a ModelConfig,
    /// The position context of this forward pass.
    pub ctx: &'a PositionContext,
    /// The model-level absolute rows of this forward pass.
    pub rows: &'a AbsoluteRows,
    /// The attention's input `[B, L, d_model]` (after the block's LayerNorm).
    pub x: &'a Tensor<3>,
    /// Queries `[B, H, L, d_h]`.
    pub q: &'a Tensor<4>,
    /// Keys `[B, H, L, d_h]`.
    pub k: &'a Tensor<4>,
    /// The layer's $W_q$ (DeBERTa projects its relative embeddings with it).
    pub query: &'a Linear,
    /// The layer's $W_k$.
    pub key: &'a Linear,
    /// The operations in use.
    pub ops: Ops,
}

/// The trainable position parameters of one attention layer: a variant for every scheme,
/// holding exactly that scheme's parameters ([`NoParams`] when it has none in a layer).
// one per layer, never stored in bulk: the larger variants cost nothing
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum LayerPositions {
    /// NoPE.
    Nope(NoParams),
    /// Sinusoidal absolute (added to the input).
    Sinusoidal(NoParams),
    /// Learned absolute (added to the input).
    Learned(NoParams),
    /// Shaw et al.
    Shaw(shaw::ShawParams),
    /// Transformer-XL.
    Xl(xl::XlParams),
    /// T5.
    T5(t5::T5Params),
    /// DeBERTa.
    Deberta(deberta::DebertaParams),
    /// TUPE.
    Tupe(tupe::TupeParams),
    /// RoPE.
    Rope(NoParams),
    /// ALiBi.
    Alibi(NoParams),
    /// xPos.
    Xpos(NoParams),
    /// Kerple.
    Kerple(kerple::KerpleParams),
    /// FIRE.
    Fire(fire::FireParams),
    /// Dynamic position bias.
    Dpb(dpb::DpbParams),
    /// Partial RoPE.
    PartialRope(NoParams),
    /// p-RoPE.
    PRope(NoParams),
    /// RoPE/NoPE hybrid: the layer's index.
    RopeNope(rope_nope::RopeNopeLayer),
    /// Randomized RoPE.
    RandomRope(NoParams),
    /// Data-dependent ALiBi: the forgetting gate.
    DdAlibi(dd_alibi::DdAlibiParams),
    /// CoPE.
    Cope(cope::CopeParams),
}

impl LayerPositions {
    /// Initial values of layer `layer` (from 0) from the encodings' own constructors, seeded
    /// by `seed`.
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn init(c: &ModelConfig, layer: usize, seed: u64, device: &Device) -> Result<Self> {
        let none = NoParams {};
        Ok(match c.scheme {
            Scheme::Nope => Self::Nope(none),
            Scheme::Sinusoidal => Self::Sinusoidal(none),
            Scheme::Learned => Self::Learned(none),
            Scheme::Shaw => Self::Shaw(shaw::ShawParams::init(c, seed, device)?),
            Scheme::Xl => Self::Xl(xl::XlParams::init(c, seed, device)?),
            Scheme::T5 => Self::T5(t5::T5Params::init(c, seed, device)?),
            Scheme::Deberta => Self::Deberta(deberta::DebertaParams::init(c, seed, device)?),
            Scheme::Tupe => Self::Tupe(tupe::TupeParams::init(c, seed, device)?),
            Scheme::Rope => Self::Rope(none),
            Scheme::Alibi => Self::Alibi(none),
            Scheme::Xpos => Self::Xpos(none),
            Scheme::Kerple => Self::Kerple(kerple::KerpleParams::init(c, device)?),
            Scheme::Fire => Self::Fire(fire::FireParams::init(c, seed, device)?),
            Scheme::Dpb => Self::Dpb(dpb::DpbParams::init(c, seed, device)?),
            Scheme::PartialRope => Self::PartialRope(none),
            Scheme::PRope => Self::PRope(none),
            Scheme::RopeNope => Self::RopeNope(rope_nope::RopeNopeLayer { layer }),
            Scheme::RandomRope => Self::RandomRope(none),
            Scheme::DdAlibi => Self::DdAlibi(dd_alibi::DdAlibiParams::init(c, seed, device)?),
            Scheme::Cope => Self::Cope(cope::CopeParams::init(c, device)?),
        })
    }

    /// The scheme's terms for this layer: its parameters combined with its objects.
    ///
    /// # Errors
    /// When the context or the model-level rows were built for another scheme.
    pub fn terms(&self, input: &LayerInput) -> Result<ScoreTerms> {
        let ctx = input.ctx;
        Ok(match self {
            Self::Nope(_) | Self::Sinusoidal(_) | Self::Learned(_) => ScoreTerms::default(),
            Self::Shaw(p) => p.terms(ctx.objects()?, input),
            Self::Xl(p) => p.terms(ctx.objects()?, input),
            Self::T5(p) => p.terms(ctx.objects()?, input),
            Self::Deberta(p) => p.terms(ctx.objects()?, input),
            Self::Tupe(p) => p.terms(ctx.objects()?, input)?,
            Self::Rope(_) => rope::terms(ctx.objects()?),
            Self::Alibi(_) => alibi::terms(ctx.objects()?),
            Self::Xpos(_) => xpos::terms(ctx.objects()?),
            Self::Kerple(p) => p.terms(ctx.objects()?, input),
            Self::Fire(p) => p.terms(ctx.objects()?, input)?,
            Self::Dpb(p) => p.terms(ctx.objects()?, input),
            Self::PartialRope(_) => partial_rope::terms(ctx.objects()?),
            Self::PRope(_) => p_rope::terms(ctx.objects()?),
            Self::RopeNope(p) => p.terms(ctx.objects()?, input),
            Self::RandomRope(_) => random_rope::terms(ctx.objects()?),
            Self::DdAlibi(p) => p.terms(ctx.objects()?, input),
            Self::Cope(p) => p.terms(ctx.objects()?),
        })
    }

    /// The layer in the form of a checkpoint written before FIRE learned $c$ and $L$: FIRE's
    /// fixed at the configuration's values ([`fire::FireParams::fixed_transform`]); every
    /// other scheme as it is.
    pub fn with_fixed_fire_transform(self) -> Self {
        match self {
            Self::Fire(p) => Self::Fire(p.fixed_transform()),
            other => other,
        }
    }

    /// The learned bias per bucket and head $B$, `[num_buckets, H]`, of the schemes that
    /// have one (T5, TUPE).
    pub fn bucket_table(&self) -> Option<&Param<Tensor<2>>> {
        match self {
            Self::T5(p) => Some(&p.table),
            Self::Tupe(p) => Some(&p.table),
            Self::Nope(_)
            | Self::Sinusoidal(_)
            | Self::Learned(_)
            | Self::Shaw(_)
            | Self::Xl(_)
            | Self::Deberta(_)
            | Self::Rope(_)
            | Self::Alibi(_)
            | Self::Xpos(_)
            | Self::Kerple(_)
            | Self::Fire(_)
            | Self::Dpb(_)
            | Self::PartialRope(_)
            | Self::PRope(_)
            | Self::RopeNope(_)
            | Self::RandomRope(_)
            | Self::DdAlibi(_)
            | Self::Cope(_) => None,
        }
    }
}

/// The position-only objects of `c`'s scheme for `len` positions, on the device, typed by
/// the scheme (read back with [`PositionContext::objects`]). `rope_scaling` replaces plain
/// RoPE's frequencies at inference, `inference` adds ReRoPE's window and log-$n$ to them.
///
/// # Errors
/// When the encodings reject the configuration; `inference` on a scheme that is not RoPE.
pub(crate) fn objects(
    c: &ModelConfig,
    len: usize,
    rope_scaling: RopeScaling,
    inference: &RopeInference,
    device: &Device,
) -> Result<Arc<dyn Any + Send + Sync>> {
    if c.scheme != Scheme::Rope && !inference.is_plain() {
        return Err(invalid(
            "inference",
            format!("{inference:?}"),
            format!(
                "ReRoPE and log-n for RoPE models only (this one is {})",
                c.scheme
            ),
        ));
    }
    Ok(match c.scheme {
        Scheme::Nope => Arc::new(nope::Objects),
        Scheme::Sinusoidal => Arc::new(sinusoidal::Objects::new(c, len, device)?),
        Scheme::Learned => Arc::new(learned::Objects),
        Scheme::Shaw => Arc::new(shaw::Objects::new(c, len)),
        Scheme::Xl => Arc::new(xl::Objects::new(c, len, device)?),
        // TUPE's bucket bias is T5's, over the same buckets
        Scheme::T5 | Scheme::Tupe => Arc::new(t5::Objects::new(c, len, device)?),
        Scheme::Deberta => Arc::new(deberta::Objects::new(c, len)?),
        Scheme::Rope => Arc::new(rope::Objects::at_inference(
            c,
            len,
            rope_scaling,
            inference,
            device,
        )?),
        Scheme::Alibi => Arc::new(alibi::Objects::new(c, len, device)?),
        Scheme::Xpos => Arc::new(xpos::Objects::new(c, len, device)?),
        Scheme::Kerple => Arc::new(kerple::Objects::new(len, device)),
        Scheme::Fire => Arc::new(fire::Objects::new(len)),
        Scheme::Dpb => Arc::new(dpb::Objects::new(c, len, device)),
        Scheme::PartialRope => Arc::new(partial_rope::Objects::new(c, len, device)?),
        Scheme::PRope => Arc::new(p_rope::Objects::new(c, len, device)?),
        Scheme::RopeNope => Arc::new(rope_nope::Objects::new(c, len, device)?),
        Scheme::RandomRope => Arc::new(random_rope::Objects::new(c, len, device)?),
        Scheme::DdAlibi => Arc::new(dd_alibi::Objects::new(len)),
        Scheme::Cope => Arc::new(cope::Objects),
    })
}

/// The objects of training step `step` of a run seeded by `seed` with `batch` sequences of
/// `len` positions, for a scheme that draws its positions per step (randomized RoPE); `None`
/// for every other, whose training objects are [`objects`]'.
///
/// # Errors
/// When the encodings reject the configuration.
pub(crate) fn step_objects(
    c: &ModelConfig,
    (batch, len): (usize, usize),
    seed: u64,
    step: u64,
    device: &Device,
) -> Result<Option<Arc<dyn Any + Send + Sync>>> {
    Ok(match c.scheme {
        Scheme::RandomRope => Some(Arc::new(random_rope::Objects::training(
            c,
            (batch, len),
            seed,
            step,
            device,
        )?)),
        Scheme::Nope
        | Scheme::Sinusoidal
        | Scheme::Learned
        | Scheme::Shaw
        | Scheme::Xl
        | Scheme::T5
        | Scheme::Deberta
        | Scheme::Tupe
        | Scheme::Rope
        | Scheme::Alibi
        | Scheme::Xpos
        | Scheme::Kerple
        | Scheme::Fire
        | Scheme::Dpb
        | Scheme::PartialRope
        | Scheme::PRope
        | Scheme::RopeNope
        | Scheme::DdAlibi
        | Scheme::Cope => None,
    })
}

/// Whether the objects of `c`'s scheme for $L$ positions depend on $L$ itself beyond their
/// first $L$ rows (dynamic NTK's frequencies, randomized RoPE's sampled evaluation
/// positions), so that a length-$L$ prefix of a longer window is not a window of length $L$.
pub(crate) fn depend_on_length(c: &ModelConfig, rope_scaling: &RopeScaling) -> bool {
    match c.scheme {
        Scheme::Rope => rope_scaling.is_dynamic(),
        Scheme::RandomRope => c.random_positions_eval == RandomEval::Sampled,
        Scheme::Nope
        | Scheme::Sinusoidal
        | Scheme::Learned
        | Scheme::Shaw
        | Scheme::Xl
        | Scheme::T5
        | Scheme::Deberta
        | Scheme::Tupe
        | Scheme::Alibi
        | Scheme::Xpos
        | Scheme::Kerple
        | Scheme::Fire
        | Scheme::Dpb
        | Scheme::PartialRope
        | Scheme::PRope
        | Scheme::RopeNope
        | Scheme::DdAlibi
        | Scheme::Cope => false,
    }
}

/// Model-level position parameters: a variant for every scheme, holding the absolute table
/// shared by all layers where the scheme has one (learned absolute, TUPE).
#[derive(Module, Debug)]
pub enum AbsolutePositions {
    /// NoPE.
    Nope(NoParams),
    /// Sinusoidal: a fixed table, in the context.
    Sinusoidal(NoParams),
    /// The learned table added to the input, `[max_positions, d_model]`.
    Learned(Param<Tensor<2>>),
    /// Shaw et al.
    Shaw(NoParams),
    /// Transformer-XL.
    Xl(NoParams),
    /// T5.
    T5(NoParams),
    /// DeBERTa.
    Deberta(NoParams),
    /// TUPE's absolute embeddings $p$, `[max_positions, d_model]` (never added to the input).
    Tupe(Param<Tensor<2>>),
    /// RoPE.
    Rope(NoParams),
    /// ALiBi.
    Alibi(NoParams),
    /// xPos.
    Xpos(NoParams),
    /// Kerple.
    Kerple(NoParams),
    /// FIRE.
    Fire(NoParams),
    /// Dynamic position bias.
    Dpb(NoParams),
    /// Partial RoPE.
    PartialRope(NoParams),
    /// p-RoPE.
    PRope(NoParams),
    /// RoPE/NoPE hybrid.
    RopeNope(NoParams),
    /// Randomized RoPE.
    RandomRope(NoParams),
    /// Data-dependent ALiBi.
    DdAlibi(NoParams),
    /// CoPE.
    Cope(NoParams),
}

/// The model-level absolute rows of one forward pass, positions $0..L$, `[L, d_model]`.
#[derive(Debug, Clone)]
pub enum AbsoluteRows {
    /// None.
    None,
    /// Added to the input embeddings (sinusoidal, learned).
    AddedToInput(Tensor<2>),
    /// Kept apart from the content for the layers' untied term (TUPE).
    Untied(Tensor<2>),
}

impl AbsolutePositions {
    /// Initial values from the encodings' constructors, seeded by `seed`.
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let none = NoParams {};
        Ok(match c.scheme {
            Scheme::Nope => Self::Nope(none),
            Scheme::Sinusoidal => Self::Sinusoidal(none),
            Scheme::Learned => Self::Learned(learned::table(c, seed, device)?),
            Scheme::Shaw => Self::Shaw(none),
            Scheme::Xl => Self::Xl(none),
            Scheme::T5 => Self::T5(none),
            Scheme::Deberta => Self::Deberta(none),
            Scheme::Tupe => Self::Tupe(tupe::table(c, seed, device)?),
            Scheme::Rope => Self::Rope(none),
            Scheme::Alibi => Self::Alibi(none),
            Scheme::Xpos => Self::Xpos(none),
            Scheme::Kerple => Self::Kerple(none),
            Scheme::Fire => Self::Fire(none),
            Scheme::Dpb => Self::Dpb(none),
            Scheme::PartialRope => Self::PartialRope(none),
            Scheme::PRope => Self::PRope(none),
            Scheme::RopeNope => Self::RopeNope(none),
            Scheme::RandomRope => Self::RandomRope(none),
            Scheme::DdAlibi => Self::DdAlibi(none),
            Scheme::Cope => Self::Cope(none),
        })
    }

    /// The rows for positions $0..L$ of `ctx` (clamped to a table's last row).
    ///
    /// # Errors
    /// When the context was built for another scheme.
    pub fn rows(&self, ctx: &PositionContext) -> Result<AbsoluteRows> {
        Ok(match self {
            Self::Learned(table) => {
                AbsoluteRows::AddedToInput(table.val().select(0, ctx.clamped_positions.clone()))
            }
            Self::Sinusoidal(_) => {
                let objects: &sinusoidal::Objects = ctx.objects()?;
                AbsoluteRows::AddedToInput(objects.table.clone())
            }
            Self::Tupe(p) => AbsoluteRows::Untied(p.val().select(0, ctx.clamped_positions.clone())),
            Self::Nope(_)
            | Self::Shaw(_)
            | Self::Xl(_)
            | Self::T5(_)
            | Self::Deberta(_)
            | Self::Rope(_)
            | Self::Alibi(_)
            | Self::Xpos(_)
            | Self::Kerple(_)
            | Self::Fire(_)
            | Self::Dpb(_)
            | Self::PartialRope(_)
            | Self::PRope(_)
            | Self::RopeNope(_)
            | Self::RandomRope(_)
            | Self::DdAlibi(_)
            | Self::Cope(_) => AbsoluteRows::None,
        })
    }
}

/// `[n, d_model] -> [H, n, d_head]`.
pub(crate) fn split_heads(t: Tensor<2>, heads: usize) -> Tensor<3> {
    let [n, d] = t.dims();
    t.reshape([n, heads, d / heads]).swap_dims(0, 1)
}
