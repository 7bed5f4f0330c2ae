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
pub mod checkpoint;
pub mod config;
pub mod context;
pub mod init;
pub mod kernels;

use burn::module::{Module, Param};
use burn::nn::{LayerNorm, LayerNormConfig, Linear};
use burn::tensor::{Device, Int, Tensor, TensorData};
use ndarray::Array2;
use ndarray_rand::rand::rngs::StdRng;
use ndarray_rand::rand::SeedableRng;

pub use attention::{attend, attend_fused, AttentionParts, PositionTerms};
pub use config::{ModelConfig, Scheme};
pub use context::PositionContext;
pub use kernels::Kernels;

use crate::encodings::alibi::alibi_slopes;
use crate::encodings::fire::Fire;
use crate::encodings::kerple::{Kerple, KerpleKind};
use crate::encodings::learned::LearnedAbsolute;
use crate::encodings::shaw::ShawRelative;
use crate::encodings::t5::T5Bias;
use crate::encodings::tupe::Tupe;
use crate::encodings::xl::{TransformerXl, XlDirection};
use crate::error::Result;
use init::{linear, normal, param1, param2};
use kernels::{gelu_with, layer_norm_with, linear_with, nll_with, product_with};

/// Trainable position parameters of one attention layer; only the fields of the model's
/// scheme are `Some`.
#[derive(Module, Debug)]
pub struct LayerPositions {
    /// Shaw $w^K$, `[2k+1, d_head]` (shared by the heads).
    pub shaw_keys: Option<Param<Tensor<2>>>,
    /// Shaw $w^V$, `[2k+1, d_head]`.
    pub shaw_values: Option<Param<Tensor<2>>>,
    /// Transformer-XL $W_R$ of every head side by side, `[r_dim, d_model]`.
    pub xl_w_r: Option<Param<Tensor<2>>>,
    /// Transformer-XL $u$, `[heads, d_head]`.
    pub xl_u: Option<Param<Tensor<2>>>,
    /// Transformer-XL $v$, `[heads, d_head]`.
    pub xl_v: Option<Param<Tensor<2>>>,
    /// T5 bucket table $B$ (T5, and TUPE's relative bias), `[num_buckets, heads]`.
    pub t5_table: Option<Param<Tensor<2>>>,
    /// DeBERTa relative embeddings $E^r$, `[2s, d_model]`, projected by the layer's $W_q, W_k$.
    pub deberta_rel: Option<Param<Tensor<2>>>,
    /// TUPE $U^Q$ of every head side by side, `[d_model, d_model]`.
    pub tupe_u_q: Option<Param<Tensor<2>>>,
    /// TUPE $U^K$, `[d_model, d_model]`.
    pub tupe_u_k: Option<Param<Tensor<2>>>,
    /// Kerple $r_1$ per head, `[heads]`.
    pub kerple_r1: Option<Param<Tensor<1>>>,
    /// Kerple $r_2$ per head, `[heads]`.
    pub kerple_r2: Option<Param<Tensor<1>>>,
    /// FIRE $w_1$, `[hidden]`.
    pub fire_w1: Option<Param<Tensor<1>>>,
    /// FIRE $b_1$, `[hidden]`.
    pub fire_b1: Option<Param<Tensor<1>>>,
    /// FIRE $W_2$, `[hidden, heads]`.
    pub fire_w2: Option<Param<Tensor<2>>>,
    /// FIRE $b_2$, `[heads]`.
    pub fire_b2: Option<Param<Tensor<1>>>,
}

impl LayerPositions {
    fn empty() -> Self {
        Self {
            shaw_keys: None,
            shaw_values: None,
            xl_w_r: None,
            xl_u: None,
            xl_v: None,
            t5_table: None,
            deberta_rel: None,
            tupe_u_q: None,
            tupe_u_k: None,
            kerple_r1: None,
            kerple_r2: None,
            fire_w1: None,
            fire_b1: None,
            fire_w2: None,
            fire_b2: None,
        }
    }

