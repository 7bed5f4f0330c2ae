//! The Flex side of the fused operations: Flex tensors read as the slices the kernels take
//! (in place where their layout allows) and the kernels' results made Flex tensors again, one
//! forward function per operation, shared by the plain and the autodiff backend.

use burn::backend::flex::{FlexTensor, Layout};
use burn::backend::Flex;
use burn::tensor::{DType, Shape, TensorData};

use super::super::attention::{
    self, Bias, Contextual, DistanceKeys, Gathered, Piecewise, RelativeValues, Terms, Untied,
};
use super::super::heads::{AttentionDims, HeadLayout, Heads};
use super::super::{gelu, linear, nll, norm, rope};
use super::{AttentionTerms, ContextualTerm, ProductTerm, ScoreBias, TableTerm, ValuesTerm};

/// RoPE (or its adjoint) of a Flex `[B, H, L, D]` tensor, in `[B, L, H, D]` memory.
pub(super) fn rope_flex(
    x: &FlexTensor,
    (cos, sin): (&FlexTensor, &FlexTensor),
    transpose: bool,
    pairs_interleaved: bool,
) -> FlexTensor {
    let dims = dims4(x);
    let xb = HeadsBuf::new(x);
    let y = rope::rope_half(
        xb.heads(),
        &values(cos),
        &values(sin),
        dims,
        transpose,
        pairs_interleaved,
    );
    interleaved(y, &dims)
}

/// $xW + b$ (or $xW$) on Flex tensors, with the output's shape.
pub(super) fn linear_flex(x: &FlexTensor, w: &FlexTensor, b: Option<&FlexTensor>) -> FlexTensor {
    let mut shape = x.layout().shape().to_vec();
    let [n_in, n_out] = [w.layout().shape()[0], w.layout().shape()[1]];
    let b = b.map(values);
    let y = linear::linear_forward(&values(x), &values(w), b.as_deref(), n_in);
    if let Some(last) = shape.last_mut() {
        *last = n_out;
    }
    flex(y, &shape)
}

/// A Flex tensor's `f32` values in row-major order: the tensor itself where it is contiguous,
/// else a contiguous copy (one copy, kept alive here).
pub(super) enum Values<'a> {
    Borrowed(&'a [f32]),
    Copied(FlexTensor),
    Converted(Vec<f32>),
}

impl std::ops::Deref for Values<'_> {
    type Target = [f32];

    fn deref(&self) -> &[f32] {
        match self {
            Values::Borrowed(s) => s,
            Values::Copied(t) => t.as_slice::<f32>().unwrap_or(&[]),
            Values::Converted(v) => v,
        }
    }
}

pub(super) fn values(t: &FlexTensor) -> Values<'_> {
    if let Some(s) = t.as_slice::<f32>() {
        return Values::Borrowed(s);
    }
    let c = t.to_contiguous();
    if c.as_slice::<f32>().is_some() {
        return Values::Copied(c);
    }
    // not f32: convert through TensorData
    Values::Converted(
        c.into_data()
            .convert::<f32>()
            .try_into_vec::<f32>()
            .unwrap_or_default(),
    )
}

/// Integer values of a Flex tensor as indices.
pub(super) fn indices(t: &FlexTensor) -> Vec<usize> {
    let data = t.to_contiguous().into_data().convert::<i64>();
    data.try_into_vec::<i64>()
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.max(0) as usize)
        .collect()
}

/// A new Flex tensor from values and a shape.
pub(super) fn flex(values: Vec<f32>, shape: &[usize]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, Shape::from(shape.to_vec())))
}

pub(super) fn dims4(t: &FlexTensor) -> AttentionDims {
    let s = t.layout().shape();
    AttentionDims {
        batch: s[0],
        heads: s[1],
        len: s[2],
        dim: s[3],
    }
}

/// A `[B, H, L, D]` Flex tensor as the kernels read it: the tensor itself where its rows are
/// contiguous and its strides non-negative (for example the heads of a Linear output viewed
/// with `swap_dims`, read in place), else a contiguous `f32` copy.
pub(super) struct HeadsBuf(FlexTensor);

impl HeadsBuf {
    pub(super) fn new(t: &FlexTensor) -> Self {
        let strides = t.layout().strides();
        let direct = t.dtype() == DType::F32
            && strides.len() == 4
            && strides[3] == 1
            && strides.iter().all(|&s| s >= 0);
        if direct {
            return Self(t.clone());
        }
        let shape = t.layout().shape().to_vec();
        Self(flex(values(t).to_vec(), &shape))
    }

