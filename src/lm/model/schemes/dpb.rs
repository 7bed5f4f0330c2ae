//! Dynamic position bias in the byte LM: per layer, an MLP from the signed (log) distance to
//! one bias per head ([`crate::encodings::dpb`]), evaluated at the distances $d = 0..L$ that
//! causal attention sees. Attention receives the result as a vector over distance per head,
//! `[H, L]`, expanded inside the fused attention's tiles; its gradient flows back through the
//! MLP by burn's autograd. One MLP per layer, as CrossFormer (x-transformers shares one across
//! layers).

use burn::module::{Module, Param};
use burn::tensor::activation::silu;
use burn::tensor::{Device, Tensor, TensorData};

use super::LayerInput;
use crate::encodings::dpb::{dpb_feature, DynamicPositionBias, NORM_EPS};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{param1, param2};
use crate::lm::ops::{PositionBias, ScoreTerms};

/// One hidden layer of the MLP, $\operatorname{SiLU}(N(x W + b))$.
#[derive(Module, Debug)]
pub struct DpbLayerParams {
    /// $W$, `[in, hidden]`.
    pub weight: Param<Tensor<2>>,
    /// $b$, `[hidden]`.
    pub bias: Param<Tensor<1>>,
    /// The norm's $\gamma$, `[hidden]`, where `dpb_norm` is on.
    pub gamma: Option<Param<Tensor<1>>>,
    /// The norm's $\beta$, `[hidden]` (none after the first layer's bias-free norm).
    pub beta: Option<Param<Tensor<1>>>,
}

/// DPB's MLP in one layer.
#[derive(Module, Debug)]
pub struct DpbParams {
    /// The hidden layers, `dpb_depth` of them.
    pub layers: Vec<DpbLayerParams>,
    /// $W_o$, `[hidden, heads]`.
    pub out_weight: Param<Tensor<2>>,
    /// $b_o$, `[heads]`.
    pub out_bias: Param<Tensor<1>>,
}

/// DPB's input for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $x(d)$ for the distances $d = 0..L$ ([`dpb_feature`]), `[L, 1]`.
    pub features: Tensor<2>,
}

impl Objects {
    /// The features for `len` positions.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Self {
        let x: Vec<f32> = (0..len)
            .map(|d| dpb_feature(d as i64, c.dpb_log_distance))
            .collect();
        Self {
            features: Tensor::from_data(TensorData::new(x, [len, 1]), device),
        }
    }
}

impl DpbParams {
    /// The MLP from [`DynamicPositionBias::new`].
    ///
    /// # Errors
    /// When the encodings reject the sizes.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let dpb = DynamicPositionBias::new(
            c.heads,
            c.dpb_hidden,
            c.dpb_depth,
            c.dpb_log_distance,
            c.dpb_norm,
            seed,
        )?;
        let layers = dpb
            .layers
            .iter()
            .map(|l| DpbLayerParams {
                weight: param2(&l.weight, device),
                bias: param1(&l.bias.to_vec(), device),
                gamma: l.norm.as_ref().map(|n| param1(&n.gamma.to_vec(), device)),
                beta: l
                    .norm
                    .as_ref()
                    .and_then(|n| n.beta.as_ref())
                    .map(|b| param1(&b.to_vec(), device)),
            })
            .collect();
        Ok(Self {
            layers,
            out_weight: param2(&dpb.out_weight, device),
            out_bias: param1(&dpb.out_bias.to_vec(), device),
        })
    }

    /// $\beta_{h,d} = f(d)_h$, `[H, L]`: the MLP on every distance's feature.
    pub fn distance_bias(&self, o: &Objects) -> Tensor<2> {
        let mut h = o.features.clone();
        for layer in &self.layers {
            // x W + b, [L, hidden]
            h = h.matmul(layer.weight.val()) + layer.bias.val().unsqueeze::<2>();
            if let Some(gamma) = &layer.gamma {
                // (h - mean) / sqrt(var + eps) gamma (+ beta), over the hidden units
                let mean = h.clone().mean_dim(1);
                let centred = h - mean;
                let var = centred.clone().powi_scalar(2).mean_dim(1);
                h = centred / (var + NORM_EPS).sqrt() * gamma.val().unsqueeze::<2>();
                if let Some(beta) = &layer.beta {
                    h = h + beta.val().unsqueeze::<2>();
                }
            }
            h = silu(h);
        }
        // h W_o + b_o, [L, H] -> [H, L]
        (h.matmul(self.out_weight.val()) + self.out_bias.val().unsqueeze::<2>()).swap_dims(0, 1)
    }

    /// The bias $b_{ij} = f(i - j)_h$, as a vector over distance.
    pub fn terms(&self, o: &Objects, _input: &LayerInput) -> ScoreTerms {
        ScoreTerms {
            bias: Some(PositionBias::Distance(self.distance_bias(o))),
            ..ScoreTerms::default()
        }
    }
}
