//! The fused operations as a burn backend extension: one trait, implemented on the Flex CPU
//! backend by the slice kernels of [`super`] and on `Autodiff<Flex>` with hand-written backward steps, so the
//! operations sit inside burn's own autograd.

use burn::backend::autodiff::checkpoint::base::Checkpointer;
use burn::backend::autodiff::checkpoint::strategy::CheckpointStrategy;
use burn::backend::autodiff::grads::Gradients;
use burn::backend::autodiff::ops::{Backward, Ops, OpsKind};
use burn::backend::autodiff::NodeId;
use burn::backend::flex::{FlexTensor, Layout};
use burn::backend::tensor::{FloatTensor, IntTensor};
use burn::backend::{backend_extension, Autodiff, Backend, ExtensionType, Flex};
use burn::tensor::{DType, Shape, TensorData};

use super::attention::{self, Bias, RelativeValues};
use super::heads::{AttentionDims, HeadLayout, Heads};
use super::{gather, gelu, linear, nll, norm, rope};
use std::sync::Arc;

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

/// The shape `[B, H, L, R]` of a gather's input, and its index as `usize` values.
///
/// # Panics
/// When the index is not `[L, L]` or an entry is not below `R`: the model builds both, so
/// either is a bug, not an input error.
fn gather_parts(a: &FlexTensor, index: &FlexTensor) -> ([usize; 4], Vec<usize>) {
    let s = a.layout().shape();
    let dims = [s[0], s[1], s[2], s[3]];
    let idx = indices(index);
    assert!(
        idx.len() == dims[2] * dims[2] && idx.iter().all(|&c| c < dims[3]),
        "relative gather: index of {} entries for L = {}, R = {}",
        idx.len(),
        dims[2],
        dims[3]
    );
    (dims, idx)
}

/// [`gather::relative_gather`] on Flex tensors.
fn relative_gather_flex(
    a: &FlexTensor,
    dims: [usize; 4],
    idx: &[usize],
    transposed: bool,
) -> FlexTensor {
    let [b, h, l, r] = dims;
    let y = gather::relative_gather(&values(a), idx, (l, r), transposed);
    flex(y, &[b, h, l, l])
}

