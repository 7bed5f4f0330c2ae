//! The trainable application of every scheme to attention, on burn tensors: the same formula
//! as the reference [`crate::attention::attention`],
//!
//! ```math
//! s_{ij} = c \ \big(q'_i \cdot k'_j + t_{ij}\big) + b_{ij}, \qquad
//! o_i = \sum_j \alpha_{ij} v_j + \sum_j \alpha_{ij} a^V_{ij},
//! ```
//!
//! for all heads and a batch at once (`[B, H, L, d_h]`), with $L_q = L_k = L$.

use burn::tensor::activation::softmax;
use burn::tensor::{IndexingUpdateOp, Int, Tensor};

use super::context::{PositionContext, PositionObjects};
use crate::lm::kernels::{
    attention as fused_attention, attention_relative_values, relative_gather_with, rope_with,
    rotate_pairs_with, AttentionBias, Kernels,
};

/// A scheme's position terms for one layer, already combined with the layer's parameters
/// ([`super::positions::position_terms`]). RoPE and xPos rotate $q, k$ with the context's
/// tables instead ([`PositionObjects::Rope`], [`PositionObjects::Xpos`]).
#[derive(Debug, Clone)]
pub enum PositionTerms {
    /// Nothing to add to the scores or the output.
    None,
    /// A content-free bias $b_{ij}$ (T5, ALiBi, Kerple, FIRE), `[H, L, L]`.
    Bias(Tensor<3>),
    /// Shaw's $t_{ij} = q_i \cdot w^K_{\text{idx}_{ij}}$ and values $a^V_{ij} = w^V_{\text{idx}_{ij}}$.
    Shaw {
        /// $w^K$, `[2k+1, d_h]`.
        keys: Tensor<2>,
        /// $w^V$, `[2k+1, d_h]`.
        values: Tensor<2>,
    },
    /// Transformer-XL's $(q_i + u) \cdot k_j + (q_i + v) \cdot r_{i-j}$.
    Xl {
        /// $r_\delta$ for $\delta = L-1..0$, `[H, L, d_h]`.
        r: Tensor<3>,
        /// $u$, `[H, d_h]`.
        u: Tensor<2>,
        /// $v$, `[H, d_h]`.
        v: Tensor<2>,
    },
    /// DeBERTa's c2p $q_i \cdot K^r_{\text{idx}_{ij}}$ + p2c $k_j \cdot Q^r_{\text{idx}_{ij}}$.
    Deberta {
        /// $K^r$, `[H, 2s, d_h]`.
        pos_key: Tensor<3>,
        /// $Q^r$, `[H, 2s, d_h]`.
        pos_query: Tensor<3>,
    },
    /// TUPE's untied $(p_i U^Q) \cdot (p_j U^K)$ and its bucket bias.
    Tupe {
        /// $p U^Q$, `[H, L, d_h]`.
        pos_query: Tensor<3>,
        /// $p U^K$, `[H, L, d_h]`.
        pos_key: Tensor<3>,
        /// $b_{ij}$, `[H, L, L]`.
        bias: Tensor<3>,
    },
}

impl PositionTerms {
    /// The content-free bias $b_{ij}$ added after scaling, `[H, L, L]`.
    fn bias(&self) -> Option<&Tensor<3>> {
        match self {
            Self::Bias(b) | Self::Tupe { bias: b, .. } => Some(b),
            _ => None,
        }
    }

    /// Transformer-XL's $u$, added to the queries of the content score.
    fn content_bias(&self) -> Option<&Tensor<2>> {
        match self {
            Self::Xl { u, .. } => Some(u),
            _ => None,
        }
    }
}

/// Scores, weights and output of [`attend`], all heads.
#[derive(Debug, Clone)]
pub struct AttentionParts {
    /// $s_{ij}$, `[B, H, L, L]`, $-\infty$ above the diagonal.
    pub scores: Tensor<4>,
    /// $\alpha_{ij}$, `[B, H, L, L]`.
    pub probs: Tensor<4>,
    /// $o_i$, `[B, H, L, d_h]`.
    pub output: Tensor<4>,
}

