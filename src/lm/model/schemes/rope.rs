//! RoPE in the byte LM (half layout): queries and keys rotated by $m\theta_i$ before their dot
//! product ([`crate::encodings::rope`]), with the context-extension scaling the model was
//! trained with or the one asked for at inference (PI, NTK, dynamic NTK, YaRN, Llama 3), and at
//! inference optionally dynamic YaRN as a key cache keeps it, ReRoPE's or Self-Extend's second
//! pass beyond a window, and a query temperature (log-$n$ or floor-log) ([`RopeInference`]).

use burn::tensor::{Device, Tensor, TensorData};
use ndarray::Array2;
use serde::{Deserialize, Serialize};

use crate::encodings::rope::{
    rope_cos_sin, RampBounds, ReRope, Rope, RopeConfig, RopeFrequencies, RopeLayout, RopeScaling,
    ScalingKind, SelfExtend,
};
use crate::encodings::temperature::Temperature;
use crate::error::{invalid, Result};
use crate::lm::config::ModelConfig;
use crate::lm::model::init::tensor2;
use crate::lm::ops::{Rotation, ScoreTerms, WindowedRotation};

/// ReRoPE's window at inference ([`ReRope`]): relative positions exact below $w$, then
/// clipped at $w$ (ReRoPE) or growing with slope $1/k$ (Leaky ReRoPE).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReRopeWindow {
    /// $w \ge 1$.
    pub window: usize,
    /// Leaky ReRoPE's $k \ge 1$; `None` for ReRoPE.
    pub leak: Option<f64>,
}

impl ReRopeWindow {
    /// The ndarray [`ReRope`] over `rope` (which checks $w$ and $k$).
    ///
    /// # Errors
    /// A window of 0, $k$ not finite or below 1.
    pub fn over(&self, rope: Rope) -> Result<ReRope> {
        match self.leak {
            None => ReRope::new(rope, self.window),
            Some(k) => ReRope::leaky(rope, self.window, k),
        }
    }
}

/// Self-Extend's neighbour window and group size at inference ([`SelfExtend`]): relative
/// positions exact below $w$, beyond it positions grouped by $G$ (floor division).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelfExtendWindow {
    /// $w \ge 1$.
    pub window: usize,
    /// $G \ge 1$ (1 is RoPE).
    pub group: usize,
}

impl SelfExtendWindow {
    /// The ndarray [`SelfExtend`] over `rope` (which checks $w$ and $G$).
    ///
    /// # Errors
    /// A window or group of 0.
    pub fn over(&self, rope: Rope) -> Result<SelfExtend> {
        SelfExtend::new(rope, self.window, self.group)
    }
}

/// What RoPE's positions become at inference besides a scaling of its frequencies: dynamic
/// YaRN with a key cache, ReRoPE's or Self-Extend's two passes merged at a window, and a
/// temperature on the queries ([`Temperature`]: log-$n$,
/// $\tau_m = \max(1, \ln(m+1) / \ln L)$, or floor-log). The default changes nothing.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RopeInference {
    /// ReRoPE or Leaky ReRoPE.
    pub rerope: Option<ReRopeWindow>,
    /// Self-Extend (not with ReRoPE).
    #[serde(default)]
    pub self_extend: Option<SelfExtendWindow>,
    /// The queries' temperature $\tau_m$.
    #[serde(default)]
    pub temperature: Option<Temperature>,
    /// Dynamic YaRN as an engine with a key cache runs it, with these ramp bounds: position
    /// $m$ rotated with YaRN at $s_m = \max(1, (m+1)/L)$ and its attention factor, the
    /// scaling of the step that cached it (alone: not with a scaling, ReRoPE or Self-Extend).
    #[serde(default)]
    pub dynamic_yarn: Option<RampBounds>,
}

