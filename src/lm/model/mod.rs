//! A tiny decoder-only byte language model on [burn], with every position scheme of the crate.
//!
//! ```text
//! bytes [B, L] -> sqrt(d) E[byte] (+ absolute positions) -> N x block -> LayerNorm -> E^T -> logits [B, L, 256]
//! block: x + Attention(LayerNorm(x)), then x + FFN(LayerNorm(x))        (pre-LayerNorm)
//! ```
//!
//! The input and output embeddings are tied ($E$, `[256, d]`). Position-only objects (tables,
//! buckets, index matrices, frequencies, slopes, distance features) are built by
//! [`crate::encodings`] as data ([`PositionContext`]); trainable position parameters live in
//! the model ([`LayerPositions`], [`Lm::positions`]); each scheme's trained form
//! ([`schemes`]) combines the two into the [`ScoreTerms`] that [`Ops::attention`] applies, which
//! `tests/train/equivalence.rs` checks against the reference [`crate::attention::attention`].

pub mod context;
pub(crate) mod init;
pub mod schemes;

use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear};
use burn::tensor::{Device, Int, Tensor, TensorData};
use ndarray_rand::rand::rngs::StdRng;
use ndarray_rand::rand::SeedableRng;

pub use crate::lm::config::{ModelConfig, Scheme};
pub use crate::lm::ops::{to_vec, Kernels, Ops};
pub use context::PositionContext;
pub use schemes::{
    AbsolutePositions, AbsoluteRows, LayerInput, LayerPositions, ReRopeWindow, RopeInference,
    SelfExtendWindow,
};

use crate::error::Result;
use crate::lm::ops::{reference, AttentionParts, ScoreTerms};
use init::{linear, normal, param2};

/// Multi-head causal self-attention with the model's position scheme.
#[derive(Module, Debug)]
pub struct SelfAttention {
    /// $W_q$, `[d_model, d_model]` (+ bias).
    pub query: Linear,
    /// $W_k$.
    pub key: Linear,
    /// $W_v$.
    pub value: Linear,
    /// $W_o$.
    pub out: Linear,
    /// The scheme's trainable position parameters in this layer.
    pub positions: LayerPositions,
}

/// One pre-LayerNorm Transformer block.
#[derive(Module, Debug)]
pub struct Block {
    /// LayerNorm before attention.
    pub ln_attn: LayerNorm,
    /// Attention.
    pub attn: SelfAttention,
    /// LayerNorm before the feed-forward network.
    pub ln_ffn: LayerNorm,
    /// FFN up-projection `[d_model, d_ff]`.
    pub ffn_up: Linear,
    /// FFN down-projection `[d_ff, d_model]`.
    pub ffn_down: Linear,
}

/// The language model.
#[derive(Module, Debug)]
pub struct Lm {
    /// Byte embeddings $E$, `[256, d_model]`, tied with the output layer.
    pub embedding: Param<Tensor<2>>,
    /// The scheme's model-level parameters: the absolute table shared by all layers
    /// (learned absolute, TUPE), if it has one.
    pub positions: AbsolutePositions,
    /// The blocks.
    pub blocks: Vec<Block>,
    /// Final LayerNorm.
    pub ln_final: LayerNorm,
}

/// $\epsilon$ of every LayerNorm (burn's default, `LayerNormConfig::new(d)`).
pub const LAYER_NORM_EPS: f32 = 1e-5;

