//! The fused operations as a burn backend extension: one trait, [`FusedOps`], implemented on
//! the Flex CPU backend by the slice kernels of [`super`] ([`flex`] reads and writes the
//! tensors) and on `Autodiff<Flex>` by the same forward pass recorded with its backward step
//! ([`backward`]), so the operations sit inside burn's own autograd.

mod backward;
mod flex;

use std::sync::Arc;

use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{backend_extension, Autodiff, Backend, ExtensionType, Flex};

use backward::{
    attention_grads, gelu_grads, layer_norm_grads, linear_grads, nll_grads, record,
    relative_gather_grads, rope_grads, AttentionState,
};
use flex::{
    attention_forward_flex, gather_parts, gelu_flex, indices, layer_norm_flex, linear_flex,
    nll_flex, relative_gather_flex, rope_flex, value_index,
};

/// An additive attention-score bias, in one of the two shapes the schemes produce.
#[derive(ExtensionType)]
pub enum ScoreBias<B: Backend> {
    /// No bias.
    None,
    /// `[H, L, L]`, shared by the batch (T5, ALiBi, Kerple, FIRE, TUPE).
    Heads(FloatTensor<B>),
    /// `[B, H, L, L]` (terms that depend on the content: Transformer-XL, DeBERTa).
    Batch(FloatTensor<B>),
}

/// Fused operations of the language model. Every input is `f32`.
#[backend_extension(Flex, Autodiff)]
pub trait FusedOps: Backend {
    /// Causal attention of `q, k, v [B, H, L, D]`: $\operatorname{softmax}(c\,QK^\top + b)V$.
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        #[extension_type] bias: ScoreBias<Self>,
        scale: f32,
    ) -> FloatTensor<Self>;

    /// Exact GELU, elementwise.
    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self>;

    /// LayerNorm over the last axis with weight `gamma [d]` and bias `beta [d]`.
    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self>;

    /// Negative log-likelihood `[N]` of `targets [N]` under `logits [N, V]`.
    fn fused_nll(logits: FloatTensor<Self>, targets: IntTensor<Self>) -> FloatTensor<Self>;

    /// $xW + b$ of `x [..., n_in]`, `w [n_in, n_out]`, `b [n_out]`.
    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> FloatTensor<Self>;

    /// $xW$ of `x [..., n_in]`, `w [n_in, n_out]` (no bias).
    fn fused_product(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self>;

    /// RoPE (half layout) of `x [B, H, L, D]` with constant `cos`, `sin` `[L, D]`; with
    /// `pairs_interleaved`, the pairs $(x_{2j}, x_{2j+1})$ rotated and written in the half
    /// layout ([`rope::rope_half`]).
    fn fused_rope(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        pairs_interleaved: bool,
    ) -> FloatTensor<Self>;

    /// [`FusedOps::fused_attention`] with a per-sequence bias `[B, H, L, L]` and relative
    /// value vectors (Shaw et al.): $o_i \mathrel{+}= \sum_{j \le i} \alpha_{ij}
    /// a^V_{\text{index}_{ij}}$ with `table [R, D]` (shared by the heads, trainable) and a
    /// constant `index [L, L]`.
    fn fused_attention_relative_values(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        table: FloatTensor<Self>,
        index: IntTensor<Self>,
        scale: f32,
    ) -> FloatTensor<Self>;

    /// The relative-position gather of `a [B, H, L, R]` by a constant `index [L, L]`,
    /// `[B, H, L, L]`: $a_{i, \text{index}_{ij}}$, or $a_{j, \text{index}_{ij}}$ when
    /// `transposed` ([`gather::relative_gather`]).
    fn fused_relative_gather(
        a: FloatTensor<Self>,
        index: IntTensor<Self>,
        transposed: bool,
    ) -> FloatTensor<Self>;
}

impl FusedOps for Flex {
    fn fused_linear(x: FlexTensor, w: FlexTensor, b: FlexTensor) -> FlexTensor {
        linear_flex(&x, &w, Some(&b))
    }

    fn fused_product(x: FlexTensor, w: FlexTensor) -> FlexTensor {
        linear_flex(&x, &w, None)
    }

    fn fused_rope(
        x: FlexTensor,
        cos: FlexTensor,
        sin: FlexTensor,
        pairs_interleaved: bool,
    ) -> FlexTensor {
        rope_flex(&x, (&cos, &sin), false, pairs_interleaved)
    }

    fn fused_attention(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        bias: ScoreBias<Flex>,
        scale: f32,
    ) -> FlexTensor {
        attention_forward_flex((&q, &k, &v), &bias, None, scale).0
    }

    fn fused_attention_relative_values(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        bias: FlexTensor,
        table: FlexTensor,
        index: FlexTensor,
        scale: f32,
    ) -> FlexTensor {
        let idx = value_index(&table, &index);
        let bias = ScoreBias::Batch(bias);
        attention_forward_flex((&q, &k, &v), &bias, Some(&(table, idx)), scale).0
    }

    fn fused_relative_gather(a: FlexTensor, index: FlexTensor, transposed: bool) -> FlexTensor {
        let (dims, idx) = gather_parts(&a, &index);
        relative_gather_flex(&a, dims, &idx, transposed)
    }

