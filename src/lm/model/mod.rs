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
//! the model ([`LayerPositions`], [`Lm::positions`]) and are applied by [`attention::attend`],
//! which `tests/train_equivalence.rs` checks against the reference [`crate::attention::attention`].

pub mod attention;
pub mod context;
pub mod init;
pub mod positions;

use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear};
use burn::tensor::{Device, Int, Tensor, TensorData};
use ndarray_rand::rand::rngs::StdRng;
use ndarray_rand::rand::SeedableRng;

pub use crate::lm::config::{ModelConfig, Scheme};
pub use crate::lm::kernels::Kernels;
pub use attention::{attend, attend_fused, AttentionParts, PositionTerms};
pub use context::{PositionContext, PositionObjects};
pub use positions::{AbsolutePositions, LayerPositions};

use crate::error::Result;
use crate::lm::kernels::{gelu_with, layer_norm_with, linear_with, nll_with, product_with};
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
    /// The scheme's trainable position parameters in this layer, if it has any.
    pub positions: Option<LayerPositions>,
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
    /// The absolute table shared by all layers (learned absolute, TUPE), if the scheme has one.
    pub positions: Option<AbsolutePositions>,
    /// The blocks.
    pub blocks: Vec<Block>,
    /// Final LayerNorm.
    pub ln_final: LayerNorm,
}

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
        let embedding = param2(&normal((c.vocab, d), 1.0 / (d as f32).sqrt(), seed), device);
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
                        positions: LayerPositions::init(c, layer_seed, device)?,
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

    /// Logits `[B, L, 256]` for bytes `[B, L]`.
    pub fn forward(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        tokens: Tensor<2, Int>,
    ) -> Tensor<3> {
        self.forward_traced(c, ctx, tokens, false).0
    }

    /// Logits `[B, L, 256]` and, when `keep_probs`, the attention weights $\alpha_{ij}$ of every
    /// layer, `[B, H, L, L]` each (empty otherwise).
    pub fn forward_traced(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        tokens: Tensor<2, Int>,
        keep_probs: bool,
    ) -> (Tensor<3>, Vec<Tensor<4>>) {
        let [b, l] = tokens.dims();
        let d = c.d_model;
        // sqrt(d) E[byte], [B, L, d]
        let e = self.embedding.val();
        let mut x = e
            .clone()
            .select(0, tokens.reshape([b * l]))
            .reshape([b, l, d])
            .mul_scalar((d as f32).sqrt());
        // + p_i for absolute schemes, [1, L, d]
        if let Some(table) = self.absolute_table(ctx) {
            x = add_positions(x, table);
        }
        let tupe_p = match &self.positions {
            // p for positions 0..L (clamped to the table), [L, d]
            Some(AbsolutePositions::Tupe(p)) => {
                Some(p.val().select(0, ctx.clamped_positions.clone()))
            }
            _ => None,
        };
        let mut probs = Vec::new();
        let kernels = ctx.kernels;
        for block in &self.blocks {
            let h = layer_norm_with(&block.ln_attn, x.clone(), LAYER_NORM_EPS, kernels);
            let attended = if keep_probs {
                let (attended, alpha) = block.attn.forward_parts(c, ctx, h, tupe_p.clone());
                probs.push(alpha);
                attended
            } else {
                block.attn.forward(c, ctx, h, tupe_p.clone())
            };
            x = x + attended;
            let h = layer_norm_with(&block.ln_ffn, x.clone(), LAYER_NORM_EPS, kernels);
            let up = gelu_with(linear_with(&block.ffn_up, h, kernels), kernels);
            x = x + linear_with(&block.ffn_down, up, kernels);
        }
        let h = layer_norm_with(&self.ln_final, x, LAYER_NORM_EPS, kernels);
        // logits = h E^T, [B, L, 256]
        (product_with(h, e.transpose(), kernels), probs)
    }

    /// The absolute table added to the input for positions `0..L`, `[L, d_model]`, if any.
    fn absolute_table(&self, ctx: &PositionContext) -> Option<Tensor<2>> {
        match (&self.positions, &ctx.objects) {
            (Some(AbsolutePositions::Learned(table)), _) => {
                Some(table.val().select(0, ctx.clamped_positions.clone()))
            }
            (_, PositionObjects::Sinusoidal(table)) => Some(table.clone()),
            _ => None,
        }
    }

    /// Per-position negative log-likelihood in nats, `[B, L]`, of `targets` given `tokens`.
    pub fn nll(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
    ) -> Tensor<2> {
        // -log p(target) = log sum_j e^{x_j} - x_target, [B, L]
        nll_with(self.forward(c, ctx, tokens), targets, ctx.kernels)
    }

    /// Mean cross-entropy in nats per byte (a scalar tensor, for training).
    pub fn loss(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        tokens: Tensor<2, Int>,
        targets: Tensor<2, Int>,
    ) -> Tensor<1> {
        self.nll(c, ctx, tokens, targets).mean()
    }
}