    pub(super) fn heads(&self) -> Heads<'_> {
        let layout = self.0.layout();
        let s = layout.strides();
        Heads {
            data: self.0.storage::<f32>(),
            layout: HeadLayout {
                offset: layout.start_offset(),
                batch: s[0] as usize,
                head: s[1] as usize,
                row: s[2] as usize,
            },
        }
    }
}

/// `[B, H, L, D]` values held in `[B, L, H, D]` memory (what the kernels write) as a Flex
/// tensor of shape `[B, H, L, D]`: swapping axes 1 and 2 afterwards costs no copy.
pub(super) fn interleaved(values: Vec<f32>, dims: &AttentionDims) -> FlexTensor {
    let (b, h, l, d) = (dims.batch, dims.heads, dims.len, dims.dim);
    let strides = vec![(l * h * d) as isize, d as isize, (h * d) as isize, 1];
    flex(values, &[b * l * h * d]).with_layout(Layout::new(
        Shape::from(vec![b, h, l, d]),
        strides,
        0,
    ))
}

/// The values of the terms' tensors, held while the kernel's [`Terms`] borrow them.
pub(super) struct TermValues<'a> {
    terms: &'a AttentionTerms<Flex>,
    /// The bias (or the piecewise intercepts), and the piecewise slopes, feature and row scale.
    bias: Option<Values<'a>>,
    piecewise: Option<[Values<'a>; 3]>,
    query_table: Option<Values<'a>>,
    key_table: Option<Values<'a>>,
    distance_queries: Option<HeadsBuf>,
    distance_keys: Option<Values<'a>>,
    untied: Option<(Values<'a>, Values<'a>)>,
    values_table: Option<Values<'a>>,
    /// CoPE's embeddings and their rows $P$.
    contextual: Option<(Values<'a>, usize)>,
}

impl<'a> TermValues<'a> {
    pub(super) fn new(terms: &'a AttentionTerms<Flex>) -> Self {
        let (bias, piecewise) = match &terms.bias {
            ScoreBias::None => (None, None),
            ScoreBias::Distance(b) => (Some(values(b)), None),
            ScoreBias::Piecewise {
                intercepts,
                slopes,
                feature,
                row_scale,
                ..
            } => (
                Some(values(intercepts)),
                Some([values(slopes), values(feature), values(row_scale)]),
            ),
        };
        let table = |t: &'a TableTerm<Flex>| match t {
            TableTerm::None => None,
            TableTerm::Table { table, .. } => Some(values(table)),
        };
        let (distance_queries, distance_keys) = match &terms.distance {
            ProductTerm::None => (None, None),
            ProductTerm::Pair { queries, keys } => {
                (Some(HeadsBuf::new(queries)), Some(values(keys)))
            }
        };
        let values_table = match &terms.values {
            ValuesTerm::None => None,
            ValuesTerm::Table { table, .. } => Some(values(table)),
        };
        Self {
            terms,
            bias,
            piecewise,
            query_table: table(&terms.query_table),
            key_table: table(&terms.key_table),
            distance_queries,
            distance_keys,
            untied: match &terms.untied {
                ProductTerm::None => None,
                ProductTerm::Pair { queries, keys } => Some((values(queries), values(keys))),
            },
            values_table,
            contextual: match &terms.contextual {
                ContextualTerm::None => None,
                ContextualTerm::Embeddings(e) => Some((values(e), e.layout().shape()[0])),
            },
        }
    }

    /// The terms as the kernels read them.
    pub(super) fn terms(&self) -> Terms<'_> {
        let bias = match (&self.terms.bias, &self.bias, &self.piecewise) {
            (ScoreBias::Distance(_), Some(b), _) => Bias::Distance(b),
            (ScoreBias::Piecewise { breakpoints, .. }, Some(a), Some([s, psi, nu])) => {
                Bias::Piecewise(Piecewise {
                    feature: psi,
                    row_scale: nu,
                    breakpoints,
                    intercepts: a,
                    slopes: s,
                })
            }
            _ => Bias::None,
        };
        fn gathered<'b>(t: &'b TableTerm<Flex>, v: &'b Option<Values<'_>>) -> Option<Gathered<'b>> {
            match (t, v) {
                (TableTerm::Table { table, index }, Some(v)) => Some(Gathered {
                    table: v,
                    rows: table.layout().shape()[3],
                    index,
                }),
                _ => None,
            }
        }
        Terms {
            bias,
            query_table: gathered(&self.terms.query_table, &self.query_table),
            key_table: gathered(&self.terms.key_table, &self.key_table),
            distance: self
                .distance_queries
                .as_ref()
                .zip(self.distance_keys.as_deref())
                .map(|(q, keys)| DistanceKeys {
                    queries: q.heads(),
                    keys,
                }),
            untied: self.untied.as_ref().map(|(q, k)| Untied {
                queries: q,
                keys: k,
            }),
            values: match (&self.terms.values, &self.values_table) {
                (ValuesTerm::Table { table, index }, Some(v)) => Some(RelativeValues {
                    table: v,
                    rows: table.layout().shape()[0],
                    index,
                }),
                _ => None,
            },
            window: None,
            contextual: self.contextual.as_ref().map(|(e, positions)| Contextual {
                embeddings: e,
                positions: *positions,
            }),
        }
    }
}