impl RopeInference {
    /// Whether it changes anything.
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }

    /// The second pass over `rope` for `len` positions, if any: the rotation positions of the
    /// queries and of the keys ([`ReRope::pass_two_positions`],
    /// [`SelfExtend::pass_two_positions`]) and the window $w$ from which a pair takes it.
    ///
    /// # Errors
    /// ReRoPE and Self-Extend together; a window or group of 0, $k$ below 1.
    pub fn second_pass(&self, rope: Rope, len: usize) -> Result<Option<SecondPass>> {
        let positions = |pass: &dyn Fn(usize, usize) -> (f64, f64)| {
            let q: Vec<f64> = (0..len).map(|i| pass(i, 0).0).collect();
            let k: Vec<f64> = (0..len).map(|j| pass(0, j).1).collect();
            (q, k)
        };
        Ok(match (&self.rerope, &self.self_extend) {
            (Some(_), Some(_)) => {
                return Err(invalid(
                    "inference",
                    format!("{self:?}"),
                    "ReRoPE or Self-Extend, not both",
                ))
            }
            (Some(r), None) => {
                let rerope = r.over(rope)?;
                let (q, k) = positions(&|i, j| rerope.pass_two_positions(i, j));
                Some((q, k, r.window))
            }
            (None, Some(e)) => {
                let extend = e.over(rope)?;
                let (q, k) = positions(&|i, j| extend.pass_two_positions(i, j));
                Some((q, k, e.window))
            }
            (None, None) => None,
        })
    }
}

/// A second pass: the queries' and the keys' rotation positions and the window.
pub type SecondPass = (Vec<f64>, Vec<f64>, usize);

/// RoPE's tables for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\cos(m\theta_i)$ times the attention factor, repeated for both halves, `[L, d_head]`.
    pub cos: Tensor<2>,
    /// $\sin(m\theta_i)$ likewise.
    pub sin: Tensor<2>,
    /// The second rotation at inference: ReRoPE's queries at $w$ (Leaky: $i/k + w(1 - 1/k)$),
    /// keys at 0 (Leaky: $j/k$) ([`ReRope::pass_two_positions`]), or Self-Extend's grouped
    /// positions ([`SelfExtend::pass_two_positions`]).
    pub windowed: Option<Box<WindowedRotation>>,
    /// Log-$n$'s $\tau_m$ at inference, `[L]`.
    pub query_scale: Option<Box<Tensor<1>>>,
}

impl Objects {
    /// The tables for `len` positions under `scaling` (dynamic NTK looks at `len`).
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn new(c: &ModelConfig, len: usize, scaling: RopeScaling, device: &Device) -> Result<Self> {
        Self::at_inference(c, len, scaling, &RopeInference::default(), device)
    }

    /// [`Objects::new`] with `inference`'s second rotation and query scale.
    ///
    /// # Errors
    /// When the encodings reject the configuration, the window, $k$ or $G$
    /// ([`RopeInference::second_pass`]).
    pub fn at_inference(
        c: &ModelConfig,
        len: usize,
        scaling: RopeScaling,
        inference: &RopeInference,
        device: &Device,
    ) -> Result<Self> {
        let config = RopeConfig::with_scaling(c.head_dim(), c.rope_base, scaling)?;
        let freqs = config.frequencies(Some(len))?;
        let mut objects = match inference.dynamic_yarn {
            Some(bounds) => {
                let alone = RopeInference {
                    dynamic_yarn: None,
                    temperature: None,
                    ..*inference
                };
                if scaling != RopeScaling::None || !alone.is_plain() {
                    return Err(invalid(
                        "inference",
                        format!("{inference:?} with {scaling:?}"),
                        "dynamic YaRN alone (it replaces the frequencies): no scaling, ReRoPE \
                         or Self-Extend with it",
                    ));
                }
                Self::dynamic_yarn(c, len, &bounds, device)?
            }
            None => Self::at(&contiguous(len), &freqs, device),
        };
        let rope = Rope::new(config, RopeLayout::Half);
        if let Some((q2, k2, window)) = inference.second_pass(rope, len)? {
            // pass 2: q at q2(i), k at k2(j)
            let (q_cos, q_sin) = tables(&q2, &freqs, device);
            let (k_cos, k_sin) = tables(&k2, &freqs, device);
            objects.windowed = Some(Box::new(WindowedRotation {
                q_cos,
                q_sin,
                k_cos,
                k_sin,
                window,
            }));
        }
        if let Some(t) = inference.temperature {
            t.validate()?;
            // tau_m, [L]
            let tau: Vec<f32> = (0..len).map(|m| t.scale(m) as f32).collect();
            objects.query_scale = Some(Box::new(Tensor::from_data(
                TensorData::new(tau, [len]),
                device,
            )));
        }
        Ok(objects)
    }

