//! Shaw et al. in the byte LM: learned relative key and value vectors at the clipped distance
//! $\text{clip}(j - i, -k, k)$, shared by the heads ([`crate::encodings::shaw`]).

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor};

use super::LayerInput;
use crate::encodings::shaw::{relative_index_matrix, ShawRelative};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{index2, param2};
use crate::lm::ops::{RelativeValues, ScoreTerms};

/// Shaw et al.'s relative key and value vectors, shared by the heads.
#[derive(Module, Debug)]
pub struct ShawParams {
    /// $w^K$, `[2k+1, d_head]`.
    pub keys: Param<Tensor<2>>,
    /// $w^V$, `[2k+1, d_head]`.
    pub values: Param<Tensor<2>>,
}

/// Shaw's index for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\text{clip}(j - i, -k, k) + k$, `[L, L]`.
    pub index: Tensor<2, Int>,
}

impl Objects {
    /// The index for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the clipping distance.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let index = relative_index_matrix(len, len, c.shaw_max_relative)?;
        Ok(Self {
            index: index2(&index, device),
        })
    }
}

impl ShawParams {
    /// $w^K, w^V$ from [`ShawRelative::new`] ($\mathcal N(0, 0.1^2)$).
    ///
    /// # Errors
    /// When the encodings reject the sizes.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let shaw = ShawRelative::new(c.shaw_max_relative, c.head_dim(), 0.1, seed)?;
        Ok(Self {
            keys: param2(&shaw.keys, device),
            values: param2(&shaw.values, device),
        })
    }

    /// $t_{ij} = q_i \cdot w^K_{\text{idx}_{ij}}$ and the values $a^V_{ij} = w^V_{\text{idx}_{ij}}$.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        // (q w^K^T)_{i, idx_ij}: [B, H, L, 2k+1] -> [B, H, L, L]
        let qw = input
            .q
            .clone()
            .matmul(self.keys.val().transpose().unsqueeze::<4>());
        ScoreTerms {
            relative: Some(input.ops.relative_gather(qw, &o.index, false)),
            values: Some(RelativeValues {
                table: self.values.val(),
                index: o.index.clone(),
            }),
            ..ScoreTerms::default()
        }
    }
}
