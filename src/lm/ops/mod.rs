//! The tensor operations of the language model, in two implementations chosen once per
//! device: the composed burn operations of [`reference`](mod@reference) (the specification;
//! any backend) and the fused CPU operations of [`fused`] (the Flex backend; one parallel pass
//! forward and one backward each).
//!
//! [`Ops`] is that choice. The model calls every operation through it and never asks which
//! backend it runs on; a position scheme hands its contribution to attention over as
//! [`ScoreTerms`], which [`Ops::attention`] applies:
//!
//! ```math
//! s_{ij} = c \ \big((\tau_i R q_i + u) \cdot R k_j + t_{ij} + a_{ij}\big) + b_{ij}, \qquad
//! o_i = \sum_{j \le i} \alpha_{ij} v_j + \sum_{j \le i} \alpha_{ij} a^V_{ij}.
//! ```
//!
//! At inference RoPE may add a query scale $\tau_i$ (log-$n$; 1 otherwise) and a second
//! rotation $R^{(2)}$ whose product replaces $R q_i \cdot R k_j$ for the pairs $i - j \ge w$
//! ([`WindowedRotation`]: ReRoPE, Leaky ReRoPE, Self-Extend).
//!
//! Every position term is a compact object, linear in $L$: a bias per distance or a
//! piecewise-linear function of a feature of the distance ($b$), tables read at the column of
//! the distance, relative keys per distance and untied absolute rows ($t$, $a$), relative
//! values per distance ($a^V$). The fused attention expands them inside its tiles and returns
//! their gradients to them, so nothing of size $L \times L$ exists in training or evaluation;
//! the reference expands them to `[.., L, L]` with burn's own operations (the specification).
//! CoPE's term ([`Contextual`]) is added to the finished logits from counts along their row,
//! which a tile of the fused attention holds whole.
//!
//! This module is a leaf of the crate's `lm` layer: it knows tensors, not schemes or models.

pub mod fused;
pub mod reference;

use std::sync::Arc;

use burn::backend::DispatchDevice;
use burn::nn::{LayerNorm, Linear};
use burn::tensor::{Device, Int, Tensor};

/// Which implementation of attention, GELU, LayerNorm, linear layers and the loss a run asks
/// for (the `--kernels` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// burn's own operations, composed (the specification; any backend).
    Reference,
    /// One fused, parallel operation each (Flex CPU backend only).
    #[default]
    Fused,
}

impl Kernels {
    /// Both.
    pub const ALL: [Kernels; 2] = [Kernels::Reference, Kernels::Fused];

    /// One line on the kernels, for help texts.
    pub fn summary(&self) -> &'static str {
        match self {
            Kernels::Reference => {
                "burn's own operations, composed (the specification; any backend)"
            }
            Kernels::Fused => "One fused, parallel operation each (Flex CPU backend only)",
        }
    }

    /// `reference` or `fused`.
    pub fn name(&self) -> &'static str {
        match self {
            Kernels::Reference => "reference",
            Kernels::Fused => "fused",
        }
    }
}

crate::named::named!(Kernels, "kernels");

/// Whether `device` is the Flex CPU backend (with or without autodiff).
pub fn is_flex(device: &Device) -> bool {
    let inner = device.clone().without_autodiff();
    matches!(inner.as_dispatch(), DispatchDevice::Flex(_))
}

/// The operations a forward pass runs: the kernels asked for, where the device has them. The
/// fused kernels exist for the Flex CPU backend only; on any other device [`Ops::new`] gives
/// the reference.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ops {
    kernels: Kernels,
}

