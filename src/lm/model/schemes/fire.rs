//! FIRE in the byte LM: $b_{ij} = f_\theta\big(\psi(i - j) / \psi(\max(L, i))\big)$, an MLP of
//! the normalised log distance per head ([`crate::encodings::fire`]), with $c$ and $L$ learned
//! per layer (shared by its heads) as the paper's listing learns them: $c$ used as $|c|$ and
//! $L = |m L_0|$ ([`FireTransform`]), starting at the configuration's `fire_c` and
//! `fire_threshold`. Attention receives the feature as a factor per distance and one per
//! query ([`FireTransform::factors`]) and the MLP as one intercept and one slope per piece of
//! its input ([`ReluPieces`]), both expanded inside the fused attention's tiles: no `[L, L]`
//! feature table and no `[H, L, L]` bias.
//!
//! The factors are computed on the host in `f64` at the current $c$ and $m$, and reach $c$
//! and $m$ through their first-order change ([`FireTransform::tangents`]):
//! $\psi + (c - \bar c)\,\partial_c\psi$ with $\bar c$ the detached value, which is $\psi$
//! exactly and has $\partial_c\psi$ as its derivative; attention returns the gradients of
//! $\psi$ and $\nu$, and burn's autodiff carries them to $c$ and $m$.
//!
//! A checkpoint written before $c$ and $L$ were learned has no `fire_c` and
//! `fire_threshold_scale`: its layers keep them fixed at its configuration's values
//! ([`FireParams::fixed_transform`]) and evaluate exactly as they did.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor, TensorData};

use super::LayerInput;
use crate::encodings::fire::{relu_pieces, Fire, FireTransform, ReluPieces};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{param1, param2, tensor2};
use crate::lm::model::to_vec;
use crate::lm::ops::{PiecewiseBias, PositionBias, ScoreTerms};

/// The last names of the learned scalars in `model.safetensors`
/// (`blocks.0.attn.positions.fire_c`): a checkpoint without them keeps $c$ and $L$ fixed.
pub const LEARNED_SCALARS: [&str; 2] = ["fire_c", "fire_threshold_scale"];

/// FIRE's MLP from a normalised distance to a bias per head, and the layer's $c$ and $m$.
#[derive(Module, Debug)]
pub struct FireParams {
    /// $w_1$, `[hidden]`.
    pub w1: Param<Tensor<1>>,
    /// $b_1$, `[hidden]`.
    pub b1: Param<Tensor<1>>,
    /// $W_2$, `[hidden, heads]`.
    pub w2: Param<Tensor<2>>,
    /// $b_2$, `[heads]`.
    pub b2: Param<Tensor<1>>,
    /// $c$ as learned, `[1]` (used as $|c|$); `None` where fixed at the configuration's.
    pub c: Option<Param<Tensor<1>>>,
    /// $m$ as learned, `[1]` ($L = |m L_0|$, $L_0$ the configuration's `fire_threshold`);
    /// `None` where fixed at 1.
    pub threshold_scale: Option<Param<Tensor<1>>>,
}

/// FIRE's position objects for $L$ positions: the length alone (the feature's factors depend
/// on the learned $c$ and $L$, so each layer computes its own).
#[derive(Debug, Clone)]
pub struct Objects {
    /// $L$.
    pub len: usize,
}

impl Objects {
    /// The objects for `len` positions.
    pub fn new(len: usize) -> Self {
        Self { len }
    }
}

/// A scalar parameter's one value.
fn scalar(p: &Param<Tensor<1>>) -> f32 {
    to_vec(p.val()).first().copied().unwrap_or(f32::NAN)
}

/// $x_0 + (x - \bar x)\, t$: the constant `values` $x_0$ `[L]` with the derivative `tangent`
/// `[L]` in the scalar `p` (`[1]`, $\bar x$ its detached value); the value is exactly $x_0$.
fn with_tangent(values: Tensor<1>, p: &Tensor<1>, tangent: Vec<f32>) -> Tensor<1> {
    let len = tangent.len();
    let t = Tensor::<1>::from_data(TensorData::new(tangent, [len]), &values.device());
    // (p - detached p) is 0 with derivative 1
    values + (p.clone() - p.clone().detach()).expand([len]) * t
}

