//! Fused kernels for the language model, and the choice between them and the decomposed
//! reference.
//!
//! burn's autodiff records `softmax`, `layer_norm`, `gelu` and `log_softmax` as chains of
//! elementary operations, each a pass over the tensor on one core. The fused path computes
//! each of them in one parallel pass forward and one backward, as burn backend-extension
//! operations with their own backward steps ([`extension::FusedOps`]), so they live inside
//! burn's autograd like any other operation:
//!
//! * causal attention $\operatorname{softmax}(c\,QK^\top + b)V$ with an optional additive bias
//!   `[H, L, L]` or `[B, H, L, L]` whose gradient flows back to the scheme's parameters; tiles
//!   of query rows, key blocks past a tile's last row skipped, no `[B, H, L, L]` tensor kept
//!   (the backward rebuilds the weights from the saved log-sum-exp);
//! * exact GELU $x\Phi(x)$; LayerNorm; log-softmax with the negative log-likelihood.
//!
//! The decomposed path ([`Kernels::Reference`]) is the specification: the tests compare every
//! fused operation's values and gradients with it and with finite differences.

pub mod cpu;
pub mod extension;
pub mod simd;

use burn::backend::{Dispatch, DispatchDevice};
use burn::tensor::activation::{gelu, log_softmax};
use burn::tensor::{Device, Int, Tensor};

use extension::{FusedOps, ScoreBias};

/// Which implementation of attention, GELU, LayerNorm and the loss a forward pass uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// burn's own operations, composed (the specification; any backend).
    Reference,
    /// One fused, parallel operation each (Flex CPU backend only).
    #[default]
    Fused,
}

impl Kernels {
    /// The kernels to use on `device`: `self`, except that the fused kernels exist only for
    /// the Flex CPU backend, so other devices get the reference.
    pub fn for_device(self, device: &Device) -> Self {
        if self == Kernels::Fused && is_flex(device) {
            Kernels::Fused
        } else {
            Kernels::Reference
        }
    }
}

/// Whether `device` is the Flex CPU backend (with or without autodiff).
pub fn is_flex(device: &Device) -> bool {
    let inner = device.clone().without_autodiff();
    matches!(inner.as_dispatch(), DispatchDevice::Flex(_))
}

/// An additive score bias for [`attention`].
#[derive(Debug, Clone)]
pub enum AttentionBias {
    /// None.
    None,
    /// `[H, L, L]`, the same for every sequence.
    Heads(Tensor<3>),
    /// `[B, H, L, L]`.
    Batch(Tensor<4>),
}

/// Causal attention of `q, k, v [B, H, L, D]`,
/// $o_i = \sum_{j \le i} \operatorname{softmax}_j(c\, q_i \cdot k_j + b_{ij})\, v_j$, fused
/// (one operation forward, one backward). Falls back to the reference composition when the
/// device is not Flex.
pub fn attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    bias: AttentionBias,
    scale: f32,
) -> Tensor<4> {
    if !is_flex(&q.device()) {
        return reference_attention(q, k, v, bias, scale);
    }
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

/// Causal attention with a per-sequence score bias and relative value vectors (Shaw et al.):
///
/// ```math
/// o_i = \sum_{j \le i} \alpha_{ij} \big(v_j + a^V_{\text{index}_{ij}}\big), \qquad
/// \alpha_{ij} = \operatorname{softmax}_j(c\, q_i \cdot k_j + b_{ij}),
/// ```
///
/// `bias [B, H, L, L]`, `table` $a^V$ `[R, D]` (shared by the heads), `index [L, L]` (entries
/// below `R`). Fused: the weights summed per table row inside each tile (no `[B, H, L, L]`
/// weights kept); the reference composes softmax, a scatter of the weights per table row and
/// two products.
#[allow(clippy::too_many_arguments)]
pub fn attention_relative_values(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    bias: Tensor<4>,
    table: Tensor<2>,
    index: &Tensor<2, Int>,
    scale: f32,
    kernels: Kernels,
) -> Tensor<4> {
    if kernels == Kernels::Fused && is_flex(&q.device()) {
        return Tensor::from_dispatch(<Dispatch as FusedOps>::fused_attention_relative_values(
            q.into_dispatch(),
            k.into_dispatch(),
            v.into_dispatch(),
            bias.into_dispatch(),
            table.into_dispatch(),
            index.clone().into_dispatch(),
            scale,
        ));
    }
    let [b, h, l, _] = q.dims();
    let probs = causal_softmax(q.matmul(k.swap_dims(2, 3)).mul_scalar(scale) + bias);
    // sum_r (sum_{j: index_ij = r} alpha_ij) a^V_r
    let rows = table.dims()[0];
    let idx = index.clone().unsqueeze::<4>().expand([b, h, l, l]);
    let per_row = Tensor::<4>::zeros([b, h, l, rows], &probs.device()).scatter(
        3,
        idx,
        probs.clone(),
        burn::tensor::IndexingUpdateOp::Add,
    );
    probs.matmul(v) + per_row.matmul(table.unsqueeze::<4>())
}

/// The same attention composed of burn operations (matmul, mask, softmax, matmul).
pub fn reference_attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    bias: AttentionBias,
    scale: f32,
) -> Tensor<4> {
    let mut scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale);
    match bias {
        AttentionBias::None => {}
        AttentionBias::Heads(bias) => scores = scores + bias.unsqueeze::<4>(),
        AttentionBias::Batch(bias) => scores = scores + bias,
    }
    causal_softmax(scores).matmul(v)
}