/// A rotation of queries and keys, `[L, ·]` (or per sequence `[B, L, ·]`) tables that are
/// constants (no gradient).
// one per layer and forward pass, moved, never stored in bulk: the larger variant costs nothing
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum Rotation {
    /// RoPE, half layout: $x \cos + \text{rotate\_half}(x) \sin$, `cos`, `sin` `[L, d_h]`.
    Half {
        /// $\cos(m\theta_i)$ for both halves.
        cos: Tensor<2>,
        /// $\sin(m\theta_i)$ for both halves.
        sin: Tensor<2>,
    },
    /// xPos: adjacent pairs rotated and scaled, queries and keys with their own tables
    /// `[L, d_h/2]`.
    Pairs {
        /// Query $\zeta^{m/B}\cos(m\theta_i)$.
        q_cos: Tensor<2>,
        /// Query $\zeta^{m/B}\sin(m\theta_i)$.
        q_sin: Tensor<2>,
        /// Key $\zeta^{-n/B}\cos(n\theta_i)$.
        k_cos: Tensor<2>,
        /// Key $\zeta^{-n/B}\sin(n\theta_i)$.
        k_sin: Tensor<2>,
    },
    /// RoPE, half layout, at positions of each sequence's own (randomized positions):
    /// `cos`, `sin` `[B, L, d_h]`, row $(b, i)$ at sequence $b$'s position $p_{b,i}$.
    Sequences {
        /// $\cos(p_{b,i}\theta_i)$ for both halves.
        cos: Tensor<3>,
        /// $\sin(p_{b,i}\theta_i)$ likewise.
        sin: Tensor<3>,
    },
}

/// A rotation's implementation: `x [B, H, L, D]` and its two tables `[L, ·]`.
type RotateFn = fn(Tensor<4>, &Tensor<2>, &Tensor<2>) -> Tensor<4>;

/// A rotation's implementation with tables per sequence, `[B, L, D]`.
type RotateSequencesFn = fn(Tensor<4>, &Tensor<3>, &Tensor<3>) -> Tensor<4>;

/// The implementations of the rotations: RoPE's (half layout), xPos's (pairs) and RoPE's with
/// tables per sequence.
#[derive(Clone, Copy)]
pub(crate) struct Rotations {
    /// [`Rotation::Half`].
    pub half: RotateFn,
    /// [`Rotation::Pairs`].
    pub pairs: RotateFn,
    /// [`Rotation::Sequences`].
    pub sequences: RotateSequencesFn,
}

impl Rotation {
    /// $q' = R q$, $k' = R k$ with the implementation of `with` for this rotation.
    pub(crate) fn apply(
        &self,
        q: Tensor<4>,
        k: Tensor<4>,
        with: Rotations,
    ) -> (Tensor<4>, Tensor<4>) {
        let Rotations {
            half,
            pairs,
            sequences,
        } = with;
        match self {
            Rotation::Half { cos, sin } => (half(q, cos, sin), half(k, cos, sin)),
            Rotation::Sequences { cos, sin } => (sequences(q, cos, sin), sequences(k, cos, sin)),
            Rotation::Pairs {
                q_cos,
                q_sin,
                k_cos,
                k_sin,
            } => (pairs(q, q_cos, q_sin), pairs(k, k_cos, k_sin)),
        }
    }
}

/// The second rotation of a two-pass attention (ReRoPE, Leaky ReRoPE): queries and keys
/// rotated again, half layout, each with its own tables `[L, d_h]`; the pairs at distance
/// $i - j \ge w$ take the product of these, $s_{ij} = R^{(2)}_i q_i \cdot R^{(2)}_j k_j$, the
/// others the first rotation's. Evaluation only (the fused kernel returns no gradient).
#[derive(Debug, Clone)]
pub struct WindowedRotation {
    /// $\cos$ at the queries' second positions (times the attention factor), both halves.
    pub q_cos: Tensor<2>,
    /// $\sin$ likewise.
    pub q_sin: Tensor<2>,
    /// $\cos$ at the keys' second positions.
    pub k_cos: Tensor<2>,
    /// $\sin$ likewise.
    pub k_sin: Tensor<2>,
    /// $w \ge 1$.
    pub window: usize,
}