/// $\epsilon$ of every LayerNorm (burn's default, `LayerNormConfig::new(d)`).
pub const LAYER_NORM_EPS: f32 = 1e-5;

/// $x + p$ with the table broadcast over the batch: `[B, L, d] + [L, d]`.
pub fn add_positions(x: Tensor<3>, table: Tensor<2>) -> Tensor<3> {
    x + table.unsqueeze::<3>()
}

impl SelfAttention {
    /// `[B, L, d_model] -> [B, L, d_model]`.
    pub fn forward(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        x: Tensor<3>,
        tupe_p: Option<Tensor<2>>,
    ) -> Tensor<3> {
        if ctx.kernels == Kernels::Reference {
            return self.forward_parts(c, ctx, x, tupe_p).0;
        }
        let [b, l, d] = x.dims();
        let (q, k, v) = self.project(c, x, ctx.kernels);
        let terms = self.position_terms(c, ctx, tupe_p);
        let scale = c.score_scale();
        let o = attend_fused(q, k, v, &terms, ctx, scale);
        // [B, H, L, dh] -> [B, L, d]
        linear_with(&self.out, o.swap_dims(1, 2).reshape([b, l, d]), ctx.kernels)
    }

    /// Queries, keys and values `[B, H, L, d_head]` of `x [B, L, d_model]`.
    fn project(
        &self,
        c: &ModelConfig,
        x: Tensor<3>,
        kernels: Kernels,
    ) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let [b, l, _] = x.dims();
        let (h, dh) = (c.heads, c.head_dim());
        // [B, L, d] -> [B, H, L, dh]
        let split = |t: Tensor<3>| t.reshape([b, l, h, dh]).swap_dims(1, 2);
        (
            split(linear_with(&self.query, x.clone(), kernels)),
            split(linear_with(&self.key, x.clone(), kernels)),
            split(linear_with(&self.value, x, kernels)),
        )
    }

    /// The output `[B, L, d_model]` and the attention weights `[B, H, L, L]`.
    pub fn forward_parts(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        x: Tensor<3>,
        tupe_p: Option<Tensor<2>>,
    ) -> (Tensor<3>, Tensor<4>) {
        let [b, l, d] = x.dims();
        let (q, k, v) = self.project(c, x, ctx.kernels);
        let terms = self.position_terms(c, ctx, tupe_p);
        let parts = attend(q, k, v, &terms, ctx, c.score_scale());
        // [B, H, L, dh] -> [B, L, d]
        let o = parts.output.swap_dims(1, 2).reshape([b, l, d]);
        (self.out.forward(o), parts.probs)
    }

    /// The scheme's position terms for this layer: parameters combined with the context
    /// ([`positions::position_terms`]).
    pub fn position_terms(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        tupe_p: Option<Tensor<2>>,
    ) -> PositionTerms {
        positions::position_terms(
            self.positions.as_ref(),
            c,
            ctx,
            &self.query,
            &self.key,
            tupe_p,
        )
    }
}

/// Reads a tensor back as `f32` values.
pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap_or_default()
}

/// Bytes `[B, L]` as an integer tensor.
pub fn int_tensor(values: Vec<i64>, shape: [usize; 2], device: &Device) -> Tensor<2, Int> {
    Tensor::from_data(TensorData::new(values, shape), device)
}