    fn fused_gelu(x: FlexTensor) -> FlexTensor {
        gelu_flex(&x).0
    }

    fn fused_layer_norm(
        x: FlexTensor,
        gamma: FlexTensor,
        beta: FlexTensor,
        eps: f32,
    ) -> FlexTensor {
        layer_norm_flex(&x, &gamma, &beta, eps).0
    }

    fn fused_nll(logits: FlexTensor, targets: FlexTensor) -> FlexTensor {
        nll_flex(&logits, &indices(&targets)).0
    }
}

/// Each operation: the Flex forward pass, then [`record`] with its gradient function from
/// [`backward`] and the state that function reads.
impl<C: CheckpointStrategy> FusedOps for Autodiff<Flex, C> {
    fn fused_relative_gather(
        a: FloatTensor<Self>,
        index: IntTensor<Self>,
        transposed: bool,
    ) -> FloatTensor<Self> {
        let (dims, idx) = gather_parts(a.primitive(), &index);
        let y = relative_gather_flex(a.primitive(), dims, &idx, transposed);
        record::<_, C, 1>(relative_gather_grads, [a.node()], y, || {
            (dims, Arc::new(idx), transposed)
        })
    }

    fn fused_rope(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        pairs_interleaved: bool,
    ) -> FloatTensor<Self> {
        let (cos, sin) = (cos.primitive(), sin.primitive());
        let y = rope_flex(x.primitive(), (cos, sin), false, pairs_interleaved);
        record::<_, C, 1>(rope_grads, [x.node()], y, || {
            (cos.clone(), sin.clone(), pairs_interleaved)
        })
    }

    fn fused_product(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        let y = linear_flex(x.primitive(), w.primitive(), None);
        record::<_, C, 2>(linear_grads, [x.node(), w.node()], y, || {
            (x.primitive().clone(), w.primitive().clone())
        })
    }

    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let y = linear_flex(x.primitive(), w.primitive(), Some(b.primitive()));
        record::<_, C, 3>(linear_grads, [x.node(), w.node(), b.node()], y, || {
            (x.primitive().clone(), w.primitive().clone())
        })
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        bias: ScoreBias<Self>,
        scale: f32,
    ) -> FloatTensor<Self> {
        // the bias as the Flex forward pass and the saved state take it: (tensor, per batch)
        let (b, saved) = match &bias {
            ScoreBias::None => (ScoreBias::None, None),
            ScoreBias::Heads(b) => (ScoreBias::Heads(b.primitive().clone()), Some((b, false))),
            ScoreBias::Batch(b) => (ScoreBias::Batch(b.primitive().clone()), Some((b, true))),
        };
        let qkv = (q.primitive(), k.primitive(), v.primitive());
        let (out, lse) = attention_forward_flex(qkv, &b, None, scale);
        let state = || AttentionState {
            q: q.primitive().clone(),
            k: k.primitive().clone(),
            v: v.primitive().clone(),
            bias: saved.map(|(b, per_batch)| (b.primitive().clone(), per_batch)),
            rel_values: None,
            out: out.clone(),
            lse,
            scale,
        };
        match saved {
            None => record::<_, C, 3>(
                attention_grads,
                [q.node(), k.node(), v.node()],
                out.clone(),
                state,
            ),
            Some((b, _)) => record::<_, C, 4>(
                attention_grads,
                [q.node(), k.node(), v.node(), b.node()],
                out.clone(),
                state,
            ),
        }
    }

    fn fused_attention_relative_values(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        bias: FloatTensor<Self>,
        table: FloatTensor<Self>,
        index: IntTensor<Self>,
        scale: f32,
    ) -> FloatTensor<Self> {
        let rel_values = (
            table.primitive().clone(),
            value_index(table.primitive(), &index),
        );
        let b = ScoreBias::Batch(bias.primitive().clone());
        let qkv = (q.primitive(), k.primitive(), v.primitive());
        let (out, lse) = attention_forward_flex(qkv, &b, Some(&rel_values), scale);
        let parents = [q.node(), k.node(), v.node(), bias.node(), table.node()];
        record::<_, C, 5>(attention_grads, parents, out.clone(), || AttentionState {
            q: q.primitive().clone(),
            k: k.primitive().clone(),
            v: v.primitive().clone(),
            bias: Some((bias.primitive().clone(), true)),
            rel_values: Some(rel_values),
            out,
            lse,
            scale,
        })
    }

    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let (y, cdf) = gelu_flex(x.primitive());
        record::<_, C, 1>(gelu_grads, [x.node()], y, || (x.primitive().clone(), cdf))
    }

    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let (y, stats) = layer_norm_flex(x.primitive(), gamma.primitive(), beta.primitive(), eps);
        let parents = [x.node(), gamma.node(), beta.node()];
        record::<_, C, 3>(layer_norm_grads, parents, y, || {
            (x.primitive().clone(), gamma.primitive().clone(), stats)
        })
    }

    fn fused_nll(logits: FloatTensor<Self>, targets: IntTensor<Self>) -> FloatTensor<Self> {
        let t = Arc::new(indices(&targets));
        let (nll, lse) = nll_flex(logits.primitive(), &t);
        record::<_, C, 1>(nll_grads, [logits.node()], nll, || {
            (logits.primitive().clone(), t, lse)
        })
    }
}