impl WindowedRotation {
    /// $R^{(2)} q$ and $R^{(2)} k$ with the half-layout rotation `half`.
    pub(crate) fn apply(
        &self,
        q: Tensor<4>,
        k: Tensor<4>,
        half: RotateFn,
    ) -> (Tensor<4>, Tensor<4>) {
        (
            half(q, &self.q_cos, &self.q_sin),
            half(k, &self.k_cos, &self.k_sin),
        )
    }
}

/// Reads a tensor back as `f32` values.
pub fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap_or_default()
}

/// A column per distance: entry $d$ is the column that the pairs at distance $i - j = d$
/// read ($d = 0..L$; causal attention sees no other), a constant kept on the host.
pub type DistanceIndex = Arc<[usize]>;

/// A table per sequence and head read at the column of the distance,
/// $g_{r,\,\text{index}(i-j)}$ with $r$ the query's row or the key's row.
#[derive(Debug, Clone)]
pub struct Gathered {
    /// $g$, `[B, H, L, R]`.
    pub table: Tensor<4>,
    /// $\text{index}(d)$, entries below `R`.
    pub index: DistanceIndex,
}

/// Relative keys per distance: $t_{ij} = \hat q_i \cdot \rho_{i-j}$.
#[derive(Debug, Clone)]
pub struct DistanceKeys {
    /// $\hat q$, `[B, H, L, d_h]`.
    pub queries: Tensor<4>,
    /// $\rho_d$ for distances $d = 0..L$, `[H, L, d_h]`.
    pub keys: Tensor<3>,
}

/// An untied absolute term shared by the batch, $a_{ij} = p^Q_i \cdot p^K_j$.
#[derive(Debug, Clone)]
pub struct Untied {
    /// $p^Q$, `[H, L, d_h]`.
    pub queries: Tensor<3>,
    /// $p^K$, `[H, L, d_h]`.
    pub keys: Tensor<3>,
}

/// A content-free bias $b_{ij}$ as a function of the distance $i - j$ (and, piecewise, of the
/// query's row): linear in $L$.
// one per layer and forward pass, moved, never stored in bulk: the larger variant costs nothing
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum PositionBias {
    /// $b_{ij} = \beta_{h,\,i-j}$, `[H, L]` (distances $0..L$).
    Distance(Tensor<2>),
    /// $b_{ij} = f_h(\psi_{i-j}\,\nu_i)$ with $f_h$ piecewise linear.
    Piecewise(PiecewiseBias),
}

/// $f_h(x) = a_{h,p} + s_{h,p}\,x$ on piece $p = \#\{k : t_k < x\}$, at
/// $x_{ij} = \psi_{i-j}\,\nu_i$ (computed in `f32` as that product). The gradient reaches the
/// intercepts and slopes, and $\psi$ and $\nu$ through $\partial x_{ij} = s_{h,p}\,
/// \partial b_{ij}$ (the breakpoints are constants: a piece changes only where one crosses a
/// feature).
#[derive(Debug, Clone)]
pub struct PiecewiseBias {
    /// $\psi_d$, distances $d = 0..L$, non-decreasing, `[L]`.
    pub feature: Tensor<1>,
    /// $\nu_i > 0$, queries $i = 0..L$, `[L]`.
    pub row_scale: Tensor<1>,
    /// $t_1 \le \dots \le t_{P-1}$.
    pub breakpoints: Arc<[f32]>,
    /// $a_{h,p}$, `[H, P]`.
    pub intercepts: Tensor<2>,
    /// $s_{h,p}$, `[H, P]`.
    pub slopes: Tensor<2>,
}

/// $x_{ij} = \psi_{\max(i-j, 0)}\,\nu_i$ and its piece among `breakpoints`, for query `i`,
/// key `j`, from $\psi$ and $\nu$ on the host.
pub fn piece_at(
    feature: &[f32],
    row_scale: &[f32],
    breakpoints: &[f32],
    (i, j): (usize, usize),
) -> (f32, usize) {
    let x = feature[i.saturating_sub(j)] * row_scale[i];
    (x, breakpoints.iter().filter(|&&t| t < x).count())
}

