//! Transformer-XL in the byte LM: $(q_i + u) \cdot k_j + (q_i + v) \cdot r_{i-j}$ with
//! $r_\delta = R_\delta W_R$ projected from sinusoidal distances ([`crate::encodings::xl`]).
//! Attention receives $q + v$ `[B, H, L, d_h]` and $r_\delta$ for every distance
//! `[H, L, d_h]`; their products at $\delta = i - j$ are formed inside the fused attention's
//! tiles (the paper's shift is a read at a moving offset there), never as an `[L, L]` matrix.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};
use ndarray::Array2;

use super::{split_heads, LayerInput};
use crate::encodings::sinusoidal::{sinusoidal_embedding, SinusoidalLayout, DEFAULT_BASE};
use crate::encodings::xl::{TransformerXl, XlDirection};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{param2, tensor2};
use crate::lm::ops::{DistanceKeys, ScoreTerms};

/// Transformer-XL's projection of the sinusoidal distances and its two global biases.
#[derive(Module, Debug)]
pub struct XlParams {
    /// $W_R$ of every head side by side, `[r_dim, d_model]`.
    pub w_r: Param<Tensor<2>>,
    /// $u$ (content bias), `[heads, d_head]`.
    pub u: Param<Tensor<2>>,
    /// $v$ (position bias), `[heads, d_head]`.
    pub v: Param<Tensor<2>>,
}

/// Transformer-XL's distances for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// Sinusoidal $R_\delta$ for the distances $\delta = 0, \dots, L-1$, `[L, d_model]`.
    pub r: Tensor<2>,
}

impl Objects {
    /// The distances for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the width.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let distances: Vec<f64> = (0..len).map(|d| d as f64).collect();
        let r = sinusoidal_embedding(
            &distances,
            c.d_model,
            DEFAULT_BASE,
            SinusoidalLayout::Concatenated,
        )?;
        Ok(Self {
            r: tensor2(&r, device),
        })
    }
}

impl XlParams {
    /// One [`TransformerXl`] per head ($W_R$ `[r_dim, d_head]`, $u$, $v$ `[d_head]`), seeds
    /// `seed + head`, laid side by side.
    ///
    /// # Errors
    /// When the encodings reject the sizes.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let (h, dh, d) = (c.heads, c.head_dim(), c.d_model);
        let heads = (0..h)
            .map(|i| TransformerXl::new(d, dh, XlDirection::Causal, seed + i as u64))
            .collect::<Result<Vec<_>>>()?;
        let w_r = Array2::from_shape_fn((d, d), |(r, c)| heads[c / dh].w_r[[r, c % dh]]);
        let u = Array2::from_shape_fn((h, dh), |(i, c)| heads[i].u[c]);
        let v = Array2::from_shape_fn((h, dh), |(i, c)| heads[i].v[c]);
        Ok(Self {
            w_r: param2(&w_r, device),
            u: param2(&u, device),
            v: param2(&v, device),
        })
    }

    /// $u$ on the content score and $t_{ij} = (q_i + v) \cdot r_{i-j}$.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        let q = input.q;
        let [_, h, _, dh] = q.dims();
        // r_delta = R_delta W_R for distances 0..L, [H, L, dh]
        let r = split_heads(o.r.clone().matmul(self.w_r.val()), h);
        ScoreTerms {
            content_bias: Some(self.u.val()),
            distance_keys: Some(DistanceKeys {
                // q_i + v, [B, H, L, dh]
                queries: q.clone() + self.v.val().reshape([1, h, 1, dh]),
                keys: r,
            }),
            ..ScoreTerms::default()
        }
    }
}