    /// Initial values from the encodings' own constructors, seeded by `seed`.
    fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let (h, dh, d) = (c.heads, c.head_dim(), c.d_model);
        let mut p = Self::empty();
        match c.scheme {
            Scheme::Shaw => {
                let shaw = ShawRelative::new(c.shaw_max_relative, dh, 0.1, seed)?;
                p.shaw_keys = Some(param2(&shaw.keys, device));
                p.shaw_values = Some(param2(&shaw.values, device));
            }
            Scheme::Xl => {
                // one TransformerXl per head: W_R [r_dim, d_head], u, v [d_head]
                let heads = (0..h)
                    .map(|i| TransformerXl::new(d, dh, XlDirection::Causal, seed + i as u64))
                    .collect::<Result<Vec<_>>>()?;
                let w_r = Array2::from_shape_fn((d, d), |(r, c)| heads[c / dh].w_r[[r, c % dh]]);
                let u = Array2::from_shape_fn((h, dh), |(i, c)| heads[i].u[c]);
                let v = Array2::from_shape_fn((h, dh), |(i, c)| heads[i].v[c]);
                p.xl_w_r = Some(param2(&w_r, device));
                p.xl_u = Some(param2(&u, device));
                p.xl_v = Some(param2(&v, device));
            }
            Scheme::T5 | Scheme::Tupe => {
                let t5 = T5Bias::new(c.t5_num_buckets, c.t5_max_distance, false, h, seed)?;
                // N(0, 1) from the constructor, scaled to N(0, 0.1^2): a mild start
                p.t5_table = Some(param2(&(t5.table * 0.1), device));
                if c.scheme == Scheme::Tupe {
                    // U ~ N(0, 1/d_model) per head column block, from Tupe::new
                    let tupe = Tupe::new(1, d, d, seed + 1, None)?;
                    p.tupe_u_q = Some(param2(&tupe.u_q, device));
                    p.tupe_u_k = Some(param2(&tupe.u_k, device));
                }
            }
            Scheme::Deberta => {
                let rel = normal((2 * c.deberta_bucket_size, d), 1.0, seed);
                p.deberta_rel = Some(param2(&rel, device));
            }
            Scheme::Kerple => {
                // r1 = 1, r2 = the ALiBi slopes: starts close to ALiBi (-r1 r2 d for small r2 d)
                let r2 = alibi_slopes(h)?;
                let kerple = Kerple::new(KerpleKind::Log, vec![1.0; h], r2)?;
                p.kerple_r1 = Some(param1(&kerple.r1, device));
                p.kerple_r2 = Some(param1(&kerple.r2, device));
            }
            Scheme::Fire => {
                let fire = Fire::new(h, c.fire_hidden, c.fire_c, c.fire_threshold, seed)?;
                p.fire_w1 = Some(param1(&fire.w1.to_vec(), device));
                p.fire_b1 = Some(param1(&fire.b1.to_vec(), device));
                p.fire_w2 = Some(param2(&fire.w2, device));
                p.fire_b2 = Some(param1(&fire.b2.to_vec(), device));
            }
            _ => {}
        }
        Ok(p)
    }
}

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
    /// The scheme's trainable position parameters.
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

/// Model-level position parameters (tables shared by all layers).
#[derive(Module, Debug)]
pub struct ModelPositions {
    /// Learned absolute table added to the input, `[max_positions, d_model]`.
    pub learned: Option<Param<Tensor<2>>>,
    /// TUPE's absolute embeddings $p$, `[max_positions, d_model]` (never added to the input).
    pub tupe: Option<Param<Tensor<2>>>,
}