/// $\operatorname{softmax}_j$ over keys $j \le i$ of scores `[B, H, L, L]` (composed: the keys
/// after each query masked to $-\infty$, then burn's softmax).
fn causal_softmax(scores: Tensor<4>) -> Tensor<4> {
    let [b, h, l, _] = scores.dims();
    let mask = Tensor::<2, burn::tensor::Bool>::tril_mask([l, l], 0, &scores.device())
        .unsqueeze::<4>()
        .expand([b, h, l, l]);
    burn::tensor::activation::softmax(scores.mask_fill(mask, f32::NEG_INFINITY), 3)
}

/// `linear.forward(x)`, $xW + b$, with the chosen kernels (the fused one writes the bias
/// and adds the product onto it, and its backward multiplies without transposed copies).
pub fn linear_with<const D: usize>(
    linear: &burn::nn::Linear,
    x: Tensor<D>,
    kernels: Kernels,
) -> Tensor<D> {
    match (
        &linear.bias,
        kernels == Kernels::Fused && is_flex(&x.device()),
    ) {
        (Some(b), true) => Tensor::from_dispatch(<Dispatch as FusedOps>::fused_linear(
            x.into_dispatch(),
            linear.weight.val().into_dispatch(),
            b.val().into_dispatch(),
        )),
        _ => linear.forward(x),
    }
}

/// $xW$ of `x [..., n_in]` and `w [n_in, n_out]` with the chosen kernels.
pub fn product_with(x: Tensor<3>, w: Tensor<2>, kernels: Kernels) -> Tensor<3> {
    if kernels == Kernels::Fused && is_flex(&x.device()) {
        Tensor::from_dispatch(<Dispatch as FusedOps>::fused_product(
            x.into_dispatch(),
            w.into_dispatch(),
        ))
    } else {
        x.matmul(w.unsqueeze::<3>())
    }
}

/// RoPE in the half layout, $x \cos + \text{rotate\_half}(x) \sin$, of `x [B, H, L, D]` with
/// `cos`, `sin` `[L, D]` (constants, no gradient), fused: one parallel pass forward and one
/// backward, the result laid out as the fused attention reads it. Falls back to the composed
/// rotation off the Flex backend.
pub fn rope_with(x: Tensor<4>, cos: &Tensor<2>, sin: &Tensor<2>, kernels: Kernels) -> Tensor<4> {
    if kernels == Kernels::Fused && is_flex(&x.device()) {
        Tensor::from_dispatch(<Dispatch as FusedOps>::fused_rope(
            x.into_dispatch(),
            cos.clone().into_dispatch(),
            sin.clone().into_dispatch(),
            false,
        ))
    } else {
        crate::lm::model::attention::rope_half(x, cos, sin)
    }
}

