//! FIRE in the byte LM: $b_{ij} = f_\theta\big(\psi(i - j) / \psi(\max(L, i))\big)$, an MLP of
//! the normalised log distance per head ([`crate::encodings::fire`]). Attention receives the
//! feature as a factor per distance and one per query ([`fire_factors`]) and the MLP as one
//! intercept and one slope per piece of its input ([`ReluPieces`]), both expanded inside the
//! fused attention's tiles: no `[L, L]` feature table and no `[H, L, L]` bias.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor, TensorData};

use super::LayerInput;
use crate::encodings::fire::{fire_factors, relu_pieces, Fire, ReluPieces};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{param1, param2, tensor2};
use crate::lm::model::to_vec;
use crate::lm::ops::{PiecewiseBias, PositionBias, ScoreTerms};

/// FIRE's MLP from a normalised distance to a bias per head.
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
}

/// FIRE's feature for $L$ positions, $x_{ij} = \psi_{i-j}\,\nu_i$.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\psi(d)$, distances $d = 0..L$, `[L]`.
    pub feature: Tensor<1>,
    /// $\nu_i = 1/\psi(\max(L_{thr}, i))$, queries $i = 0..L$, `[L]`.
    pub row_scale: Tensor<1>,
}

impl Objects {
    /// The feature's factors for `len` positions ([`fire_factors`]).
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Self {
        let (psi, nu) = fire_factors(len, c.fire_c, c.fire_threshold);
        Self {
            feature: Tensor::from_data(TensorData::new(psi, [len]), device),
            row_scale: Tensor::from_data(TensorData::new(nu, [len]), device),
        }
    }
}

impl FireParams {
    /// The MLP from [`Fire::new`].
    ///
    /// # Errors
    /// When the encodings reject the sizes.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let fire = Fire::new(c.heads, c.fire_hidden, c.fire_c, c.fire_threshold, seed)?;
        Ok(Self {
            w1: param1(&fire.w1.to_vec(), device),
            b1: param1(&fire.b1.to_vec(), device),
            w2: param2(&fire.w2, device),
            b2: param1(&fire.b2.to_vec(), device),
        })
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

    /// $b_{ij} = \text{ReLU}(x_{ij} w_1 + b_1) W_2 + b_2$, as intercepts and slopes per piece.
    pub fn bias(&self, o: &Objects) -> PositionBias {
        let (pieces, intercepts, slopes) = self.pieces();
        PositionBias::Piecewise(PiecewiseBias {
            feature: o.feature.clone(),
            row_scale: o.row_scale.clone(),
            breakpoints: pieces.breakpoints.into(),
            intercepts,
            slopes,
        })
    }

    /// The bias ([`FireParams::bias`]).
    pub fn terms(&self, o: &Objects, _input: &LayerInput) -> ScoreTerms {
        ScoreTerms {
            bias: Some(self.bias(o)),
            ..ScoreTerms::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::tensor::activation::relu;

    use super::*;
    use crate::lm::ops::reference::position_bias;

    /// The pieces expanded to `[H, L, L]` equal the MLP of the features as burn computes it
    /// ($\text{ReLU}(x w_1 + b_1) W_2 + b_2$ for every pair, the former specification), on and
    /// below the diagonal, past the threshold: values, and the gradients of $w_1, b_1, W_2,
    /// b_2$ through a weighted sum.
    #[test]
    fn pieces_equal_the_mlp_with_its_gradients() {
        let device = Device::flex().autodiff();
        let c = ModelConfig {
            fire_hidden: 8,
            fire_threshold: 20.0,
            ..ModelConfig::tiny(crate::lm::config::Scheme::Fire)
        };
        let (h, l, hidden) = (c.heads, 45, c.fire_hidden);
        let p = FireParams::init(&c, 3, &device).unwrap();
        let o = Objects::new(&c, l, &device);
        let (feature, row_scale) = (to_vec(o.feature.clone()), to_vec(o.row_scale.clone()));
        // x_ij = psi_{i-j} nu_i, 0 above the diagonal, [L*L, 1]
        let x: Vec<f32> = (0..l * l)
            .map(|e| {
                let (i, j) = (e / l, e % l);
                if j > i {
                    0.0
                } else {
                    feature[i - j] * row_scale[i]
                }
            })
            .collect();
        let x = Tensor::<2>::from_data(burn::tensor::TensorData::new(x, [l * l, 1]), &device);
        let mlp = relu(x.matmul(p.w1.val().reshape([1, hidden])) + p.b1.val().unsqueeze::<2>())
            .matmul(p.w2.val())
            + p.b2.val().unsqueeze::<2>();
        let mlp = mlp.reshape([l, l, h]).permute([2, 0, 1]);
        let pieces = position_bias(p.bias(&o), l);
        let weights = Tensor::<3>::from_data(
            burn::tensor::TensorData::new(
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
        for (name, t) in [("w1", p.w1.val()), ("b1", p.b1.val()), ("b2", p.b2.val())] {
            close(
                name,
                to_vec(t.grad(&g_pieces).unwrap()),
                to_vec(t.grad(&g_mlp).unwrap()),
            );
        }
        close(
            "w2",
            to_vec(p.w2.val().grad(&g_pieces).unwrap()),
            to_vec(p.w2.val().grad(&g_mlp).unwrap()),
        );
    }
}
