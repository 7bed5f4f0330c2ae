//! Transformer-XL in the byte LM: $(q_i + u) \cdot k_j + (q_i + v) \cdot r_{i-j}$ with
//! $r_\delta = R_\delta W_R$ projected from sinusoidal distances ([`crate::encodings::xl`]).

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor};
use ndarray::Array2;

use super::{split_heads, LayerInput};
use crate::encodings::sinusoidal::{sinusoidal_embedding, SinusoidalLayout, DEFAULT_BASE};
use crate::encodings::xl::{TransformerXl, XlDirection};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{index2, param2, tensor2};
use crate::lm::ops::ScoreTerms;

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
    /// Sinusoidal $R_\delta$ for $\delta = L-1, \dots, 0$, `[L, d_model]`.
    pub r: Tensor<2>,
    /// The shift as a gather index: column $L - 1 - i + j$ of the raw $(q_i + v) \cdot r$
    /// scores holds distance $i - j$ (for $j \le i$; $L - 1$ above the diagonal, which the
    /// causal mask removes), `[L, L]`.
    pub index: Tensor<2, Int>,
}

impl Objects {
    /// The distances for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the width.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let distances: Vec<f64> = (0..len).rev().map(|d| d as f64).collect();
        let r = sinusoidal_embedding(
            &distances,
            c.d_model,
            DEFAULT_BASE,
            SinusoidalLayout::Concatenated,
        )?;
        let shift = Array2::from_shape_fn((len, len), |(i, j)| {
            (len - 1 + j).saturating_sub(i).min(len - 1)
        });
        Ok(Self {
            r: tensor2(&r, device),
            index: index2(&shift, device),
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
        // r_delta = R_delta W_R for distances L-1..0, [H, L, dh]
        let r = split_heads(o.r.clone().matmul(self.w_r.val()), h);
        // (q_i + v) . r_delta for delta = L-1..0, [B, H, L, L], then shifted to delta = i - j
        let raw = (q.clone() + self.v.val().reshape([1, h, 1, dh]))
            .matmul(r.swap_dims(1, 2).unsqueeze::<4>());
        ScoreTerms {
            content_bias: Some(self.u.val()),
            relative: Some(input.ops.relative_gather(raw, &o.index, false)),
            ..ScoreTerms::default()
        }
    }
}
