//! Shaw et al. in the byte LM: learned relative key and value vectors at the clipped distance
//! $\text{clip}(j - i, -k, k)$, shared by the heads ([`crate::encodings::shaw`]). Attention
//! receives $q\,w^{K\top}$ `[B, H, L, 2k+1]` and the row of every distance, read inside the
//! fused attention's tiles, and the value table with the same rows.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};

use super::LayerInput;
use crate::encodings::shaw::{relative_index, ShawRelative};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::param2;
use crate::lm::ops::{DistanceIndex, Gathered, RelativeValues, ScoreTerms};

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
    /// $\text{clip}(-d, -k, k) + k$ for distances $d = 0..L$ ([`relative_index`] of
    /// $j - i = -d$).
    pub index: DistanceIndex,
}

impl Objects {
    /// The index for `len` positions.
    pub fn new(c: &ModelConfig, len: usize) -> Self {
        Self {
            index: (0..len)
                .map(|d| relative_index(-(d as i64), c.shaw_max_relative))
                .collect(),
        }
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

    /// $t_{ij} = q_i \cdot w^K_{\text{idx}(i-j)}$ and the values
    /// $a^V_{ij} = w^V_{\text{idx}(i-j)}$.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        // q_i . w^K_r for every row r, [B, H, L, 2k+1], read at column idx(i - j)
        let qw = input
            .q
            .clone()
            .matmul(self.keys.val().transpose().unsqueeze::<4>());
        ScoreTerms {
            query_table: Some(Gathered {
                table: qw,
                index: o.index.clone(),
            }),
            values: Some(RelativeValues {
                table: self.values.val(),
                index: o.index.clone(),
            }),
            ..ScoreTerms::default()
        }
    }
}
