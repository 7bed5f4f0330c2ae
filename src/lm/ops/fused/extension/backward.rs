//! The backward steps of the fused operations on `Autodiff<Flex>`, written once: [`record`]
//! puts an operation's output on burn's autodiff graph with the state its backward step needs,
//! and [`Step`] is that backward step for every operation, given the function that maps the
//! saved state and the output's gradient to the gradients of the parents,
//!
//! ```math
//! \partial x_k = \Big(\frac{\partial y}{\partial x_k}\Big)^{\!\top} \partial y,
//! ```
//!
//! one small function per operation below.

use std::fmt::Debug;
use std::sync::Arc;

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, NodeGuard, Ops, OpsKind};
use burn::backend::flex::FlexTensor;
use burn::backend::tensor::FloatTensor;
use burn::backend::{Autodiff, Flex};

use super::super::attention::{self, BiasGrads};
use super::super::{gelu, linear, nll, norm};
use super::flex::{dims4, flex, interleaved, rope_flex, values, HeadsBuf, TermValues};
use super::{AttentionTerms, ContextualTerm, ProductTerm, ScoreBias, TableTerm, ValuesTerm};

/// The gradients of an operation's `N` parents from the state saved by its forward pass and
/// the gradient of its output, given which parents take part (`None` for those that do not,
/// or get none).
pub(super) type Grads<S, const N: usize> = fn(S, &FlexTensor, [bool; N]) -> [Option<FlexTensor>; N];

/// The backward step of a fused operation with `N` parents.
#[derive(Debug)]
struct Step<S, const N: usize>(Grads<S, N>);

impl<S, const N: usize> Backward<Flex, N> for Step<S, N>
where
    S: Clone + Send + Debug + 'static,
{
    type State = S;

    /// Consumes the output's gradient and registers the gradient of every parent that takes
    /// part, in the order of the parents.
    fn backward(self, ops: Ops<S, N>, grads: &mut Gradients, _checkpointer: &mut Checkpointer) {
        let dy = grads.consume::<Flex>(&ops.node);
        let ids = ops.parents.map(|parent| parent.map(|node| node.id));
        let wanted = ids.map(|id| id.is_some());
        if !wanted.contains(&true) {
            return;
        }
        for (id, g) in ids.into_iter().zip((self.0)(ops.state, &dy, wanted)) {
            if let (Some(id), Some(g)) = (id, g) {
                grads.register::<Flex>(id, g);
            }
        }
    }
}

/// The output `y` of an operation of `parents` on the autodiff graph: with the backward step
/// `grads` and the state `state()` when some parent takes part in the gradient, as a leaf of
/// the graph otherwise (and `state` never called).
pub(super) fn record<S, C, const N: usize>(
    grads: Grads<S, N>,
    parents: [NodeGuard; N],
    y: FlexTensor,
    state: impl FnOnce() -> S,
) -> FloatTensor<Autodiff<Flex, C>>
where
    S: Clone + Send + Debug + 'static,
    C: CheckpointStrategy,
{
    match Step(grads).prepare::<C>(parents).compute_bound().stateful() {
        OpsKind::Tracked(prep) => prep.finish(state(), y),
        OpsKind::UnTracked(prep) => prep.finish(y),
    }
}

/// GELU, from the input and $\Phi(\text{input})$:
/// $\partial x = \partial y\,(\Phi(x) + x\varphi(x))$.
pub(super) fn gelu_grads(
    (x, cdf): (FlexTensor, FlexTensor),
    dy: &FlexTensor,
    _: [bool; 1],
) -> [Option<FlexTensor>; 1] {
    let shape = x.layout().shape().to_vec();
    let dx = gelu::gelu_backward(&values(&x), &values(&cdf), &values(dy));
    [Some(flex(dx, &shape))]
}

