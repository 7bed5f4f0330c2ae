//! The fused operations on the Flex CPU backend: each one burn backend-extension operation
//! (`FusedOps`) with its own backward step, so it lives inside burn's autograd like any other
//! operation.
//!
//! burn's autodiff records `softmax`, `layer_norm`, `gelu` and `log_softmax` as chains of
//! elementary operations, each a pass over the tensor on one core. Here each of them is one
//! parallel pass forward and one backward:
//!
//! * causal attention $\operatorname{softmax}(c\,(QK^\top + T) + B)V$ with the position
//!   terms of the schemes, each a compact object (a bias per distance, a piecewise-linear
//!   function, tables read at the column of the distance, relative keys per distance, untied
//!   absolute terms, relative values; CoPE's contextual positions, counted along each row of
//!   a tile) expanded inside the tiles and given its gradient back; tiles of query rows, key
//!   blocks past a tile's last row skipped, no `[L, L]` tensor kept (the backward rebuilds
//!   the weights from the saved log-sum-exp);
//! * exact GELU $x\Phi(x)$; LayerNorm; log-softmax with the negative log-likelihood; linear
//!   layers and products; RoPE's rotation.
//!
//! Every function here needs tensors on the Flex backend: [`super::Ops`] calls them only when
//! it was chosen for a Flex device. The composed [`super::reference`] is the specification
//! the tests compare them with (values, gradients and finite differences).

pub(crate) mod attention;
pub(crate) mod extension;
pub(crate) mod gelu;
pub(crate) mod heads;
pub(crate) mod linear;
pub(crate) mod nll;
pub(crate) mod norm;
mod parallel;
pub(crate) mod rope;
pub(crate) mod simd;
mod softmax;
#[cfg(test)]
mod testing;

use burn::backend::Dispatch;
use burn::tensor::{Int, Tensor};

use super::{Gathered, PositionBias, Rotations, ScoreTerms, WindowedRotation};
use extension::{
    AttentionTerms, ContextualTerm, FusedOps, ProductTerm, ScoreBias, TableTerm, ValuesTerm,
};

/// Causal attention of `q, k, v [B, H, L, D]` with a scheme's `terms`
/// ([`super::Ops::attention`]'s formula): rotations applied to $q, k$ first, the query scale
/// $\tau_i$ and $u$ to the queries, then one fused operation that expands every other term
/// inside its tiles (CoPE's contextual positions counted along each row of a tile, from the
/// same queries) and returns each term's gradient to its own compact object. With a second
/// rotation ([`ScoreTerms::windowed`], evaluation only) the two-pass form instead: both
/// products of every tile, the second taken for the pairs $i - j \ge w$.
pub fn attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    terms: ScoreTerms,
    scale: f32,
) -> Tensor<4> {
    let [_, h, _, dh] = q.dims();
    if let Some(windowed) = &terms.windowed {
        return windowed_attention(q, k, v, &terms, windowed, scale);
    }
    // xPos: queries and keys rotated and permuted alike (q' . k' unchanged)
    let (q, k) = rotate(&terms, q, k);
    let bias = match terms.bias {
        None => ScoreBias::None,
        Some(PositionBias::Distance(b)) => ScoreBias::Distance(b.into_dispatch()),
        Some(PositionBias::Piecewise(p)) => ScoreBias::Piecewise {
            intercepts: p.intercepts.into_dispatch(),
            slopes: p.slopes.into_dispatch(),
            feature: p.feature.into_dispatch(),
            row_scale: p.row_scale.into_dispatch(),
            breakpoints: p.breakpoints,
        },
    };
    // tau_i q_i, then (q_i + u) . k_j
    let q = ScoreTerms::scale_queries(terms.query_scale.as_ref(), q);
    let q = match terms.content_bias {
        Some(u) => q + u.reshape([1, h, 1, dh]),
        None => q,
    };
    let table = |t: Option<Gathered>| match t {
        Some(g) => TableTerm::Table {
            table: g.table.into_dispatch(),
            index: g.index,
        },
        None => TableTerm::None,
    };
    let values = match terms.values {
        Some(rv) => ValuesTerm::Table {
            table: rv.table.into_dispatch(),
            index: rv.index,
        },
        None => ValuesTerm::None,
    };
    let terms = AttentionTerms {
        bias,
        query_table: table(terms.query_table),
        key_table: table(terms.key_table),
        distance: match terms.distance_keys {
            Some(dk) => ProductTerm::Pair {
                queries: dk.queries.into_dispatch(),
                keys: dk.keys.into_dispatch(),
            },
            None => ProductTerm::None,
        },
        untied: match terms.untied {
            Some(u) => ProductTerm::Pair {
                queries: u.queries.into_dispatch(),
                keys: u.keys.into_dispatch(),
            },
            None => ProductTerm::None,
        },
        values,
        contextual: match terms.contextual {
            Some(cx) => ContextualTerm::Embeddings(cx.embeddings.into_dispatch()),
            None => ContextualTerm::None,
        },
    };
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        terms,
        scale,
    ))
}