/// Relative value vectors per distance, $a^V_{ij} = w^V_{\text{index}(i-j)}$ (Shaw et al.).
#[derive(Debug, Clone)]
pub struct RelativeValues {
    /// $w^V$, `[R, d_h]`, shared by the heads.
    pub table: Tensor<2>,
    /// $\text{index}(d)$, entries below `R`.
    pub index: DistanceIndex,
}

/// CoPE's contextual positions (Golovneva et al. 2024): after the scale and bias,
/// $s_{ij} \mathrel{+}= (1 - w_{ij})\, q_i \cdot e_{\lfloor p_{ij} \rfloor} + w_{ij}\, q_i \cdot
/// e_{\lceil p_{ij} \rceil}$ with $p_{ij} = \min(\sum_{t \ge j} \sigma(s_{it}), P - 1)$ over the
/// keys the query sees and $w = p - \lfloor p \rfloor$ ([`crate::encodings::cope`]); $q_i$ is the
/// query of the content product. A count per pair from the whole row of logits: the composed
/// attention expands it to `[B, H, L, L]` ([`reference::contextual_term`]); the fused one counts
/// along each row of a tile, which holds every key its rows see (linear in $L$).
#[derive(Debug, Clone)]
pub struct Contextual {
    /// $e$, `[P, d_h]`, shared by the heads.
    pub embeddings: Tensor<2>,
}

/// What a position scheme adds to causal attention (the symbols of the module formula); a
/// scheme fills only its own terms.
#[derive(Debug, Clone, Default)]
pub struct ScoreTerms {
    /// $R$: rotates $q$ and $k$ (RoPE, xPos).
    pub rotation: Option<Rotation>,
    /// $u$, added to the queries of the content score (Transformer-XL), `[H, d_h]`.
    pub content_bias: Option<Tensor<2>>,
    /// $t_{ij} \mathrel{+}= g_{i,\,\text{index}(i-j)}$, a table in the query's row (Shaw's
    /// keys, DeBERTa's c2p).
    pub query_table: Option<Gathered>,
    /// $t_{ij} \mathrel{+}= g_{j,\,\text{index}(i-j)}$, a table in the key's row (DeBERTa's
    /// p2c).
    pub key_table: Option<Gathered>,
    /// $t_{ij} \mathrel{+}= \hat q_i \cdot \rho_{i-j}$ (Transformer-XL).
    pub distance_keys: Option<DistanceKeys>,
    /// $a_{ij} = p^Q_i \cdot p^K_j$, a content-free score scaled like $q \cdot k$ (TUPE's
    /// untied term).
    pub untied: Option<Untied>,
    /// $b_{ij}$, a content-free bias added after scaling (T5, ALiBi, Kerple, FIRE, TUPE).
    pub bias: Option<PositionBias>,
    /// $a^V_{ij}$, relative value vectors (Shaw).
    pub values: Option<RelativeValues>,
    /// CoPE's $z_{ij}$, added to the scaled, biased scores.
    pub contextual: Option<Contextual>,
    /// $\tau_i$, a factor on every query after its rotation, `[L]` (log-$n$ scaling at
    /// inference): $q_i \to \tau_i q_i$.
    pub query_scale: Option<Tensor<1>>,
    /// A second rotation for the pairs $i - j \ge w$ (ReRoPE at inference; with
    /// [`ScoreTerms::rotation`] only).
    pub windowed: Option<WindowedRotation>,
}

