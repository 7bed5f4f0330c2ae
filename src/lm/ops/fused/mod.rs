//! The fused operations on the Flex CPU backend: each one burn backend-extension operation
//! (`FusedOps`) with its own backward step, so it lives inside burn's autograd like any other
//! operation.
//!
//! burn's autodiff records `softmax`, `layer_norm`, `gelu` and `log_softmax` as chains of
//! elementary operations, each a pass over the tensor on one core. Here each of them is one
//! parallel pass forward and one backward:
//!
//! * causal attention $\operatorname{softmax}(c\,QK^\top + b)V$ with an optional additive bias
//!   `[H, L, L]` or `[B, H, L, L]` whose gradient flows back to the scheme's parameters; tiles
//!   of query rows, key blocks past a tile's last row skipped, no `[B, H, L, L]` tensor kept
//!   (the backward rebuilds the weights from the saved log-sum-exp);
//! * exact GELU $x\Phi(x)$; LayerNorm; log-softmax with the negative log-likelihood; linear
//!   layers and products; RoPE's rotation; the relative-position gather.
//!
//! Every function here needs tensors on the Flex backend: [`super::Ops`] calls them only when
//! it was chosen for a Flex device. The composed [`super::reference`] is the specification
//! the tests compare them with (values, gradients and finite differences).

pub(crate) mod attention;
pub(crate) mod extension;
pub(crate) mod gather;
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

use super::AttentionBias;
use extension::{FusedOps, ScoreBias};

/// Causal attention of `q, k, v [B, H, L, D]`,
/// $o_i = \sum_{j \le i} \operatorname{softmax}_j(c\, q_i \cdot k_j + b_{ij})\, v_j$.
pub fn attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    bias: AttentionBias,
    scale: f32,
) -> Tensor<4> {
    let bias = match bias {
        AttentionBias::None => ScoreBias::None,
        AttentionBias::Heads(b) => ScoreBias::Heads(b.into_dispatch()),
        AttentionBias::Batch(b) => ScoreBias::Batch(b.into_dispatch()),
    };
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_attention(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        bias,
        scale,
    ))
}

/// [`attention`] with a per-sequence bias `[B, H, L, L]` and relative value vectors
/// (Shaw et al.), $o_i \mathrel{+}= \sum_{j \le i} \alpha_{ij} a^V_{\text{index}_{ij}}$: the
/// weights summed per table row inside each tile (no `[B, H, L, L]` weights kept).
pub fn attention_relative_values(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    bias: Tensor<4>,
    table: Tensor<2>,
    index: &Tensor<2, Int>,
    scale: f32,
) -> Tensor<4> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_attention_relative_values(
        q.into_dispatch(),
        k.into_dispatch(),
        v.into_dispatch(),
        bias.into_dispatch(),
        table.into_dispatch(),
        index.clone().into_dispatch(),
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

/// The relative-position gather ([`super::reference::relative_gather`]): each matrix read and
/// written once, its gradient scattered in one pass.
pub fn relative_gather(a: Tensor<4>, index: &Tensor<2, Int>, transposed: bool) -> Tensor<4> {
    Tensor::from_dispatch(<Dispatch as FusedOps>::fused_relative_gather(
        a.into_dispatch(),
        index.clone().into_dispatch(),
        transposed,
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