/// RoPE in the half layout: $x \cos + \text{rotate\_half}(x) \sin$, with
/// $\text{rotate\_half}(x) = [-x_2, x_1]$; `cos`, `sin` `[L, d_h]`.
pub fn rope_half(x: Tensor<4>, cos: &Tensor<2>, sin: &Tensor<2>) -> Tensor<4> {
    let d = x.dims()[3];
    let x1 = x.clone().narrow(3, 0, d / 2);
    let x2 = x.clone().narrow(3, d / 2, d / 2);
    let rotated = Tensor::cat(vec![x2.neg(), x1], 3);
    x * cos.clone().unsqueeze::<4>() + rotated * sin.clone().unsqueeze::<4>()
}

/// Interleaved rotation with scaling (xPos): pairs $(x_{2i}, x_{2i+1}) \mapsto
/// (x_{2i} C - x_{2i+1} S,\ x_{2i+1} C + x_{2i} S)$ with $C = s\cos$, $S = s\sin$ `[L, d_h/2]`.
pub fn rotate_interleaved(x: Tensor<4>, c: &Tensor<2>, s: &Tensor<2>) -> Tensor<4> {
    let [b, h, l, d] = x.dims();
    // [B, H, L, d/2, 2]
    let pairs = x.reshape([b, h, l, d / 2, 2]);
    let x0 = pairs.clone().narrow(4, 0, 1);
    let x1 = pairs.narrow(4, 1, 1);
    // [L, d/2] -> [1, 1, L, d/2, 1]
    let c = c.clone().reshape([1, 1, l, d / 2, 1]);
    let s = s.clone().reshape([1, 1, l, d / 2, 1]);
    let y0 = x0.clone() * c.clone() - x1.clone() * s.clone();
    let y1 = x1 * c + x0 * s;
    Tensor::cat(vec![y0, y1], 4).reshape([b, h, l, d])
}

/// Transformer-XL's shift: `raw[.., i, r]` holds distance $L-1-r$; the result holds distance
/// $i - j$ at `[.., i, j]` for $j \le i$ (junk above the diagonal, masked later). Pad a zero
/// column in front, view `[L+1, L]`, drop the first row, view `[L, L]`.
pub fn rel_shift(raw: Tensor<4>) -> Tensor<4> {
    let [b, h, l, _] = raw.dims();
    let zeros = Tensor::<4>::zeros([b, h, l, 1], &raw.device());
    Tensor::cat(vec![zeros, raw], 3)
        .reshape([b, h, l + 1, l])
        .narrow(2, 1, l)
        .reshape([b, h, l, l])
}

/// `index [L, L]` broadcast to `[B, H, L, L]` for `gather` / `scatter` along the last axis.
fn expand_index(index: &Tensor<2, Int>, b: usize, h: usize) -> Tensor<4, Int> {
    let [l, m] = index.dims();
    index.clone().unsqueeze::<4>().expand([b, h, l, m])
}

/// $q', k'$: RoPE or xPos rotations of queries and keys, `[B, H, L, d_h]`; others unchanged.
fn rotate(q: Tensor<4>, k: Tensor<4>, ctx: &PositionContext) -> (Tensor<4>, Tensor<4>) {
    match &ctx.objects {
        PositionObjects::Rope { cos, sin } => (rope_half(q, cos, sin), rope_half(k, cos, sin)),
        PositionObjects::Xpos {
            q_cos,
            q_sin,
            k_cos,
            k_sin,
        } => (
            rotate_interleaved(q, q_cos, q_sin),
            rotate_interleaved(k, k_cos, k_sin),
        ),
        _ => (q, k),
    }
}