/// The forward pass on Flex tensors: output and log-sum-exp.
pub(super) fn attention_forward_flex(
    (q, k, v): (&FlexTensor, &FlexTensor, &FlexTensor),
    terms: &AttentionTerms<Flex>,
    scale: f32,
) -> (FlexTensor, FlexTensor) {
    let dims = dims4(q);
    let (qb, kb, vb) = (HeadsBuf::new(q), HeadsBuf::new(k), HeadsBuf::new(v));
    let qkv = (qb.heads(), kb.heads(), vb.heads());
    let held = TermValues::new(terms);
    let (out, lse) = attention::attention_forward(qkv, &held.terms(), scale, dims);
    (
        interleaved(out, &dims),
        flex(lse, &[dims.batch, dims.heads, dims.len]),
    )
}

/// The two-pass forward pass on Flex tensors ([`attention::Window`]): $q \cdot k$ for the pairs
/// $i - j < w$, $q^{(2)} \cdot k^{(2)}$ beyond; the output only.
pub(super) fn windowed_attention_flex(
    (q, k, v): (&FlexTensor, &FlexTensor, &FlexTensor),
    (q2, k2): (&FlexTensor, &FlexTensor),
    window: usize,
    scale: f32,
) -> FlexTensor {
    let dims = dims4(q);
    let (qb, kb, vb) = (HeadsBuf::new(q), HeadsBuf::new(k), HeadsBuf::new(v));
    let (q2b, k2b) = (HeadsBuf::new(q2), HeadsBuf::new(k2));
    let terms = Terms {
        window: Some(attention::Window {
            queries: q2b.heads(),
            keys: k2b.heads(),
            window,
        }),
        ..Terms::default()
    };
    let qkv = (qb.heads(), kb.heads(), vb.heads());
    let (out, _) = attention::attention_forward(qkv, &terms, scale, dims);
    interleaved(out, &dims)
}

/// GELU on a Flex tensor: $y$ and $\Phi(x)$.
pub(super) fn gelu_flex(x: &FlexTensor) -> (FlexTensor, FlexTensor) {
    let shape = x.layout().shape().to_vec();
    let (y, cdf) = gelu::gelu_forward(&values(x));
    (flex(y, &shape), flex(cdf, &shape))
}

/// LayerNorm on Flex tensors: $y$ and the per-row $(\mu, 1/\sigma)$ `[rows, 2]`.
pub(super) fn layer_norm_flex(
    x: &FlexTensor,
    gamma: &FlexTensor,
    beta: &FlexTensor,
    eps: f32,
) -> (FlexTensor, FlexTensor) {
    let shape = x.layout().shape().to_vec();
    let (y, stats) = norm::layer_norm_forward(&values(x), &values(gamma), &values(beta), eps);
    let rows = stats.len() / 2;
    (flex(y, &shape), flex(stats, &[rows, 2]))
}

/// The negative log-likelihood of `targets` under Flex `logits [N, V]`: `nll [N]` and the
/// per-row log-sum-exp `[N]`.
pub(super) fn nll_flex(logits: &FlexTensor, targets: &[usize]) -> (FlexTensor, FlexTensor) {
    let shape = logits.layout().shape();
    let vocab = shape[shape.len() - 1];
    let (nll, lse) = nll::nll_forward(&values(logits), targets, vocab);
    let rows = targets.len();
    (flex(nll, &[rows]), flex(lse, &[rows]))
}