impl ScoreTerms {
    /// $\tau_i q_i$ of `q [B, H, L, d_h]` where [`ScoreTerms::query_scale`] is set.
    pub(crate) fn scale_queries(scale: Option<&Tensor<1>>, q: Tensor<4>) -> Tensor<4> {
        match scale {
            // [L] -> [1, 1, L, 1]
            Some(tau) => {
                let l = tau.dims()[0];
                q * tau.clone().reshape([1, 1, l, 1])
            }
            None => q,
        }
    }
}

/// Scores, weights and output of the composed attention, all heads.
#[derive(Debug, Clone)]
pub struct AttentionParts {
    /// $s_{ij}$, `[B, H, L, L]`, $-\infty$ above the diagonal.
    pub scores: Tensor<4>,
    /// $\alpha_{ij}$, `[B, H, L, L]`.
    pub probs: Tensor<4>,
    /// $o_i$, `[B, H, L, d_h]`.
    pub output: Tensor<4>,
}

impl Ops {
    /// The fused kernels where `kernels` asks for them and `device` is Flex; otherwise the
    /// reference.
    pub fn new(kernels: Kernels, device: &Device) -> Self {
        let fused = kernels == Kernels::Fused && is_flex(device);
        Self {
            kernels: if fused {
                Kernels::Fused
            } else {
                Kernels::Reference
            },
        }
    }

    /// The composed reference operations (any device).
    pub fn reference() -> Self {
        Self {
            kernels: Kernels::Reference,
        }
    }

    /// The kernels in effect.
    pub fn kernels(self) -> Kernels {
        self.kernels
    }

    fn fused(self) -> bool {
        self.kernels == Kernels::Fused
    }

    /// Causal attention of `q, k, v [B, H, L, d_h]` with a scheme's `terms` and scale $c$
    /// (the module formula), `[B, H, L, d_h]`: [`fused::attention`] (every position term
    /// expanded inside the tiles, its gradient returned to its own compact object) or the
    /// composed [`reference::attention_parts`].
    pub fn attention(
        self,
        q: Tensor<4>,
        k: Tensor<4>,
        v: Tensor<4>,
        terms: ScoreTerms,
        scale: f32,
    ) -> Tensor<4> {
        if self.fused() {
            fused::attention(q, k, v, terms, scale)
        } else {
            reference::attention_parts(q, k, v, terms, scale).output
        }
    }

    /// `linear.forward(x)`, $xW + b$.
    pub fn linear<const D: usize>(self, linear: &Linear, x: Tensor<D>) -> Tensor<D> {
        match (&linear.bias, self.fused()) {
            (Some(b), true) => fused::linear(x, linear.weight.val(), b.val()),
            _ => reference::linear(linear, x),
        }
    }

    /// $xW$ of `x [..., n_in]` and `w [n_in, n_out]`.
    pub fn product(self, x: Tensor<3>, w: Tensor<2>) -> Tensor<3> {
        if self.fused() {
            fused::product(x, w)
        } else {
            reference::product(x, w)
        }
    }

    /// Exact GELU $x\Phi(x)$.
    pub fn gelu(self, x: Tensor<3>) -> Tensor<3> {
        if self.fused() {
            fused::gelu(x)
        } else {
            reference::gelu(x)
        }
    }

    /// `ln.forward(x)`: LayerNorm over the last axis with $\epsilon$ `eps`.
    pub fn layer_norm(self, ln: &LayerNorm, x: Tensor<3>, eps: f32) -> Tensor<3> {
        match (&ln.beta, self.fused()) {
            (Some(beta), true) => fused::layer_norm(x, ln.gamma.val(), beta.val(), eps),
            _ => reference::layer_norm(ln, x),
        }
    }

    /// Per-position negative log-likelihood `[B, L]` of `targets [B, L]` under
    /// `logits [B, L, V]`, $\log\sum_j e^{x_j} - x_t$.
    pub fn nll(self, logits: Tensor<3>, targets: Tensor<2, Int>) -> Tensor<2> {
        if self.fused() {
            fused::nll(logits, targets)
        } else {
            reference::nll(logits, targets)
        }
    }
}