/// The content-dependent relative terms $t_{ij}$ other than Shaw's, `[B, H, L, L]`:
/// Transformer-XL's $(q_i + v) \cdot r_{i-j}$ and DeBERTa's c2p + p2c.
fn relative_terms(
    q: &Tensor<4>,
    k: &Tensor<4>,
    terms: &PositionTerms,
    ctx: &PositionContext,
) -> Option<Tensor<4>> {
    let [_, h, _, dh] = q.dims();
    match (terms, &ctx.objects) {
        (PositionTerms::Xl { r, v, .. }, PositionObjects::Xl { index, .. }) => {
            // (q_i + v) . r_delta for delta = L-1..0, then shifted, [B, H, L, L]
            let raw = (q.clone() + v.clone().reshape([1, h, 1, dh]))
                .matmul(r.clone().swap_dims(1, 2).unsqueeze::<4>());
            // the fused kernels gather raw[i, L-1-i+j] directly; the reference shifts
            Some(if ctx.kernels == Kernels::Fused {
                relative_gather_with(raw, index, false, ctx.kernels)
            } else {
                rel_shift(raw)
            })
        }
        (PositionTerms::Deberta { pos_key, pos_query }, PositionObjects::Deberta { index }) => {
            // c2p: q_i . K^r_{idx_ij}
            let c2p = relative_gather_with(
                q.clone()
                    .matmul(pos_key.clone().swap_dims(1, 2).unsqueeze::<4>()),
                index,
                false,
                ctx.kernels,
            );
            // p2c: k_j . Q^r_{idx_ij} (the transposed gather)
            let p2c = relative_gather_with(
                k.clone()
                    .matmul(pos_query.clone().swap_dims(1, 2).unsqueeze::<4>()),
                index,
                true,
                ctx.kernels,
            );
            Some(c2p + p2c)
        }
        _ => None,
    }
}

/// Shaw's $w^K$, $w^V$ and the context's index, when the scheme is Shaw's.
fn shaw<'a>(
    terms: &'a PositionTerms,
    ctx: &'a PositionContext,
) -> Option<(&'a Tensor<2>, &'a Tensor<2>, &'a Tensor<2, Int>)> {
    match (terms, &ctx.objects) {
        (PositionTerms::Shaw { keys, values }, PositionObjects::Shaw { index }) => {
            Some((keys, values, index))
        }
        _ => None,
    }
}

/// TUPE's untied absolute term $(p_i U^Q) \cdot (p_j U^K)$, `[H, L, L]`.
fn tupe_term(terms: &PositionTerms) -> Option<Tensor<3>> {
    match terms {
        PositionTerms::Tupe {
            pos_query, pos_key, ..
        } => Some(pos_query.clone().matmul(pos_key.clone().swap_dims(1, 2))),
        _ => None,
    }
}