/// The interleaved rotation with scaling (xPos) of `x [B, H, L, D]`: pairs
/// $(x_{2j}, x_{2j+1}) \mapsto (x_{2j} C - x_{2j+1} S,\ x_{2j+1} C + x_{2j} S)$ with
/// $C, S$ `[L, D/2]` (constants), **written in the half layout** (first members, then second
/// members): the rotation followed by one fixed permutation of the head dimensions, which
/// leaves $q' \cdot k'$ unchanged when queries and keys both get it, so attention gives the
/// same result. Fused: one parallel pass forward and one backward, laid out as the fused
/// attention reads it; the reference composes [`crate::lm::model::attention::rotate_interleaved`]
/// and the permutation.
pub fn rotate_pairs_with(
    x: Tensor<4>,
    c: &Tensor<2>,
    s: &Tensor<2>,
    kernels: Kernels,
) -> Tensor<4> {
    if kernels == Kernels::Fused && is_flex(&x.device()) {
        let both = |t: &Tensor<2>| Tensor::cat(vec![t.clone(), t.clone()], 1).into_dispatch();
        return Tensor::from_dispatch(<Dispatch as FusedOps>::fused_rope(
            x.into_dispatch(),
            both(c),
            both(s),
            true,
        ));
    }
    let [b, h, l, d] = x.dims();
    // [.., d/2, 2] -> [.., 2, d/2]: even dimensions first, then odd
    crate::lm::model::attention::rotate_interleaved(x, c, s)
        .reshape([b, h, l, d / 2, 2])
        .swap_dims(3, 4)
        .reshape([b, h, l, d])
}

/// The relative-position gather of `a [B, H, L, R]` by `index [L, L]` (entries below `R`),
/// `[B, H, L, L]`: $y_{ij} = a_{i,\,\text{index}_{ij}}$, or $a_{j,\,\text{index}_{ij}}$ when
/// `transposed` (DeBERTa's c2p and p2c, Transformer-XL's shift), with the chosen kernels: the
/// fused one reads and writes each matrix once and scatters its gradient in one pass; the
/// reference is burn's `gather` of the broadcast index (and `swap_dims` when transposed).
pub fn relative_gather_with(
    a: Tensor<4>,
    index: &Tensor<2, Int>,
    transposed: bool,
    kernels: Kernels,
) -> Tensor<4> {
    if kernels == Kernels::Fused && is_flex(&a.device()) {
        return Tensor::from_dispatch(<Dispatch as FusedOps>::fused_relative_gather(
            a.into_dispatch(),
            index.clone().into_dispatch(),
            transposed,
        ));
    }
    let [b, h, _, _] = a.dims();
    let [l, m] = index.dims();
    let idx = index.clone().unsqueeze::<4>().expand([b, h, l, m]);
    if transposed {
        a.gather(3, idx.swap_dims(2, 3)).swap_dims(2, 3)
    } else {
        a.gather(3, idx)
    }
}

/// GELU with the chosen kernels.
pub fn gelu_with(x: Tensor<3>, kernels: Kernels) -> Tensor<3> {
    if kernels == Kernels::Fused && is_flex(&x.device()) {
        Tensor::from_dispatch(<Dispatch as FusedOps>::fused_gelu(x.into_dispatch()))
    } else {
        gelu(x)
    }
}

/// LayerNorm over the last axis, $\frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}\gamma + \beta$, with
/// the chosen kernels.
pub fn layer_norm_with(
    ln: &burn::nn::LayerNorm,
    x: Tensor<3>,
    eps: f32,
    kernels: Kernels,
) -> Tensor<3> {
    match (&ln.beta, kernels == Kernels::Fused && is_flex(&x.device())) {
        (Some(beta), true) => Tensor::from_dispatch(<Dispatch as FusedOps>::fused_layer_norm(
            x.into_dispatch(),
            ln.gamma.val().into_dispatch(),
            beta.val().into_dispatch(),
            eps,
        )),
        _ => ln.forward(x),
    }
}

/// Per-position negative log-likelihood `[B, L]` of `targets [B, L]` under `logits [B, L, V]`,
/// $\log\sum_j e^{x_j} - x_t$, with the chosen kernels.
pub fn nll_with(logits: Tensor<3>, targets: Tensor<2, Int>, kernels: Kernels) -> Tensor<2> {
    let [b, l, v] = logits.dims();
    if kernels == Kernels::Fused && is_flex(&logits.device()) {
        let nll = <Dispatch as FusedOps>::fused_nll(
            logits.reshape([b * l, v]).into_dispatch(),
            targets.reshape([b * l]).into_dispatch(),
        );
        return Tensor::<1>::from_dispatch(nll).reshape([b, l]);
    }
    log_softmax(logits, 2)
        .gather(2, targets.reshape([b, l, 1]))
        .reshape([b, l])
        .neg()
}