/// The language model.
#[derive(Module, Debug)]
pub struct Lm {
    /// Byte embeddings $E$, `[256, d_model]`, tied with the output layer.
    pub embedding: Param<Tensor<2>>,
    /// Absolute position tables.
    pub positions: ModelPositions,
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
        let mut positions = ModelPositions {
            learned: None,
            tupe: None,
        };
        match c.scheme {
            Scheme::Learned => {
                let table = LearnedAbsolute::new(c.max_positions, d, seed + 7, 0.02)?;
                positions.learned = Some(param2(&table.table, device));
            }
            Scheme::Tupe => {
                let tupe = Tupe::new(c.max_positions, d, d, seed + 7, None)?;
                positions.tupe = Some(param2(&tupe.positions, device));
            }
            _ => {}
        }
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
        let tupe_p = self.positions.tupe.as_ref().map(|p| {
            // p for positions 0..L (clamped to the table), [L, d]
            p.val().select(0, ctx.clamped_positions.clone())
        });
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
        match &self.positions.learned {
            Some(table) => Some(table.val().select(0, ctx.clamped_positions.clone())),
            None => ctx.sinusoidal.clone(),
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

    /// The scheme's position terms for this layer: parameters combined with the context.
    pub fn position_terms(
        &self,
        c: &ModelConfig,
        ctx: &PositionContext,
        tupe_p: Option<Tensor<2>>,
    ) -> PositionTerms {
        let p = &self.positions;
        let (h, dh) = (c.heads, c.head_dim());
        // [n, d_model] -> [H, n, dh]
        let heads = |t: Tensor<2>| {
            let [n, _] = t.dims();
            t.reshape([n, h, dh]).swap_dims(0, 1)
        };
        let mut terms = PositionTerms::default();
        if let (Some(keys), Some(values)) = (&p.shaw_keys, &p.shaw_values) {
            terms.shaw = Some((keys.val(), values.val()));
        }
        if let (Some(w_r), Some(u), Some(v), Some(r)) = (&p.xl_w_r, &p.xl_u, &p.xl_v, &ctx.xl_r) {
            // r_delta = R_delta W_R for distances L-1..0, [H, L, dh]
            terms.xl = Some((heads(r.clone().matmul(w_r.val())), u.val(), v.val()));
        }
        if let Some(rel) = &p.deberta_rel {
            // K^r = E^r W_k, Q^r = E^r W_q, [H, 2s, dh]
            let pos_key = heads(self.key.forward(rel.val()));
            let pos_query = heads(self.query.forward(rel.val()));
            terms.deberta = Some((pos_key, pos_query));
        }
        if let (Some(u_q), Some(u_k), Some(pos)) = (&p.tupe_u_q, &p.tupe_u_k, tupe_p) {
            // p U^Q, p U^K, [H, L, dh]
            terms.tupe = Some((
                heads(pos.clone().matmul(u_q.val())),
                heads(pos.matmul(u_k.val())),
            ));
        }
        terms.bias = self.score_bias(c, ctx);
        terms
    }

    /// The content-free bias $b_{ij}$ of every head, `[H, L, L]`.
    fn score_bias(&self, c: &ModelConfig, ctx: &PositionContext) -> Option<Tensor<3>> {
        let p = &self.positions;
        let l = ctx.len;
        let h = c.heads;
        if let (Some(table), Some(buckets)) = (&p.t5_table, &ctx.t5_buckets) {
            // B[bucket(j - i), h], [L*L, H] -> [H, L, L]
            return Some(
                table
                    .val()
                    .select(0, buckets.clone())
                    .reshape([l, l, h])
                    .permute([2, 0, 1]),
            );
        }
        if let Some(alibi) = &ctx.alibi {
            return Some(alibi.clone());
        }
        if let (Some(r1), Some(r2), Some(dist)) = (&p.kerple_r1, &p.kerple_r2, &ctx.distance) {
            // -r1 ln(1 + r2 |i - j|), r1, r2 kept > 0, [H, L, L]
            let r1 = r1.val().clamp_min(1e-3).reshape([h, 1, 1]);
            let r2 = r2.val().clamp_min(1e-3).reshape([h, 1, 1]);
            return Some((dist.clone().unsqueeze::<3>() * r2).log1p().mul(r1).neg());
        }
        if let (Some(w1), Some(b1), Some(w2), Some(b2), Some(feat)) = (
            &p.fire_w1,
            &p.fire_b1,
            &p.fire_w2,
            &p.fire_b2,
            &ctx.fire_features,
        ) {
            let hidden = w1.dims()[0];
            // ReLU(x w1 + b1) W2 + b2 for each feature x, [L*L, H] -> [H, L, L]
            let x = feat.clone().reshape([l * l, 1]);
            let hid = burn::tensor::activation::relu(
                x.matmul(w1.val().reshape([1, hidden])) + b1.val().unsqueeze::<2>(),
            );
            let out = hid.matmul(w2.val()) + b2.val().unsqueeze::<2>();
            return Some(out.reshape([l, l, h]).permute([2, 0, 1]));
        }
        None
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