    /// Dynamic YaRN's tables as a key cache holds them: row $m$ is $\cos(m\theta_i(s_m))$ and
    /// $\sin(m\theta_i(s_m))$ times YaRN's attention factor at $s_m = \max(1, (m+1)/L)$
    /// (plain RoPE up to $L$), the scaling of the step at which position $m$ was written.
    ///
    /// # Errors
    /// When the encodings reject the configuration or the bounds.
    pub fn dynamic_yarn(
        c: &ModelConfig,
        len: usize,
        bounds: &RampBounds,
        device: &Device,
    ) -> Result<Self> {
        let d2 = c.head_dim() / 2;
        let (mut cos, mut sin) = (Array2::zeros((len, d2)), Array2::zeros((len, d2)));
        for m in 0..len {
            let s = (m + 1) as f64 / c.train_len as f64;
            let scaling = if s > 1.0 {
                ScalingKind::Yarn.scaling_with(s, c.train_len, bounds)
            } else {
                RopeScaling::None
            };
            let freqs = RopeConfig::with_scaling(c.head_dim(), c.rope_base, scaling)?
                .frequencies(Some(m + 1))?;
            let (row_cos, row_sin) = rope_cos_sin(&[m as f64], &freqs);
            cos.row_mut(m).assign(&row_cos.row(0));
            sin.row_mut(m).assign(&row_sin.row(0));
        }
        let (cos, sin) = (both_halves(&cos, device), both_halves(&sin, device));
        Ok(Self {
            cos,
            sin,
            windowed: None,
            query_scale: None,
        })
    }

    /// The tables of `freqs` at `positions` (one row each).
    pub fn at(positions: &[f64], freqs: &RopeFrequencies, device: &Device) -> Self {
        let (cos, sin) = tables(positions, freqs, device);
        Self {
            cos,
            sin,
            windowed: None,
            query_scale: None,
        }
    }
}

/// The positions $0..L$.
pub fn contiguous(len: usize) -> Vec<f64> {
    (0..len).map(|p| p as f64).collect()
}

/// $\cos(p\,\theta_i)$ and $\sin(p\,\theta_i)$ (times the attention factor) at `positions`,
/// repeated for both halves of the half layout, `[L, d_head]` each.
pub fn tables(
    positions: &[f64],
    freqs: &RopeFrequencies,
    device: &Device,
) -> (Tensor<2>, Tensor<2>) {
    let (cos, sin) = rope_cos_sin(positions, freqs);
    (both_halves(&cos, device), both_halves(&sin, device))
}

/// A `[L, d/2]` table repeated for both halves of the half layout, `[L, d]`.
fn both_halves(t: &Array2<f32>, device: &Device) -> Tensor<2> {
    let t = tensor2(t, device);
    Tensor::cat(vec![t.clone(), t], 1)
}

/// $q' = R_m q$, $k' = R_n k$ in the half layout (and at inference the second rotation beyond
/// the window and $\tau_m$ on the queries).
pub fn terms(o: &Objects) -> ScoreTerms {
    ScoreTerms {
        rotation: Some(Rotation::Half {
            cos: o.cos.clone(),
            sin: o.sin.clone(),
        }),
        windowed: o.windowed.as_deref().cloned(),
        query_scale: o.query_scale.as_deref().cloned(),
        ..ScoreTerms::default()
    }
}