impl FireParams {
    /// The MLP from [`Fire::new`], and $c$, $m$ at the configuration's initial values
    /// (`fire_c`, 1).
    ///
    /// # Errors
    /// When the encodings reject the sizes or the initial values.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let fire = Fire::new(c.heads, c.fire_hidden, c.fire_c, c.fire_threshold, seed)?;
        Ok(Self {
            w1: param1(&fire.w1.to_vec(), device),
            b1: param1(&fire.b1.to_vec(), device),
            w2: param2(&fire.w2, device),
            b2: param1(&fire.b2.to_vec(), device),
            c: Some(param1(&[fire.transform.c], device)),
            threshold_scale: Some(param1(&[fire.transform.threshold_scale], device)),
        })
    }

    /// The layer with $c$ and $L$ fixed at the configuration's values (no `c`, no
    /// `threshold_scale`): the form of a checkpoint written before they were learned.
    pub fn fixed_transform(self) -> Self {
        Self {
            c: None,
            threshold_scale: None,
            ..self
        }
    }

    /// Whether $c$ and $L$ are learned (parameters of the layer).
    pub fn learns_transform(&self) -> bool {
        self.c.is_some() && self.threshold_scale.is_some()
    }

    /// $c$, $m$ and $L_0$ at their current values (the configuration's where fixed).
    ///
    /// # Errors
    /// When the configuration's initial values are invalid.
    pub fn transform(&self, config: &ModelConfig) -> Result<FireTransform> {
        let mut t = FireTransform::new(config.fire_c, config.fire_threshold)?;
        if let (Some(c), Some(m)) = (&self.c, &self.threshold_scale) {
            (t.c, t.threshold_scale) = (scalar(c), scalar(m));
        }
        Ok(t)
    }

    /// $\psi(d)$ and $\nu_i$, `[L]` each, at the current $c$ and $L$: constants, with their
    /// derivatives in $c$ and $m$ attached where those are learned and tracked.
    ///
    /// # Errors
    /// When the configuration's initial values are invalid.
    pub fn factors(&self, config: &ModelConfig, len: usize) -> Result<(Tensor<1>, Tensor<1>)> {
        let t = self.transform(config)?;
        let device = self.w1.device();
        let (psi, nu) = t.factors(len);
        let mut feature = Tensor::<1>::from_data(TensorData::new(psi, [len]), &device);
        let mut row_scale = Tensor::<1>::from_data(TensorData::new(nu, [len]), &device);
        if let (Some(c), Some(m)) = (&self.c, &self.threshold_scale) {
            let (c, m) = (c.val(), m.val());
            if c.is_require_grad() || m.is_require_grad() {
                let g = t.tangents(len);
                feature = with_tangent(feature, &c, g.feature_c);
                row_scale = with_tangent(row_scale, &c, g.row_scale_c);
                row_scale = with_tangent(row_scale, &m, g.row_scale_m);
            }
        }
        Ok((feature, row_scale))
    }

    /// The MLP's pieces at the current weights ([`relu_pieces`]), and on each piece $p$ the
    /// intercept $a_p = b_2 + W_2^\top (m_p \odot b_1)$ and slope
    /// $s_p = W_2^\top (m_p \odot w_1)$ of every head, `[H, P]` each (differentiable in the
    /// weights; the pieces themselves move only where a breakpoint crosses a feature).
    pub fn pieces(&self) -> (ReluPieces, Tensor<2>, Tensor<2>) {
        let hidden = self.w1.dims()[0];
        let pieces = relu_pieces(&to_vec(self.w1.val()), &to_vec(self.b1.val()));
        // m, [P, hidden]
        let m = tensor2(&pieces.active, &self.w1.device());
        let w2 = self.w2.val();
        // m (b1 W2) + b2, m (w1 W2): [P, hidden] x [hidden, H] -> [P, H] -> [H, P]
        let intercepts = m
            .clone()
            .matmul(self.b1.val().reshape([hidden, 1]) * w2.clone())
            + self.b2.val().unsqueeze::<2>();
        let slopes = m.matmul(self.w1.val().reshape([hidden, 1]) * w2);
        (pieces, intercepts.swap_dims(0, 1), slopes.swap_dims(0, 1))
    }

    /// $b_{ij} = \text{ReLU}(x_{ij} w_1 + b_1) W_2 + b_2$ for `len` positions, as intercepts and
    /// slopes per piece of $x_{ij} = \psi_{i-j}\nu_i$ ([`FireParams::factors`]).
    ///
    /// # Errors
    /// When the configuration's initial values are invalid.
    pub fn bias(&self, config: &ModelConfig, len: usize) -> Result<PositionBias> {
        let (pieces, intercepts, slopes) = self.pieces();
        let (feature, row_scale) = self.factors(config, len)?;
        Ok(PositionBias::Piecewise(PiecewiseBias {
            feature,
            row_scale,
            breakpoints: pieces.breakpoints.into(),
            intercepts,
            slopes,
        }))
    }

    /// The bias ([`FireParams::bias`]).
    ///
    /// # Errors
    /// As [`FireParams::bias`].
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> Result<ScoreTerms> {
        Ok(ScoreTerms {
            bias: Some(self.bias(input.config, o.len)?),
            ..ScoreTerms::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::activation::relu;
    use burn::tensor::Int;

    use super::*;
    use crate::lm::ops::reference::position_bias;

    /// `[L * L]` integer entries `f(i, j)` of every pair.
    fn pairs(l: usize, f: impl Fn(usize, usize) -> usize, device: &Device) -> Tensor<1> {
        let v: Vec<i64> = (0..l * l).map(|e| f(e / l, e % l) as i64).collect();
        Tensor::<1, Int>::from_data(TensorData::new(v, [l * l]), device).float()
    }

    /// The pieces expanded to `[H, L, L]`, at learned $c = -0.17$ and $m = 1.13$ ($L = 22.6$ of
    /// $L_0 = 20$, 45 positions), equal FIRE written out in burn's own operations (the paper's
    /// listing: $\ln(1 + |c| (i - j)) / \ln(1 + |c| \max(|m L_0|, i))$, then
    /// $\text{ReLU}(x w_1 + b_1) W_2 + b_2$ for every pair) on and below the diagonal: values,
    /// and the gradients of $w_1, b_1, W_2, b_2$ and of $c$ and $m$ through a weighted sum.
    #[test]
    fn pieces_equal_the_mlp_with_its_gradients() {
        let device = Device::flex().autodiff();
        let c = ModelConfig {
            fire_hidden: 8,
            fire_threshold: 20.0,
            ..ModelConfig::tiny(crate::lm::config::Scheme::Fire)
        };
        let (h, l, hidden) = (c.heads, 45, c.fire_hidden);
        let mut p = FireParams::init(&c, 3, &device).unwrap();
        p.c = Some(param1(&[-0.17], &device));
        p.threshold_scale = Some(param1(&[1.13], &device));
        let (cp, mp) = (
            p.c.as_ref().unwrap().val(),
            p.threshold_scale.as_ref().unwrap().val(),
        );
        // x_ij = psi(i - j) / psi(max(L, i)), [L*L] (0 above the diagonal: i - j clamped)
        let distance = pairs(l, |i, j| i.saturating_sub(j), &device);
        let row = pairs(l, |i, _| i, &device);
        let c_abs = cp.clone().abs().expand([l * l]);
        let threshold = (mp.clone() * c.fire_threshold).abs().expand([l * l]);
        let x = (c_abs.clone() * distance).log1p() / (c_abs * row.max_pair(threshold)).log1p();
        let x = x.reshape([l * l, 1]);
        let mlp = relu(x.matmul(p.w1.val().reshape([1, hidden])) + p.b1.val().unsqueeze::<2>())
            .matmul(p.w2.val())
            + p.b2.val().unsqueeze::<2>();
        let mlp = mlp.reshape([l, l, h]).permute([2, 0, 1]);
        let pieces = position_bias(p.bias(&c, l).unwrap(), l);
        let weights = Tensor::<3>::from_data(
            TensorData::new(
                (0..h * l * l)
                    .map(|e| {
                        let (i, j) = (e / l % l, e % l);
                        if j > i {
                            0.0
                        } else {
                            (e as f32 * 0.37).sin()
                        }
                    })
                    .collect::<Vec<f32>>(),
                [h, l, l],
            ),
            &device,
        );
        let close = |what: &str, a: Vec<f32>, b: Vec<f32>| {
            let scale = b.iter().fold(1e-3f32, |m, x| m.max(x.abs()));
            let err = a
                .iter()
                .zip(&b)
                .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()));
            assert!(err <= 1e-5 * scale, "{what}: error {err:e} of {scale}");
        };
        close(
            "bias",
            to_vec(pieces.clone() * weights.clone()),
            to_vec(mlp.clone() * weights.clone()),
        );
        let g_pieces = (pieces * weights.clone()).sum().backward();
        let g_mlp = (mlp * weights).sum().backward();
        for (name, t) in [
            ("w1", p.w1.val()),
            ("b1", p.b1.val()),
            ("b2", p.b2.val()),
            ("c", cp),
            ("m", mp),
        ] {
            let (a, b) = (t.grad(&g_pieces).unwrap(), t.grad(&g_mlp).unwrap());
            close(name, to_vec(a), to_vec(b));
        }
        close(
            "w2",
            to_vec(p.w2.val().grad(&g_pieces).unwrap()),
            to_vec(p.w2.val().grad(&g_mlp).unwrap()),
        );
    }

    /// With $c$ and $L$ fixed (a checkpoint from before they were learned), and freshly
    /// initialised, the factors are those of the configuration's `fire_c` and
    /// `fire_threshold`, bit for bit; only the learned layer's carry a gradient to $c$, $m$.
    #[test]
    fn fixed_and_initial_scalars_give_the_configuration_factors() {
        let device = Device::flex().autodiff();
        let c = ModelConfig {
            fire_threshold: 7.0,
            fire_c: 0.3,
            ..ModelConfig::tiny(crate::lm::config::Scheme::Fire)
        };
        let learned = FireParams::init(&c, 1, &device).unwrap();
        assert!(learned.learns_transform());
        let fixed = FireParams::init(&c, 1, &device).unwrap().fixed_transform();
        assert!(!fixed.learns_transform());
        let (psi, nu) = crate::encodings::fire::fire_factors(30, 0.3, 7.0);
        for p in [&learned, &fixed] {
            let (f, r) = p.factors(&c, 30).unwrap();
            assert_eq!((to_vec(f), to_vec(r)), (psi.clone(), nu.clone()));
        }
        let (f, r) = learned.factors(&c, 30).unwrap();
        let g = (f.sum() + r.sum()).backward();
        let c_grad = learned.c.as_ref().unwrap().val().grad(&g).unwrap();
        assert!(to_vec(c_grad)[0] != 0.0);
    }
}
