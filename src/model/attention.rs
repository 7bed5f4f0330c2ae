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

use super::context::PositionContext;
use super::kernels::{
    attention as fused_attention, attention_relative_values, relative_gather_with, rope_with,
    rotate_pairs_with, AttentionBias, Kernels,
};

/// A scheme's position terms for one layer, already combined with the layer's parameters.
#[derive(Debug, Clone, Default)]
pub struct PositionTerms {
    /// Shaw $w^K$ and $w^V$, `[2k+1, d_h]` each.
    pub shaw: Option<(Tensor<2>, Tensor<2>)>,
    /// Transformer-XL $r_\delta$ for $\delta = L-1..0$ `[H, L, d_h]`, $u$ and $v$ `[H, d_h]`.
    pub xl: Option<(Tensor<3>, Tensor<2>, Tensor<2>)>,
    /// DeBERTa $K^r$ and $Q^r$, `[H, 2s, d_h]` each.
    pub deberta: Option<(Tensor<3>, Tensor<3>)>,
    /// TUPE $p U^Q$ and $p U^K$, `[H, L, d_h]` each.
    pub tupe: Option<(Tensor<3>, Tensor<3>)>,
    /// Content-free bias $b_{ij}$, `[H, L, L]`.
    pub bias: Option<Tensor<3>>,
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
    match (&ctx.rope, &ctx.xpos) {
        (Some((cos, sin)), _) => (rope_half(q, cos, sin), rope_half(k, cos, sin)),
        (_, Some([qc, qs, kc, ks])) => {
            (rotate_interleaved(q, qc, qs), rotate_interleaved(k, kc, ks))
        }
        _ => (q, k),
    }
}

/// `sum + t`, or `t` when there is no sum yet.
fn plus<const D: usize>(sum: Option<Tensor<D>>, t: Tensor<D>) -> Tensor<D> {
    match sum {
        Some(sum) => sum + t,
        None => t,
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
    let mut total: Option<Tensor<4>> = None;
    let mut add = |t: Tensor<4>| total = Some(plus(total.take(), t));
    if let Some((r, _, v_bias)) = &terms.xl {
        // (q_i + v) . r_delta for delta = L-1..0, then shifted, [B, H, L, L]
        let raw = (q.clone() + v_bias.clone().reshape([1, h, 1, dh]))
            .matmul(r.clone().swap_dims(1, 2).unsqueeze::<4>());
        // the fused kernels gather raw[i, L-1-i+j] directly; the reference shifts
        add(match &ctx.xl_index {
            Some(index) if ctx.kernels == Kernels::Fused => {
                relative_gather_with(raw, index, false, ctx.kernels)
            }
            _ => rel_shift(raw),
        });
    }
    if let (Some((pos_key, pos_query)), Some(index)) = (&terms.deberta, &ctx.deberta_index) {
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
        add(c2p + p2c);
    }
    total
}

/// TUPE's untied absolute term $(p_i U^Q) \cdot (p_j U^K)$, `[H, L, L]`.
fn tupe_term(terms: &PositionTerms) -> Option<Tensor<3>> {
    terms
        .tupe
        .as_ref()
        .map(|(pq, pk)| pq.clone().matmul(pk.clone().swap_dims(1, 2)))
}

/// [`attend`]'s output through the fused attention operations
/// ([`super::kernels::attention`], [`super::kernels::attention_relative_values`]): rotations
/// applied to $q, k$ first, Transformer-XL's $u$ added to the queries, every other score term
/// folded into one additive bias $c\, t_{ij} + b_{ij}$ (`[H, L, L]` when it does not depend on
/// the content, `[B, H, L, L]` otherwise), whose gradient flows back to the scheme's
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
    let (q, k) = match (&ctx.rope, &ctx.xpos) {
        // one fused pass each, laid out as the fused attention reads them
        (Some((cos, sin)), _) => (
            rope_with(q, cos, sin, ctx.kernels),
            rope_with(k, cos, sin, ctx.kernels),
        ),
        // xPos: queries and keys rotated and permuted alike (q' . k' unchanged)
        (_, Some([qc, qs, kc, ks])) => (
            rotate_pairs_with(q, qc, qs, ctx.kernels),
            rotate_pairs_with(k, kc, ks, ctx.kernels),
        ),
        _ => rotate(q, k, ctx),
    };
    let mut relative = relative_terms(&q, &k, terms, ctx);
    if let (Some((keys, _)), Some(index)) = (&terms.shaw, &ctx.shaw_index) {
        // Shaw's q_i . w^K_{idx_ij}: (q w^K^T)_{i, idx_ij}
        let qw = q.clone().matmul(keys.clone().transpose().unsqueeze::<4>());
        let t = relative_gather_with(qw, index, false, ctx.kernels);
        relative = Some(plus(relative, t));
    }
    // content-free part of the bias, [H, L, L]
    let mut heads = terms.bias.clone();
    if let Some(t) = tupe_term(terms) {
        let t = t.mul_scalar(scale);
        heads = Some(plus(heads, t));
    }
    let bias = match (relative, heads) {
        (Some(t), Some(b)) => AttentionBias::Batch(t.mul_scalar(scale) + b.unsqueeze::<4>()),
        (Some(t), None) => AttentionBias::Batch(t.mul_scalar(scale)),
        (None, Some(b)) => AttentionBias::Heads(b),
        (None, None) => AttentionBias::None,
    };
    // (q_i + u) . k_j for Transformer-XL
    let q = match &terms.xl {
        Some((_, u, _)) => q + u.clone().reshape([1, h, 1, dh]),
        None => q,
    };
    match (&terms.shaw, &ctx.shaw_index, bias) {
        (Some((_, values)), Some(index), AttentionBias::Batch(b)) => {
            attention_relative_values(q, k, v, b, values.clone(), index, scale, ctx.kernels)
        }
        (_, _, bias) => fused_attention(q, k, v, bias, scale),
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
    let mut scores = match &terms.xl {
        Some((_, u, _)) => (q.clone() + u.clone().reshape([1, h, 1, dh])).matmul(kt),
        None => q.clone().matmul(kt),
    };
    // + t_ij
    if let (Some((keys, _)), Some(index)) = (&terms.shaw, &ctx.shaw_index) {
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
    if let Some(bias) = &terms.bias {
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
    if let (Some((_, values)), Some(index)) = (&terms.shaw, &ctx.shaw_index) {
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
