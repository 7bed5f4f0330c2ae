//! T5 in the byte LM: a learned scalar per bucket of $j - i$ and head, added to the scores
//! ([`crate::encodings::t5`], causal buckets). Attention receives the table looked up at the
//! bucket of every distance, a vector over distance per head `[H, L]`, expanded inside the
//! fused attention's tiles; its gradient flows back to the table through the lookup.

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor, TensorData};

use super::LayerInput;
use crate::encodings::t5::{T5Bias, T5Buckets};
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::param2;
use crate::lm::ops::{PositionBias, ScoreTerms};

/// T5's learned bias per bucket and head.
#[derive(Module, Debug)]
pub struct T5Params {
    /// $B$, `[num_buckets, heads]`.
    pub table: Param<Tensor<2>>,
}

/// T5's (and TUPE's) buckets for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// The bucket of $j - i = -d$ for every distance $d = 0..L$ from a query to an earlier
    /// key (causal, [`T5Buckets::bucket`]), `[L]`.
    pub buckets: Tensor<1, Int>,
}

impl Objects {
    /// The buckets for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the bucket configuration.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let buckets = T5Buckets::new(c.t5_num_buckets, c.t5_max_distance, false)?;
        // bucket(key - query) = bucket(-d), [L]
        let per_distance: Vec<i64> = (0..len)
            .map(|d| buckets.bucket(-(d as i64)) as i64)
            .collect();
        Ok(Self {
            buckets: Tensor::from_data(TensorData::new(per_distance, [len]), device),
        })
    }

    /// The bias $\beta_{h,d} = B[\text{bucket}(-d), h]$ of every head at every distance,
    /// `[H, L]`.
    pub fn bias(&self, table: &Param<Tensor<2>>) -> PositionBias {
        // B[bucket(-d), h], [L, H] -> [H, L]
        PositionBias::Distance(table.val().select(0, self.buckets.clone()).swap_dims(0, 1))
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
