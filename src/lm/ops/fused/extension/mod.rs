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
    gelu_grads, layer_norm_grads, linear_grads, nll_grads, record, record_attention, rope_grads,
    AttentionState,
};
use burn::backend::autodiff::ops::NodeGuard;
use burn::backend::AutodiffBackend;
use flex::{
    attention_forward_flex, gelu_flex, indices, layer_norm_flex, linear_flex, nll_flex, rope_flex,
    windowed_attention_flex,
};

/// An additive attention-score bias $b_{ij}$.
#[derive(ExtensionType, Debug, Clone)]
pub enum ScoreBias<B: Backend> {
    /// No bias.
    None,
    /// $\beta_{h,\,i-j}$, `[H, L]` (T5, ALiBi, Kerple).
    Distance(FloatTensor<B>),
    /// $f_h(\psi_{i-j}\nu_i)$, piecewise linear (FIRE).
    Piecewise {
        /// $a_{h,p}$, `[H, P]`.
        intercepts: FloatTensor<B>,
        /// $s_{h,p}$, `[H, P]`.
        slopes: FloatTensor<B>,
        /// $\psi_d$, `[L]`.
        feature: FloatTensor<B>,
        /// $\nu_i$, `[L]`.
        row_scale: FloatTensor<B>,
        /// $t_1 \le \dots \le t_{P-1}$ (constants).
        breakpoints: Arc<[f32]>,
    },
}

/// A table `[B, H, L, R]` read at the column of the distance (its index a constant).
#[derive(ExtensionType, Debug, Clone)]
pub enum TableTerm<B: Backend> {
    /// None.
    None,
    /// The table and its index over distance.
    Table {
        /// $g$, `[B, H, L, R]`.
        table: FloatTensor<B>,
        /// $\text{index}(d)$.
        index: Arc<[usize]>,
    },
}

/// Two tensors whose rows meet in a product: relative queries `[B, H, L, D]` and keys per
/// distance `[H, L, D]`, or untied absolute queries and keys `[H, L, D]`.
#[derive(ExtensionType, Debug, Clone)]
pub enum ProductTerm<B: Backend> {
    /// None.
    None,
    /// Both.
    Pair {
        /// Query side.
        queries: FloatTensor<B>,
        /// Key side.
        keys: FloatTensor<B>,
    },
}

/// Relative value vectors: a table `[R, D]` and the row of every distance (a constant).
#[derive(ExtensionType, Debug, Clone)]
pub enum ValuesTerm<B: Backend> {
    /// None.
    None,
    /// The table and its index over distance.
    Table {
        /// $a^V$, `[R, D]`.
        table: FloatTensor<B>,
        /// $\text{index}(d)$.
        index: Arc<[usize]>,
    },
}

/// CoPE's position embeddings `[P, D]`, shared by the heads.
#[derive(ExtensionType, Debug, Clone)]
pub enum ContextualTerm<B: Backend> {
    /// None.
    None,
    /// $e$, `[P, D]`.
    Embeddings(FloatTensor<B>),
}

/// Every position term of one fused attention call ([`super::attention::Terms`] as tensors).
#[derive(ExtensionType, Debug, Clone)]
pub struct AttentionTerms<B: Backend> {
    /// $b_{ij}$.
    #[extension_type]
    pub bias: ScoreBias<B>,
    /// $g_{i,\,\text{index}(i-j)}$.
    #[extension_type]
    pub query_table: TableTerm<B>,
    /// $g'_{j,\,\text{index}'(i-j)}$.
    #[extension_type]
    pub key_table: TableTerm<B>,
    /// $\hat q_i \cdot \rho_{i-j}$.
    #[extension_type]
    pub distance: ProductTerm<B>,
    /// $p^Q_i \cdot p^K_j$.
    #[extension_type]
    pub untied: ProductTerm<B>,
    /// Relative values.
    #[extension_type]
    pub values: ValuesTerm<B>,
    /// CoPE's $z_{ij}$.
    #[extension_type]
    pub contextual: ContextualTerm<B>,
}