/// $q, k$ rotated by `terms`' rotation with the fused rotation kernels, unchanged without one.
fn rotate(terms: &ScoreTerms, q: Tensor<4>, k: Tensor<4>) -> (Tensor<4>, Tensor<4>) {
    match &terms.rotation {
        Some(rotation) => rotation.apply(
            q,
            k,
            Rotations {
                half: rope_half,
                pairs: rotate_pairs,
                sequences: rope_half_sequences,
            },
        ),
        None => (q, k),
    }
}

/// The two-pass attention of ReRoPE at inference: $q, k$ rotated by `terms`' rotation and
/// by the second rotation, both scaled by $\tau_i$ when `terms` has a query scale, then one
/// tiled pass that computes both products of every tile and takes the second for the pairs
/// $i - j \ge w$ (memory linear in $L$). Only the rotations and the query scale of `terms`
/// take part (what RoPE's trained form hands over); the result carries no gradient.
fn windowed_attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    terms: &ScoreTerms,
    windowed: &WindowedRotation,
    scale: f32,
) -> Tensor<4> {
    let (q2, k2) = windowed.apply(q.clone(), k.clone(), rope_half);
    let (q, k) = rotate(terms, q, k);
    let tau = terms.query_scale.as_ref();
    let (q, q2) = (
        ScoreTerms::scale_queries(tau, q),
        ScoreTerms::scale_queries(tau, q2),
    );
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_windowed_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        q2.into_dispatch(),
        k2.into_dispatch(),
        windowed.window,
        scale,
    ))
}

/// $xW + b$: the bias written first and the product added onto it; the backward multiplies
/// without transposed copies.
pub fn linear<const D: usize>(x: Tensor<D>, w: Tensor<2>, b: Tensor<1>) -> Tensor<D> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_linear(
        x.into_dispatch(),
        w.into_dispatch(),
        b.into_dispatch(),
    ))
}

/// $xW$ of `x [..., n_in]` and `w [n_in, n_out]`.
pub fn product(x: Tensor<3>, w: Tensor<2>) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_product(
        x.into_dispatch(),
        w.into_dispatch(),
    ))
}

/// RoPE in the half layout of `x [B, H, L, D]` with constant `cos`, `sin` `[L, D]`, laid out
/// as [`attention`] reads it.
pub fn rope_half(x: Tensor<4>, cos: &Tensor<2>, sin: &Tensor<2>) -> Tensor<4> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_rope(
        x.into_dispatch(),
        cos.clone().into_dispatch(),
        sin.clone().into_dispatch(),
        false,
    ))
}

/// RoPE in the half layout of `x [B, H, L, D]` with constant tables per sequence, `cos`,
/// `sin` `[B, L, D]` ([`super::reference::rope_half_sequences`]), laid out as [`attention`]
/// reads it.
pub fn rope_half_sequences(x: Tensor<4>, cos: &Tensor<3>, sin: &Tensor<3>) -> Tensor<4> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_rope(
        x.into_dispatch(),
        cos.clone().into_dispatch(),
        sin.clone().into_dispatch(),
        false,
    ))
}

/// The interleaved rotation with scaling (xPos) of `x [B, H, L, D]` with constants
/// $C, S$ `[L, D/2]`, written in the half layout ([`super::reference::rotate_pairs`]).
pub fn rotate_pairs(x: Tensor<4>, c: &Tensor<2>, s: &Tensor<2>) -> Tensor<4> {
    let both = |t: &Tensor<2>| Tensor::cat(vec![t.clone(), t.clone()], 1).into_dispatch();
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_rope(
        x.into_dispatch(),
        both(c),
        both(s),
        true,
    ))
}

/// Exact GELU $x\Phi(x)$.
pub fn gelu(x: Tensor<3>) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_gelu(x.into_dispatch()))
}

/// LayerNorm over the last axis, $\frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}\gamma + \beta$.
pub fn layer_norm(x: Tensor<3>, gamma: Tensor<1>, beta: Tensor<1>, eps: f32) -> Tensor<3> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_layer_norm(
        x.into_dispatch(),
        gamma.into_dispatch(),
        beta.into_dispatch(),
        eps,
    ))
}

/// Per-position negative log-likelihood `[B, L]` of `targets [B, L]` under `logits [B, L, V]`.
pub fn nll(logits: Tensor<3>, targets: Tensor<2, Int>) -> Tensor<2> {
    let [b, l, v] = logits.dims();
    let nll = <Dispatch as FusedOps>::fused_nll(
        logits.reshape([b * l, v]).into_dispatch(),
        targets.reshape([b * l]).into_dispatch(),
    );
    Tensor::<1>::from_dispatch(nll).reshape([b, l])
}
