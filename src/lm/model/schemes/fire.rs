//! FIRE in the byte LM: $b_{ij} = f_\theta\big(\psi(i - j) / \psi(\max(L, i))\big)$, an MLP of
//! the normalised log distance per head ([`crate::encodings::fire`]).

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};
use ndarray::Array2;

use super::LayerInput;
use crate::encodings::fire::{fire_feature, Fire};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{param1, param2, tensor2};
use crate::lm::ops::ScoreTerms;

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

/// FIRE's features for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\psi(i - j) / \psi(\max(L_{thr}, i))$, 0 above the diagonal, `[L, L]`.
    pub features: Tensor<2>,
}

impl Objects {
    /// The features for `len` positions.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Self {
        let f = Array2::from_shape_fn((len, len), |(i, j)| {
            if j > i {
                0.0
            } else {
                fire_feature(i, j, c.fire_c, c.fire_threshold)
            }
        });
        Self {
            features: tensor2(&f, device),
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

    /// $b_{ij} = \text{ReLU}(x w_1 + b_1) W_2 + b_2$ for each feature $x$, `[H, L, L]`.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        let h = input.config.heads;
        let l = input.ctx.len;
        let hidden = self.w1.dims()[0];
        // [L*L, 1] -> [L*L, hidden] -> [L*L, H] -> [H, L, L]
        let x = o.features.clone().reshape([l * l, 1]);
        let hid = burn::tensor::activation::relu(
            x.matmul(self.w1.val().reshape([1, hidden])) + self.b1.val().unsqueeze::<2>(),
        );
        let out = hid.matmul(self.w2.val()) + self.b2.val().unsqueeze::<2>();
        ScoreTerms {
            bias: Some(out.reshape([l, l, h]).permute([2, 0, 1])),
            ..ScoreTerms::default()
        }
    }
}