/// [`attend`]'s output through the fused attention operations
/// ([`crate::lm::kernels::attention`], [`crate::lm::kernels::attention_relative_values`]):
/// rotations applied to $q, k$ first, Transformer-XL's $u$ added to the queries, every other
/// score term folded into one additive bias $c\, t_{ij} + b_{ij}$ (`[H, L, L]` when it does not
/// depend on the content, `[B, H, L, L]` otherwise), whose gradient flows back to the scheme's
/// parameters, and Shaw's relative values added inside the attention.
pub fn attend_fused(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    terms: &PositionTerms,
    ctx: &PositionContext,
    scale: f32,
) -> Tensor<4> {
    let [_, h, _, dh] = q.dims();
    let (q, k) = match &ctx.objects {
        // one fused pass each, laid out as the fused attention reads them
        PositionObjects::Rope { cos, sin } => (
            rope_with(q, cos, sin, ctx.kernels),
            rope_with(k, cos, sin, ctx.kernels),
        ),
        // xPos: queries and keys rotated and permuted alike (q' . k' unchanged)
        PositionObjects::Xpos {
            q_cos,
            q_sin,
            k_cos,
            k_sin,
        } => (
            rotate_pairs_with(q, q_cos, q_sin, ctx.kernels),
            rotate_pairs_with(k, k_cos, k_sin, ctx.kernels),
        ),
        _ => (q, k),
    };
    // t_ij, [B, H, L, L]
    let relative = match shaw(terms, ctx) {
        Some((keys, _, index)) => {
            // Shaw's q_i . w^K_{idx_ij}: (q w^K^T)_{i, idx_ij}
            let qw = q.clone().matmul(keys.clone().transpose().unsqueeze::<4>());
            Some(relative_gather_with(qw, index, false, ctx.kernels))
        }
        None => relative_terms(&q, &k, terms, ctx),
    };
    // content-free part of the bias, [H, L, L]: b_ij (+ c (p_i U^Q) . (p_j U^K) for TUPE)
    let heads = match (terms.bias(), tupe_term(terms)) {
        (Some(b), Some(t)) => Some(b.clone() + t.mul_scalar(scale)),
        (b, _) => b.cloned(),
    };
    let bias = match (relative, heads) {
        (Some(t), Some(b)) => AttentionBias::Batch(t.mul_scalar(scale) + b.unsqueeze::<4>()),
        (Some(t), None) => AttentionBias::Batch(t.mul_scalar(scale)),
        (None, Some(b)) => AttentionBias::Heads(b),
        (None, None) => AttentionBias::None,
    };
    // (q_i + u) . k_j for Transformer-XL
    let q = match terms.content_bias() {
        Some(u) => q + u.clone().reshape([1, h, 1, dh]),
        None => q,
    };
    match (shaw(terms, ctx), bias) {
        (Some((_, values, index)), AttentionBias::Batch(b)) => {
            attention_relative_values(q, k, v, b, values.clone(), index, scale, ctx.kernels)
        }
        (_, bias) => fused_attention(q, k, v, bias, scale),
    }
}

/// Causal attention of queries, keys and values `[B, H, L, d_h]` with the position terms of
/// one layer. `scale` is $c$ ([`super::ModelConfig::score_scale`]). Absolute schemes have
/// already added their table to the input.
pub fn attend(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    terms: &PositionTerms,
    ctx: &PositionContext,
    scale: f32,
) -> AttentionParts {
    let [b, h, l, dh] = q.dims();
    let (q, k) = rotate(q, k, ctx);
    let kt = k.clone().swap_dims(2, 3);
    // q'_i . k'_j (XL: (q_i + u) . k_j), [B, H, L, L]
    let mut scores = match terms.content_bias() {
        Some(u) => (q.clone() + u.clone().reshape([1, h, 1, dh])).matmul(kt),
        None => q.clone().matmul(kt),
    };
    // + t_ij
    if let Some((keys, _, index)) = shaw(terms, ctx) {
        // (q w^K^T)_{i, idx_ij}, [B, H, L, 2k+1] -> [B, H, L, L]
        let qw = q.clone().matmul(keys.clone().transpose().unsqueeze::<4>());
        scores = scores + qw.gather(3, expand_index(index, b, h));
    }
    if let Some(t) = relative_terms(&q, &k, terms, ctx) {
        scores = scores + t;
    }
    if let Some(t) = tupe_term(terms) {
        scores = scores + t.unsqueeze::<4>();
    }
    // c (...) + b_ij
    scores = scores.mul_scalar(scale);
    if let Some(bias) = terms.bias() {
        scores = scores + bias.clone().unsqueeze::<4>();
    }
    let mask = ctx
        .causal_mask
        .clone()
        .unsqueeze::<4>()
        .expand([b, h, l, l]);
    let scores = scores.mask_fill(mask, f32::NEG_INFINITY);
    let probs = softmax(scores.clone(), 3);
    let mut output = probs.clone().matmul(v);
    if let Some((_, values, index)) = shaw(terms, ctx) {
        // sum_r (sum_{j: idx_ij = r} alpha_ij) w^V_r
        let rows = values.dims()[0];
        let per_offset = Tensor::<4>::zeros([b, h, l, rows], &probs.device()).scatter(
            3,
            expand_index(index, b, h),
            probs.clone(),
            IndexingUpdateOp::Add,
        );
        output = output + per_offset.matmul(values.clone().unsqueeze::<4>());
    }
    AttentionParts {
        scores,
        probs,
        output,
    }
}