/// LayerNorm, from the input, $\gamma$ and the per-row $(\mu, 1/\sigma)$:
/// $(\partial x, \partial\gamma, \partial\beta)$.
pub(super) fn layer_norm_grads(
    (x, gamma, stats): (FlexTensor, FlexTensor, FlexTensor),
    dy: &FlexTensor,
    _: [bool; 3],
) -> [Option<FlexTensor>; 3] {
    let shape = x.layout().shape().to_vec();
    let d = gamma.layout().shape()[0];
    let (dx, dgamma, dbeta) =
        norm::layer_norm_backward(&values(&x), &values(dy), &values(&gamma), &values(&stats));
    [
        Some(flex(dx, &shape)),
        Some(flex(dgamma, &[d])),
        Some(flex(dbeta, &[d])),
    ]
}

/// The loss, from the logits, the targets and the per-row log-sum-exp:
/// $\partial x = \partial\ell\,(\operatorname{softmax}(x) - \text{one-hot}(t))$.
pub(super) fn nll_grads(
    (logits, targets, lse): (FlexTensor, Arc<Vec<usize>>, FlexTensor),
    dnll: &FlexTensor,
    _: [bool; 1],
) -> [Option<FlexTensor>; 1] {
    let shape = logits.layout().shape().to_vec();
    let vocab = shape[shape.len() - 1];
    let dx = nll::nll_backward(
        &values(&logits),
        &targets,
        &values(&lse),
        &values(dnll),
        vocab,
    );
    [Some(flex(dx, &shape))]
}

/// $xW$ (`N = 2`: $x$, $W$) or $xW + b$ (`N = 3`), from $x$ and $W$:
/// $\partial x = \partial y\,W^\top$, $\partial W = x^\top \partial y$, and
/// $\partial b = \sum \partial y$ when $b$ takes part.
pub(super) fn linear_grads<const N: usize>(
    (x, w): (FlexTensor, FlexTensor),
    dy: &FlexTensor,
    wanted: [bool; N],
) -> [Option<FlexTensor>; N] {
    let x_shape = x.layout().shape().to_vec();
    let w_shape = w.layout().shape().to_vec();
    let want_bias = wanted.get(2).copied().unwrap_or(false);
    let (dx, dw, db) =
        linear::linear_backward(&values(&x), &values(&w), &values(dy), w_shape[0], want_bias);
    let db = want_bias.then(|| flex(db, &[w_shape[1]]));
    first([Some(flex(dx, &x_shape)), Some(flex(dw, &w_shape)), db])
}

/// RoPE, from the constants `cos`, `sin` and the layout of the pairs: the adjoint rotation
/// of the output's gradient.
pub(super) fn rope_grads(
    (cos, sin, pairs_interleaved): (FlexTensor, FlexTensor, bool),
    dy: &FlexTensor,
    _: [bool; 1],
) -> [Option<FlexTensor>; 1] {
    [Some(rope_flex(dy, (&cos, &sin), true, pairs_interleaved))]
}

/// The fused attention with `N` parents (q, k, v, then the float tensors of its terms in
/// the order of [`AttentionState::grads`]); the bias's gradients only where they take part:
/// the bias (or the intercepts and slopes, parents 3 and 4), a piecewise bias's feature and
/// row scale (parents 5 and 6).
fn attention_grads<const N: usize>(
    state: AttentionState,
    dout: &FlexTensor,
    wanted: [bool; N],
) -> [Option<FlexTensor>; N] {
    let takes_part = |parent: usize| wanted.get(parent).copied().unwrap_or(false);
    let want = match state.terms.bias {
        ScoreBias::None => BiasGrads::default(),
        ScoreBias::Distance(_) => BiasGrads {
            bias: takes_part(3),
            feature: false,
        },
        ScoreBias::Piecewise { .. } => BiasGrads {
            bias: takes_part(3) || takes_part(4),
            feature: takes_part(5) || takes_part(6),
        },
    };
    let mut all = state.grads(dout, want).into_iter();
    std::array::from_fn(|_| all.next().flatten())
}