/// RoPE (or its adjoint) of a Flex `[B, H, L, D]` tensor, in `[B, L, H, D]` memory.
fn rope_flex(
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
fn linear_flex(x: &FlexTensor, w: &FlexTensor, b: Option<&FlexTensor>) -> FlexTensor {
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
enum Values<'a> {
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

fn values(t: &FlexTensor) -> Values<'_> {
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
fn indices(t: &FlexTensor) -> Vec<usize> {
    let data = t.to_contiguous().into_data().convert::<i64>();
    data.try_into_vec::<i64>()
        .unwrap_or_default()
        .into_iter()
        .map(|v| v.max(0) as usize)
        .collect()
}

/// A new Flex tensor from values and a shape.
fn flex(values: Vec<f32>, shape: &[usize]) -> FlexTensor {
    FlexTensor::from_data(TensorData::new(values, Shape::from(shape.to_vec())))
}

fn dims4(t: &FlexTensor) -> AttentionDims {
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
struct HeadsBuf(FlexTensor);

impl HeadsBuf {
    fn new(t: &FlexTensor) -> Self {
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

    fn heads(&self) -> Heads<'_> {
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
fn interleaved(values: Vec<f32>, dims: &AttentionDims) -> FlexTensor {
    let (b, h, l, d) = (dims.batch, dims.heads, dims.len, dims.dim);
    let strides = vec![(l * h * d) as isize, d as isize, (h * d) as isize, 1];
    flex(values, &[b * l * h * d]).with_layout(Layout::new(
        Shape::from(vec![b, h, l, d]),
        strides,
        0,
    ))
}

/// Relative value vectors as the attention kernels take them: the table `[R, D]` and the
/// index `[L, L]`.
type ValuesParts = (FlexTensor, Arc<Vec<usize>>);

/// The index of relative values as `usize` values, checked against the table's rows.
///
/// # Panics
/// When an entry is not below `R`: the model builds the index, so that is a bug.
fn value_index(table: &FlexTensor, index: &FlexTensor) -> Arc<Vec<usize>> {
    let rows = table.layout().shape()[0];
    let idx = indices(index);
    assert!(
        idx.iter().all(|&c| c < rows),
        "relative values: index entry not below R = {rows}"
    );
    Arc::new(idx)
}

/// The forward pass on Flex tensors: output and log-sum-exp.
fn attention_forward_flex(
    (q, k, v): (&FlexTensor, &FlexTensor, &FlexTensor),
    bias: &ScoreBias<Flex>,
    rel_values: Option<&ValuesParts>,
    scale: f32,
) -> (FlexTensor, FlexTensor) {
    let dims = dims4(q);
    let (qb, kb, vb) = (HeadsBuf::new(q), HeadsBuf::new(k), HeadsBuf::new(v));
    let qkv = (qb.heads(), kb.heads(), vb.heads());
    let table = rel_values.map(|(t, _)| values(t));
    let rv = rel_values
        .zip(table.as_deref())
        .map(|((t, idx), table)| RelativeValues {
            table,
            index: idx,
            rows: t.layout().shape()[0],
        });
    let (out, lse) = match bias {
        ScoreBias::None => attention::attention_forward(qkv, (Bias::None, rv), scale, dims),
        ScoreBias::Heads(b) => {
            attention::attention_forward(qkv, (Bias::Heads(&values(b)), rv), scale, dims)
        }
        ScoreBias::Batch(b) => {
            attention::attention_forward(qkv, (Bias::Batch(&values(b)), rv), scale, dims)
        }
    };
    (
        interleaved(out, &dims),
        flex(lse, &[dims.batch, dims.heads, dims.len]),
    )
}

/// GELU on a Flex tensor: $y$ and $\Phi(x)$.
fn gelu_flex(x: &FlexTensor) -> (FlexTensor, FlexTensor) {
    let shape = x.layout().shape().to_vec();
    let (y, cdf) = gelu::gelu_forward(&values(x));
    (flex(y, &shape), flex(cdf, &shape))
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
        let shape = x.layout().shape().to_vec();
        let (y, _) = norm::layer_norm_forward(&values(&x), &values(&gamma), &values(&beta), eps);
        flex(y, &shape)
    }

    fn fused_nll(logits: FlexTensor, targets: FlexTensor) -> FlexTensor {
        let shape = logits.layout().shape().to_vec();
        let vocab = shape[shape.len() - 1];
        let t = indices(&targets);
        let (nll, _) = nll::nll_forward(&values(&logits), &t, vocab);
        flex(nll, &[t.len()])
    }
}

/// Saved for the attention backward: inputs, bias, output and log-sum-exp.
#[derive(Debug, Clone)]
struct AttentionState {
    q: FlexTensor,
    k: FlexTensor,
    v: FlexTensor,
    bias: Option<(FlexTensor, bool)>,
    rel_values: Option<ValuesParts>,
    out: FlexTensor,
    lse: FlexTensor,
    scale: f32,
}

/// The gradients of the fused attention: $(\partial q, \partial k, \partial v)$, and of the
/// bias and the relative values' table where they take part.
type AttentionGradTensors = (
    FlexTensor,
    FlexTensor,
    FlexTensor,
    Option<FlexTensor>,
    Option<FlexTensor>,
);

impl AttentionState {
    /// Registers $(\partial q, \partial k, \partial v, \partial b, \partial a^V)$ for the
    /// parents that take part (`ids` of q, k, v, the bias and the relative values' table).
    fn register_grads(&self, grads: &mut Gradients, ids: [Option<NodeId>; 5], dout: &FlexTensor) {
        let (dq, dk, dv, db, dt) = self.grads(dout, ids[3].is_some());
        for (id, g) in ids.into_iter().zip([Some(dq), Some(dk), Some(dv), db, dt]) {
            if let (Some(id), Some(g)) = (id, g) {
                grads.register::<Flex>(id, g);
            }
        }
    }

    /// $(\partial q, \partial k, \partial v, \partial b)$ from the output gradient.
    fn grads(&self, dout: &FlexTensor, want_bias: bool) -> AttentionGradTensors {
        let dims = dims4(&self.q);
        let (q, k, v) = (
            HeadsBuf::new(&self.q),
            HeadsBuf::new(&self.k),
            HeadsBuf::new(&self.v),
        );
        let (out, dout) = (HeadsBuf::new(&self.out), HeadsBuf::new(dout));
        let lse = values(&self.lse);
        let bias_values = self
            .bias
            .as_ref()
            .map(|(b, per_batch)| (values(b), *per_batch));
        let bias = match &bias_values {
            None => Bias::None,
            Some((b, false)) => Bias::Heads(b),
            Some((b, true)) => Bias::Batch(b),
        };
        let table = self.rel_values.as_ref().map(|(t, _)| values(t));
        let rv = self
            .rel_values
            .as_ref()
            .zip(table.as_deref())
            .map(|((t, idx), table)| RelativeValues {
                table,
                index: idx,
                rows: t.layout().shape()[0],
            });
        let g = attention::attention_backward(
            (q.heads(), k.heads(), v.heads()),
            (out.heads(), dout.heads(), &lse),
            (bias, rv),
            self.scale,
            dims,
            want_bias,
        );
        let dbias = self.bias.as_ref().filter(|_| want_bias).map(|(b, _)| {
            let s = b.layout().shape().to_vec();
            flex(g.bias, &s)
        });
        let dtable = self.rel_values.as_ref().map(|(t, _)| {
            let s = t.layout().shape().to_vec();
            flex(g.values, &s)
        });
        (
            interleaved(g.q, &dims),
            interleaved(g.k, &dims),
            interleaved(g.v, &dims),
            dbias,
            dtable,
        )
    }
}

/// The backward step of the fused attention with `N` parents: q, k, v, then the bias
/// (`N >= 4`) and the relative values' table (`N = 5`).
#[derive(Debug)]
struct AttentionBackward<const N: usize>;

impl<const N: usize> Backward<Flex, N> for AttentionBackward<N> {
    type State = AttentionState;

    fn backward(
        self,
        ops: Ops<Self::State, N>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let mut ids = [None; 5];
        for (id, parent) in ids.iter_mut().zip(&ops.parents) {
            *id = parent.as_ref().map(|n| n.id);
        }
        let dout = grads.consume::<Flex>(&ops.node);
        ops.state.register_grads(grads, ids, &dout);
    }
}

/// The backward step of a one-input operation: consumes the output's gradient and, when the
/// input takes part, registers `input_grad(state, output gradient)` as its gradient.
fn one_input_backward<S>(
    ops: Ops<S, 1>,
    grads: &mut Gradients,
    input_grad: impl FnOnce(S, &FlexTensor) -> FlexTensor,
) {
    let [node] = ops.parents;
    let dy = grads.consume::<Flex>(&ops.node);
    if let Some(node) = node {
        grads.register::<Flex>(node.id, input_grad(ops.state, &dy));
    }
}

#[derive(Debug)]
struct GeluBackward;

impl Backward<Flex, 1> for GeluBackward {
    /// Input and $\Phi(\text{input})$.
    type State = (FlexTensor, FlexTensor);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        one_input_backward(ops, grads, |(x, cdf), dy| {
            let shape = x.layout().shape().to_vec();
            flex(
                gelu::gelu_backward(&values(&x), &values(&cdf), &values(dy)),
                &shape,
            )
        });
    }
}

#[derive(Debug)]
struct LayerNormBackward;

impl Backward<Flex, 3> for LayerNormBackward {
    /// Input, weight, and the per-row (mean, 1/std).
    type State = (FlexTensor, FlexTensor, FlexTensor);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let [nx, ngamma, nbeta] = ops.parents;
        let dy = grads.consume::<Flex>(&ops.node);
        let (x, gamma, stats) = ops.state;
        let shape = x.layout().shape().to_vec();
        let d = gamma.layout().shape()[0];
        let (dx, dgamma, dbeta) =
            norm::layer_norm_backward(&values(&x), &values(&dy), &values(&gamma), &values(&stats));
        if let Some(node) = nx {
            grads.register::<Flex>(node.id, flex(dx, &shape));
        }
        if let Some(node) = ngamma {
            grads.register::<Flex>(node.id, flex(dgamma, &[d]));
        }
        if let Some(node) = nbeta {
            grads.register::<Flex>(node.id, flex(dbeta, &[d]));
        }
    }
}

#[derive(Debug)]
struct NllBackward;

impl Backward<Flex, 1> for NllBackward {
    /// Logits, targets, per-row log-sum-exp.
    type State = (FlexTensor, Arc<Vec<usize>>, FlexTensor);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        one_input_backward(ops, grads, |(logits, targets, lse), dnll| {
            let shape = logits.layout().shape().to_vec();
            let vocab = shape[shape.len() - 1];
            let dx = nll::nll_backward(
                &values(&logits),
                &targets,
                &values(&lse),
                &values(dnll),
                vocab,
            );
            flex(dx, &shape)
        });
    }
}

/// Registers the gradients of $xW$ (+ $b$) for the parents that take part: `ids` of $x$,
/// $W$ and $b$.
fn register_linear_grads(
    grads: &mut Gradients,
    [nx, nw, nb]: [Option<NodeId>; 3],
    (x, w): (FlexTensor, FlexTensor),
    dy: &FlexTensor,
) {
    let x_shape = x.layout().shape().to_vec();
    let w_shape = w.layout().shape().to_vec();
    let (dx, dw, db) = linear::linear_backward(
        &values(&x),
        &values(&w),
        &values(dy),
        w_shape[0],
        nb.is_some(),
    );
    if let Some(id) = nx {
        grads.register::<Flex>(id, flex(dx, &x_shape));
    }
    if let Some(id) = nw {
        grads.register::<Flex>(id, flex(dw, &w_shape));
    }
    if let Some(id) = nb {
        grads.register::<Flex>(id, flex(db, &[w_shape[1]]));
    }
}

#[derive(Debug)]
struct LinearBackward;

impl Backward<Flex, 3> for LinearBackward {
    /// Input and weight.
    type State = (FlexTensor, FlexTensor);

    fn backward(
        self,
        ops: Ops<Self::State, 3>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let dy = grads.consume::<Flex>(&ops.node);
        let ids = ops.parents.map(|n| n.map(|n| n.id));
        register_linear_grads(grads, ids, ops.state, &dy);
    }
}

#[derive(Debug)]
struct ProductBackward;

impl Backward<Flex, 2> for ProductBackward {
    /// Input and weight.
    type State = (FlexTensor, FlexTensor);

    fn backward(
        self,
        ops: Ops<Self::State, 2>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        let dy = grads.consume::<Flex>(&ops.node);
        let [nx, nw] = ops.parents.map(|n| n.map(|n| n.id));
        register_linear_grads(grads, [nx, nw, None], ops.state, &dy);
    }
}

#[derive(Debug)]
struct RopeBackward;

impl Backward<Flex, 1> for RopeBackward {
    /// cos and sin (constants), and whether the pairs are interleaved.
    type State = (FlexTensor, FlexTensor, bool);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        one_input_backward(ops, grads, |(cos, sin, pairs_interleaved), dy| {
            rope_flex(dy, (&cos, &sin), true, pairs_interleaved)
        });
    }
}

