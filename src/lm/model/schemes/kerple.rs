//! Kerple (logarithmic variant) in the byte LM: $b_{ij} = -r_1 \ln(1 + r_2 |i - j|)$ per head,
//! $r_1, r_2 > 0$ learned ([`crate::encodings::kerple`]). Attention receives the kernel at
//! every distance, a vector per head `[H, L]`, expanded inside the fused attention's tiles.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};
use ndarray::Array2;

use super::LayerInput;
use crate::encodings::alibi::alibi_slopes;
use crate::encodings::kerple::{Kerple, KerpleKind};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{param1, tensor2};
use crate::lm::ops::{PositionBias, ScoreTerms};

/// Kerple's logarithmic kernel per head.
#[derive(Module, Debug)]
pub struct KerpleParams {
    /// $r_1$, `[heads]`.
    pub r1: Param<Tensor<1>>,
    /// $r_2$, `[heads]`.
    pub r2: Param<Tensor<1>>,
}

/// Kerple's distances for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// The distances $d = 0..L$ from a query to an earlier key, `[1, L]`.
    pub distance: Tensor<2>,
}

impl Objects {
    /// The distances for `len` positions.
    pub fn new(len: usize, device: &Device) -> Self {
        let d = Array2::from_shape_fn((1, len), |(_, d)| d as f32);
        Self {
            distance: tensor2(&d, device),
        }
    }
}

impl KerpleParams {
    /// $r_1 = 1$, $r_2$ = the ALiBi slopes: starts close to ALiBi
    /// ($-r_1 r_2 d$ for small $r_2 d$).
    ///
    /// # Errors
    /// When the encodings reject the head count.
    pub fn init(c: &ModelConfig, device: &Device) -> Result<Self> {
        let h = c.heads;
        let kerple = Kerple::new(KerpleKind::Log, vec![1.0; h], alibi_slopes(h)?)?;
        Ok(Self {
            r1: param1(&kerple.r1, device),
            r2: param1(&kerple.r2, device),
        })
    }

    /// $b_{ij} = \beta_{h,\,i-j}$ with $\beta_{h,d} = -r_1 \ln(1 + r_2 d)$, $r_1, r_2$ kept
    /// $\ge 10^{-3}$, `[H, L]`.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        let h = input.config.heads;
        let r1 = self.r1.val().clamp_min(1e-3).reshape([h, 1]);
        let r2 = self.r2.val().clamp_min(1e-3).reshape([h, 1]);
        // -r1 ln(1 + r2 d), [H, 1] x [1, L] -> [H, L]
        let beta = (o.distance.clone() * r2).log1p().mul(r1).neg();
        ScoreTerms {
            bias: Some(PositionBias::Distance(beta)),
            ..ScoreTerms::default()
        }
    }
}
