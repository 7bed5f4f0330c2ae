//! T5 in the byte LM: a learned scalar per bucket of $j - i$ and head, added to the scores
//! ([`crate::encodings::t5`], causal buckets).

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::LayerInput;
use crate::encodings::t5::{T5Bias, T5Buckets};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::param2;
use crate::lm::ops::ScoreTerms;

/// T5's learned bias per bucket and head.
#[derive(Module, Debug)]
pub struct T5Params {
    /// $B$, `[num_buckets, heads]`.
    pub table: Param<Tensor<2>>,
}

/// T5's (and TUPE's) buckets for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// The bucket of $j - i$ (causal, [`T5Buckets::matrix`]), flattened `[L*L]`.
    pub buckets: Tensor<1, Int>,
    /// $L$.
    pub len: usize,
}

impl Objects {
    /// The buckets for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the bucket configuration.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let buckets = T5Buckets::new(c.t5_num_buckets, c.t5_max_distance, false)?;
        // bucket(key - query), [L, L] -> [L*L]
        let flat: Vec<i64> = buckets
            .matrix(len, len)?
            .iter()
            .map(|&b| b as i64)
            .collect();
        Ok(Self {
            buckets: Tensor::from_data(TensorData::new(flat, [len * len]), device),
            len,
        })
    }

    /// The bias $B[\text{bucket}(j - i), h]$ of every head, `[H, L, L]`.
    pub fn bias(&self, table: &Param<Tensor<2>>) -> Tensor<3> {
        let h = table.dims()[1];
        let l = self.len;
        // B[bucket(j - i), h], [L*L, H] -> [H, L, L]
        table
            .val()
            .select(0, self.buckets.clone())
            .reshape([l, l, h])
            .permute([2, 0, 1])
    }
}

/// T5's table from [`T5Bias::new`] (causal, $\mathcal N(0, 1)$), scaled to
/// $\mathcal N(0, 0.1^2)$: a mild start.
///
/// # Errors
/// When the encodings reject the bucket configuration.
pub fn table(c: &ModelConfig, seed: u64, device: &Device) -> Result<Param<Tensor<2>>> {
    let t5 = T5Bias::new(c.t5_num_buckets, c.t5_max_distance, false, c.heads, seed)?;
    Ok(param2(&(t5.table * 0.1), device))
}

impl T5Params {
    /// The table ([`table`]).
    ///
    /// # Errors
    /// When the encodings reject the bucket configuration.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        Ok(Self {
            table: table(c, seed, device)?,
        })
    }

    /// The bias $b_{ij} = B[\text{bucket}(j - i), h]$.
    pub fn terms(&self, o: &Objects, _input: &LayerInput) -> ScoreTerms {
        ScoreTerms {
            bias: Some(o.bias(&self.table)),
            ..ScoreTerms::default()
        }
    }
}