#[derive(Debug)]
struct RelativeGatherBackward;

impl Backward<Flex, 1> for RelativeGatherBackward {
    /// The input's shape `[B, H, L, R]`, the index and the direction.
    type State = ([usize; 4], Arc<Vec<usize>>, bool);

    fn backward(
        self,
        ops: Ops<Self::State, 1>,
        grads: &mut Gradients,
        _checkpointer: &mut Checkpointer,
    ) {
        one_input_backward(ops, grads, |([b, h, l, r], idx, transposed), dy| {
            let da = gather::relative_gather_backward(&values(dy), &idx, (l, r), transposed);
            flex(da, &[b, h, l, r])
        });
    }
}

impl<C: CheckpointStrategy> FusedOps for Autodiff<Flex, C> {
    fn fused_relative_gather(
        a: FloatTensor<Self>,
        index: IntTensor<Self>,
        transposed: bool,
    ) -> FloatTensor<Self> {
        let (dims, idx) = gather_parts(a.primitive(), &index);
        let y = relative_gather_flex(a.primitive(), dims, &idx, transposed);
        match RelativeGatherBackward
            .prepare::<C>([a.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish((dims, Arc::new(idx), transposed), y),
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn fused_rope(
        x: FloatTensor<Self>,
        cos: FloatTensor<Self>,
        sin: FloatTensor<Self>,
        pairs_interleaved: bool,
    ) -> FloatTensor<Self> {
        let y = rope_flex(
            x.primitive(),
            (cos.primitive(), sin.primitive()),
            false,
            pairs_interleaved,
        );
        match RopeBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = (
                    cos.primitive().clone(),
                    sin.primitive().clone(),
                    pairs_interleaved,
                );
                prep.finish(state, y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn fused_product(x: FloatTensor<Self>, w: FloatTensor<Self>) -> FloatTensor<Self> {
        let y = linear_flex(x.primitive(), w.primitive(), None);
        match ProductBackward
            .prepare::<C>([x.node(), w.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                prep.finish((x.primitive().clone(), w.primitive().clone()), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn fused_linear(
        x: FloatTensor<Self>,
        w: FloatTensor<Self>,
        b: FloatTensor<Self>,
    ) -> FloatTensor<Self> {
        let y = linear_flex(x.primitive(), w.primitive(), Some(b.primitive()));
        match LinearBackward
            .prepare::<C>([x.node(), w.node(), b.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                prep.finish((x.primitive().clone(), w.primitive().clone()), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(y),
        }
    }

    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        bias: ScoreBias<Self>,
        scale: f32,
    ) -> FloatTensor<Self> {
        let state = |bias: Option<(FlexTensor, bool)>| {
            let b = match &bias {
                None => ScoreBias::None,
                Some((b, false)) => ScoreBias::Heads(b.clone()),
                Some((b, true)) => ScoreBias::Batch(b.clone()),
            };
            let (out, lse) = attention_forward_flex(
                (q.primitive(), k.primitive(), v.primitive()),
                &b,
                None,
                scale,
            );
            (
                AttentionState {
                    q: q.primitive().clone(),
                    k: k.primitive().clone(),
                    v: v.primitive().clone(),
                    bias,
                    rel_values: None,
                    out: out.clone(),
                    lse,
                    scale,
                },
                out,
            )
        };
        let (b, per_batch) = match bias {
            ScoreBias::None => {
                return match AttentionBackward::<3>
                    .prepare::<C>([q.node(), k.node(), v.node()])
                    .compute_bound()
                    .stateful()
                {
                    OpsKind::Tracked(prep) => {
                        let (st, out) = state(None);
                        prep.finish(st, out)
                    }
                    OpsKind::UnTracked(prep) => prep.finish(state(None).1),
                };
            }
            ScoreBias::Heads(b) => (b, false),
            ScoreBias::Batch(b) => (b, true),
        };
        match AttentionBackward::<4>
            .prepare::<C>([q.node(), k.node(), v.node(), b.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (st, out) = state(Some((b.primitive().clone(), per_batch)));
                prep.finish(st, out)
            }
            OpsKind::UnTracked(prep) => {
                prep.finish(state(Some((b.primitive().clone(), per_batch))).1)
            }
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
        let (out, lse) = attention_forward_flex(
            (q.primitive(), k.primitive(), v.primitive()),
            &b,
            Some(&rel_values),
            scale,
        );
        match AttentionBackward::<5>
            .prepare::<C>([q.node(), k.node(), v.node(), bias.node(), table.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let state = AttentionState {
                    q: q.primitive().clone(),
                    k: k.primitive().clone(),
                    v: v.primitive().clone(),
                    bias: Some((bias.primitive().clone(), true)),
                    rel_values: Some(rel_values),
                    out: out.clone(),
                    lse,
                    scale,
                };
                prep.finish(state, out)
            }
            OpsKind::UnTracked(prep) => prep.finish(out),
        }
    }

    fn fused_gelu(x: FloatTensor<Self>) -> FloatTensor<Self> {
        match GeluBackward
            .prepare::<C>([x.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (y, cdf) = gelu_flex(x.primitive());
                prep.finish((x.primitive().clone(), cdf), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(Flex::fused_gelu(x.primitive().clone())),
        }
    }

    fn fused_layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let forward = || {
            let shape = x.primitive().layout().shape().to_vec();
            let (y, stats) = norm::layer_norm_forward(
                &values(x.primitive()),
                &values(gamma.primitive()),
                &values(beta.primitive()),
                eps,
            );
            let rows = stats.len() / 2;
            (flex(y, &shape), flex(stats, &[rows, 2]))
        };
        match LayerNormBackward
            .prepare::<C>([x.node(), gamma.node(), beta.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let (y, stats) = forward();
                prep.finish((x.primitive().clone(), gamma.primitive().clone(), stats), y)
            }
            OpsKind::UnTracked(prep) => prep.finish(forward().0),
        }
    }

    fn fused_nll(logits: FloatTensor<Self>, targets: IntTensor<Self>) -> FloatTensor<Self> {
        let shape = logits.primitive().layout().shape().to_vec();
        let vocab = shape[shape.len() - 1];
        let t = Arc::new(indices(&targets));
        let (nll, lse) = nll::nll_forward(&values(logits.primitive()), &t, vocab);
        let rows = t.len();
        match NllBackward
            .prepare::<C>([logits.node()])
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => prep.finish(
                (logits.primitive().clone(), t, flex(lse, &[rows])),
                flex(nll, &[rows]),
            ),
            OpsKind::UnTracked(prep) => prep.finish(flex(nll, &[rows])),
        }
    }
}