/// The fused attention's output `out` on the graph with its `parents` (q, k, v and the
/// terms' float tensors, 3 to 15 of them).
pub(super) fn record_attention<C: CheckpointStrategy>(
    parents: Vec<NodeGuard>,
    out: FlexTensor,
    state: impl FnOnce() -> AttentionState,
) -> FloatTensor<Autodiff<Flex, C>> {
    macro_rules! with_parents {
        ($($n:literal),*) => {
            match parents.len() {
                $($n => {
                    let Ok(parents) = <[NodeGuard; $n]>::try_from(parents) else {
                        unreachable!("{} parents", $n)
                    };
                    record::<_, C, $n>(attention_grads::<$n>, parents, out, state)
                })*
                n => panic!("fused attention: {n} parents, expected 3 to 15"),
            }
        };
    }
    with_parents!(3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
}

/// The first `N` of `M` gradients (the parents an operation has).
fn first<const M: usize, const N: usize>(all: [Option<FlexTensor>; M]) -> [Option<FlexTensor>; N] {
    let mut all = all.into_iter();
    std::array::from_fn(|_| all.next().flatten())
}

/// Saved for the attention backward: inputs, terms, output and log-sum-exp.
#[derive(Debug, Clone)]
pub(super) struct AttentionState {
    pub(super) q: FlexTensor,
    pub(super) k: FlexTensor,
    pub(super) v: FlexTensor,
    pub(super) terms: AttentionTerms<Flex>,
    pub(super) out: FlexTensor,
    pub(super) lse: FlexTensor,
    pub(super) scale: f32,
}

impl AttentionState {
    /// The gradients of $q, k, v$ and of every float tensor of the terms, in the order of
    /// their parents: the bias (or the intercepts, slopes, feature and row scale), the query
    /// table, the key table, the relative queries and keys, the untied queries and keys, the
    /// relative values' table, CoPE's embeddings. The bias's only as `want_bias` asks.
    fn grads(&self, dout: &FlexTensor, want_bias: BiasGrads) -> Vec<Option<FlexTensor>> {
        let dims = dims4(&self.q);
        let (q, k, v) = (
            HeadsBuf::new(&self.q),
            HeadsBuf::new(&self.k),
            HeadsBuf::new(&self.v),
        );
        let (out, dout) = (HeadsBuf::new(&self.out), HeadsBuf::new(dout));
        let lse = values(&self.lse);
        let held = TermValues::new(&self.terms);
        let g = attention::attention_backward(
            (q.heads(), k.heads(), v.heads()),
            (out.heads(), dout.heads(), &lse),
            &held.terms(),
            self.scale,
            dims,
            want_bias,
        );
        let shaped = |values: Vec<f32>, like: &FlexTensor| {
            (!values.is_empty()).then(|| flex(values, like.layout().shape()))
        };
        let mut grads = vec![
            Some(interleaved(g.q, &dims)),
            Some(interleaved(g.k, &dims)),
            Some(interleaved(g.v, &dims)),
        ];
        match &self.terms.bias {
            ScoreBias::None => {}
            ScoreBias::Distance(b) => grads.push(shaped(g.bias, b)),
            ScoreBias::Piecewise {
                intercepts,
                slopes,
                feature,
                row_scale,
                ..
            } => {
                grads.push(shaped(g.bias, intercepts));
                grads.push(shaped(g.slopes, slopes));
                grads.push(shaped(g.feature, feature));
                grads.push(shaped(g.row_scale, row_scale));
            }
        }
        for (t, dg) in [
            (&self.terms.query_table, g.query_table),
            (&self.terms.key_table, g.key_table),
        ] {
            if let TableTerm::Table { table, .. } = t {
                grads.push(shaped(dg, table));
            }
        }
        if let ProductTerm::Pair { keys, .. } = &self.terms.distance {
            grads.push(Some(interleaved(g.distance_queries, &dims)));
            grads.push(shaped(g.distance_keys, keys));
        }
        if let ProductTerm::Pair { queries, keys } = &self.terms.untied {
            grads.push(shaped(g.untied_queries, queries));
            grads.push(shaped(g.untied_keys, keys));
        }
        match &self.terms.values {
            ValuesTerm::None => {}
            ValuesTerm::Table { table, .. } => grads.push(shaped(g.values, table)),
        }
        match &self.terms.contextual {
            ContextualTerm::None => {}
            ContextualTerm::Embeddings(e) => grads.push(shaped(g.contextual, e)),
        }
        grads
    }
}
