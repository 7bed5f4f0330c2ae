//! RoPE in the byte LM (half layout): queries and keys rotated by $m\theta_i$ before their dot
//! product ([`crate::encodings::rope`]), with the context-extension scaling the model was
//! trained with or the one asked for at inference (PI, NTK, dynamic NTK, YaRN, Llama 3).

use burn::tensor::{Device, Tensor};
use ndarray::Array2;

use crate::encodings::rope::{rope_cos_sin, RopeConfig, RopeFrequencies, RopeScaling};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::tensor2;
use crate::lm::ops::{Rotation, ScoreTerms};

/// RoPE's tables for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\cos(m\theta_i)$ times the attention factor, repeated for both halves, `[L, d_head]`.
    pub cos: Tensor<2>,
    /// $\sin(m\theta_i)$ likewise.
    pub sin: Tensor<2>,
}

impl Objects {
    /// The tables for `len` positions under `scaling` (dynamic NTK looks at `len`).
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn new(c: &ModelConfig, len: usize, scaling: RopeScaling, device: &Device) -> Result<Self> {
        let config = RopeConfig::with_scaling(c.head_dim(), c.rope_base, scaling)?;
        let freqs = config.frequencies(Some(len))?;
        Ok(Self::at(&contiguous(len), &freqs, device))
    }

    /// The tables of `freqs` at `positions` (one row each).
    pub fn at(positions: &[f64], freqs: &RopeFrequencies, device: &Device) -> Self {
        let (cos, sin) = tables(positions, freqs, device);
        Self { cos, sin }
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
    // [L, d/2] -> [L, d] (both halves of the half layout)
    let both = |t: &Array2<f32>| {
        let t = tensor2(t, device);
        Tensor::cat(vec![t.clone(), t], 1)
    };
    (both(&cos), both(&sin))
}

/// $q' = R_m q$, $k' = R_n k$ in the half layout.
pub fn terms(o: &Objects) -> ScoreTerms {
    ScoreTerms {
        rotation: Some(Rotation::Half {
            cos: o.cos.clone(),
            sin: o.sin.clone(),
        }),
        ..ScoreTerms::default()
    }
}