/// Fused operations of the language model. Every input is `f32`.
#[backend_extension(Flex, Autodiff)]
pub trait FusedOps: Backend {
    /// Causal attention of `q, k, v [B, H, L, D]` with position terms:
    /// $\operatorname{softmax}(c\,(QK^\top + T) + B + Z)(V + A^V)$.
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        #[extension_type] terms: AttentionTerms<Self>,
        scale: f32,
    ) -> FloatTensor<Self>;

    /// Causal attention of `q, k, v [B, H, L, D]` in two passes merged by a window $w$:
    /// $s_{ij} = q_i \cdot k_j$ for $i - j < w$, $q^{(2)}_i \cdot k^{(2)}_j$ beyond (ReRoPE,
    /// Leaky ReRoPE). Evaluation only: the result carries no gradient.
    fn fused_windowed_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        q2: FloatTensor<Self>,
        k2: FloatTensor<Self>,
        window: usize,
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

    /// RoPE (half layout) of `x [B, H, L, D]` with constant `cos`, `sin` `[L, D]` (or per
    /// sequence, `[B, L, D]`); with
    /// `pairs_interleaved`, the pairs $(x_{2j}, x_{2j+1})$ rotated and written in the half
    /// layout ([`rope::rope_half`]).
    fn fused_rope(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        pairs_interleaved: bool,
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
        terms: AttentionTerms<Flex>,
        scale: f32,
    ) -> FlexTensor {
        attention_forward_flex((&q, &k, &v), &terms, scale).0
    }

    fn fused_windowed_attention(
        q: FlexTensor,
        k: FlexTensor,
        v: FlexTensor,
        q2: FlexTensor,
        k2: FlexTensor,
        window: usize,
        scale: f32,
    ) -> FlexTensor {
        windowed_attention_flex((&q, &k, &v), (&q2, &k2), window, scale)
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
        terms: AttentionTerms<Self>,
        scale: f32,
    ) -> FloatTensor<Self> {
        // the terms on Flex, and the parents in the order of AttentionState::grads
        let (flex_terms, term_nodes) = on_flex(&terms);
        let qkv = (q.primitive(), k.primitive(), v.primitive());
        let (out, lse) = attention_forward_flex(qkv, &flex_terms, scale);
        let state = || AttentionState {
            q: q.primitive().clone(),
            k: k.primitive().clone(),
            v: v.primitive().clone(),
            terms: flex_terms,
            out: out.clone(),
            lse,
            scale,
        };
        let mut parents = vec![q.node(), k.node(), v.node()];
        parents.extend(term_nodes);
        record_attention::<C>(parents, out.clone(), state)
    }

    /// The Flex forward pass, untracked: an evaluation-only operation stops the gradient.
    fn fused_windowed_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        q2: FloatTensor<Self>,
        k2: FloatTensor<Self>,
        window: usize,
        scale: f32,
    ) -> FloatTensor<Self> {
        let out = windowed_attention_flex(
            (q.primitive(), k.primitive(), v.primitive()),
            (q2.primitive(), k2.primitive()),
            window,
            scale,
        );
        <Self as AutodiffBackend>::from_inner(out)
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

/// The terms of an autodiff call on Flex, and the nodes of their float tensors in the order
/// [`AttentionState`] returns their gradients: the bias's (one, or intercepts, slopes,
/// feature and row scale),
/// the query table, the key table, the relative queries and keys, the untied queries and
/// keys, the relative values' table, CoPE's embeddings.
fn on_flex<C: CheckpointStrategy>(
    terms: &AttentionTerms<Autodiff<Flex, C>>,
) -> (AttentionTerms<Flex>, Vec<NodeGuard>) {
    let mut nodes = Vec::new();
    let mut take = |t: &FloatTensor<Autodiff<Flex, C>>| {
        nodes.push(t.node());
        t.primitive().clone()
    };
    let bias = match &terms.bias {
        ScoreBias::None => ScoreBias::None,
        ScoreBias::Distance(b) => ScoreBias::Distance(take(b)),
        ScoreBias::Piecewise {
            intercepts,
            slopes,
            feature,
            row_scale,
            breakpoints,
        } => ScoreBias::Piecewise {
            intercepts: take(intercepts),
            slopes: take(slopes),
            feature: take(feature),
            row_scale: take(row_scale),
            breakpoints: breakpoints.clone(),
        },
    };
    let mut table = |t: &TableTerm<Autodiff<Flex, C>>| match t {
        TableTerm::None => TableTerm::None,
        TableTerm::Table { table, index } => TableTerm::Table {
            table: take(table),
            index: index.clone(),
        },
    };
    let query_table = table(&terms.query_table);
    let key_table = table(&terms.key_table);
    let mut pair = |t: &ProductTerm<Autodiff<Flex, C>>| match t {
        ProductTerm::None => ProductTerm::None,
        ProductTerm::Pair { queries, keys } => ProductTerm::Pair {
            queries: take(queries),
            keys: take(keys),
        },
    };
    let distance = pair(&terms.distance);
    let untied = pair(&terms.untied);
    let values = match &terms.values {
        ValuesTerm::None => ValuesTerm::None,
        ValuesTerm::Table { table, index } => ValuesTerm::Table {
            table: take(table),
            index: index.clone(),
        },
    };
    let contextual = match &terms.contextual {
        ContextualTerm::None => ContextualTerm::None,
        ContextualTerm::Embeddings(e) => ContextualTerm::Embeddings(take(e)),
    };
    (
        AttentionTerms {
            bias,
            query_table,
            key_table,
            distance,
            untied,
            values,
            contextual,
        },
        nodes,
    )
}