impl Lm {
    /// A freshly initialised model: every weight drawn from a `StdRng` seeded by `seed` (so
    /// two schemes with the same seed share their content weights), position parameters
    /// from the encodings' constructors.
    ///
    /// # Errors
    /// When the configuration is invalid.
    pub fn new(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        c.validate()?;
        let d = c.d_model;
        let mut rng = StdRng::seed_from_u64(seed);
        // E ~ N(0, 1/d): sqrt(d) E[byte] has unit-variance entries
        let embedding = param2(
            &normal((c.vocab, d), 1.0 / (d as f32).sqrt(), seed)?,
            device,
        );
        let blocks = (0..c.layers)
            .map(|l| {
                let layer_seed = seed.wrapping_add(1000 * (l as u64 + 1));
                Ok(Block {
                    ln_attn: LayerNormConfig::new(d).init(device),
                    attn: SelfAttention {
                        query: linear(d, d, &mut rng, device),
                        key: linear(d, d, &mut rng, device),
                        value: linear(d, d, &mut rng, device),
                        out: linear(d, d, &mut rng, device),
                        positions: LayerPositions::init(c, l, layer_seed, device)?,
                    },
                    ln_ffn: LayerNormConfig::new(d).init(device),
                    ffn_up: linear(d, c.d_ff, &mut rng, device),
                    ffn_down: linear(c.d_ff, d, &mut rng, device),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let positions = AbsolutePositions::init(c, seed, device)?;
        Ok(Self {
            embedding,
            positions,
            blocks,
            ln_final: LayerNormConfig::new(d).init(device),
        })
    }

    /// The model in the form of a checkpoint written before FIRE learned $c$ and $L$
    /// ([`LayerPositions::with_fixed_fire_transform`]).
    pub fn with_fixed_fire_transform(self) -> Self {
        let blocks = self
            .blocks
            .into_iter()
            .map(|mut b| {
                b.attn.positions = b.attn.positions.with_fixed_fire_transform();
                b
            })
            .collect();
        Self { blocks, ..self }
    }

    /// Logits `[B, L, 256]` for bytes `[B, L]`.
    ///
    /// # Errors
    /// When `ctx` was built for another scheme.
    pub fn forward(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        ops: Ops,
        tokens: Tensor<2, Int>,
    ) -> Result<Tensor<3>> {
        Ok(self.forward_traced(c, ctx, ops, tokens, false)?.0)
    }

    /// Logits `[B, L, 256]` and, when `keep_probs`, the attention weights $\alpha_{ij}$ of every
    /// layer, `[B, H, L, L]` each (empty otherwise), from the composed reference attention.
    ///
    /// # Errors
    /// When `ctx` was built for another scheme.
    pub fn forward_traced(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        ops: Ops,
        tokens: Tensor<2, Int>,
        keep_probs: bool,
    ) -> Result<(Tensor<3>, Vec<Tensor<4>>)> {
        let [b, l] = tokens.dims();
        let d = c.d_model;
        // sqrt(d) E[byte], [B, L, d]
        let e = self.embedding.val();
        let mut x = e
            .clone()
            .select(0, tokens.reshape([b * l]))
            .reshape([b, l, d])
            .mul_scalar((d as f32).sqrt());
        let rows = self.positions.rows(ctx)?;
        // + p_i for absolute schemes, [1, L, d]
        if let AbsoluteRows::AddedToInput(table) = &rows {
            x = x + table.clone().unsqueeze::<3>();
        }
        let mut probs = Vec::new();
        for block in &self.blocks {
            let h = ops.layer_norm(&block.ln_attn, x.clone(), LAYER_NORM_EPS);
            let attended = if keep_probs {
                let (attended, alpha) = block.attn.forward_parts(c, ctx, &rows, ops, h)?;
                probs.push(alpha);
                attended
            } else {
                block.attn.forward(c, ctx, &rows, ops, h)?
            };
            x = x + attended;
            let h = ops.layer_norm(&block.ln_ffn, x.clone(), LAYER_NORM_EPS);
            let up = ops.gelu(ops.linear(&block.ffn_up, h));
            x = x + ops.linear(&block.ffn_down, up);
        }
        let h = ops.layer_norm(&self.ln_final, x, LAYER_NORM_EPS);
        // logits = h E^T, [B, L, 256]
        Ok((ops.product(h, e.transpose()), probs))
    }

    /// Per-position negative log-likelihood in nats, `[B, L]`, of `targets` given `tokens`.
    ///
    /// # Errors
    /// When `ctx` was built for another scheme.
    pub fn nll(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        ops: Ops,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
    ) -> Result<Tensor<2>> {
        // -log p(target) = log sum_j e^{x_j} - x_target, [B, L]
        Ok(ops.nll(self.forward(c, ctx, ops, tokens)?, targets))
    }

    /// Mean cross-entropy in nats per byte (a scalar tensor, for training).
    ///
    /// # Errors
    /// When `ctx` was built for another scheme.
    pub fn loss(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        ops: Ops,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
    ) -> Result<Tensor<1>> {
        Ok(self.nll(c, ctx, ops, tokens, targets)?.mean())
    }
}

impl SelfAttention {
    /// `[B, L, d_model] -> [B, L, d_model]`.
    ///
    /// # Errors
    /// When `ctx` or `rows` were built for another scheme.
    pub fn forward(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        rows: &AbsoluteRows,
        ops: Ops,
        x: Tensor<3>,
    ) -> Result<Tensor<3>> {
        let [b, l, d] = x.dims();
        let (q, k, v, terms) = self.inputs(c, ctx, rows, ops, x)?;
        let o = ops.attention(q, k, v, terms, c.score_scale());
        // [B, H, L, dh] -> [B, L, d]
        Ok(ops.linear(&self.out, o.swap_dims(1, 2).reshape([b, l, d])))
    }

    /// The output `[B, L, d_model]` and the attention weights `[B, H, L, L]`, from the composed
    /// reference attention ([`reference::attention_parts`]).
    ///
    /// # Errors
    /// When `ctx` or `rows` were built for another scheme.
    pub fn forward_parts(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        rows: &AbsoluteRows,
        ops: Ops,
        x: Tensor<3>,
    ) -> Result<(Tensor<3>, Tensor<4>)> {
        let [b, l, d] = x.dims();
        let (q, k, v, terms) = self.inputs(c, ctx, rows, ops, x)?;
        let parts: AttentionParts = reference::attention_parts(q, k, v, terms, c.score_scale());
        // [B, H, L, dh] -> [B, L, d]
        let o = parts.output.swap_dims(1, 2).reshape([b, l, d]);
        Ok((reference::linear(&self.out, o), parts.probs))
    }

    /// Queries, keys and values `[B, H, L, d_head]` of `x [B, L, d_model]` and the scheme's
    /// terms for them: everything attention takes.
    fn inputs(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        rows: &AbsoluteRows,
        ops: Ops,
        x: Tensor<3>,
    ) -> Result<(Tensor<4>, Tensor<4>, Tensor<4>, ScoreTerms)> {
        let (q, k, v) = self.project(c, x.clone(), ops);
        let terms = self.terms(c, ctx, rows, ops, (&x, &q, &k))?;
        Ok((q, k, v, terms))
    }

    /// Queries, keys and values `[B, H, L, d_head]` of `x [B, L, d_model]`.
    pub fn project(
        &self,
        c: &ModelConfig,
        x: Tensor<3>,
        ops: Ops,
    ) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let [b, l, _] = x.dims();
        let (h, dh) = (c.heads, c.head_dim());
        // [B, L, d] -> [B, H, L, dh]
        let split = |t: Tensor<3>| t.reshape([b, l, h, dh]).swap_dims(1, 2);
        (
            split(ops.linear(&self.query, x.clone())),
            split(ops.linear(&self.key, x.clone())),
            split(ops.linear(&self.value, x)),
        )
    }

    /// The scheme's terms for this layer ([`LayerPositions::terms`]) for the attention's input
    /// `x [B, L, d_model]` and its queries and keys `[B, H, L, d_head]`.
    ///
    /// # Errors
    /// When `ctx` or `rows` were built for another scheme.
    pub fn terms(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        rows: &AbsoluteRows,
        ops: Ops,
        (x, q, k): (&Tensor<3>, &Tensor<4>, &Tensor<4>),
    ) -> Result<ScoreTerms> {
        self.positions.terms(&LayerInput {
            config: c,
            ctx,
            rows,
            x,
            q,
            k,
            query: &self.query,
            key: &self.key,
            ops,
        })
    }
}

/// Bytes `[B, L]` as an integer tensor.
pub fn int_tensor(values: Vec<i64>, shape: [usize; 2], device: &Device) -> Tensor<2, Int> {
    Tensor::from_data(TensorData::new(values, shape), device)
}
