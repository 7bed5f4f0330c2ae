//! DeBERTa in the byte LM: content-to-position $q_i \cdot K^r_{\delta(i,j)}$ and
//! position-to-content $k_j \cdot Q^r_{\delta(j,i)}$ over log buckets, the relative embeddings
//! projected by the layer's own $W_q, W_k$ ([`crate::encodings::deberta`]).

use burn::module::{Module, Param};
use burn::tensor::{Device, Int, Tensor};

use super::{split_heads, LayerInput};
use crate::encodings::deberta::LogBuckets;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{index2, normal, param2};
use crate::lm::ops::ScoreTerms;

/// DeBERTa's relative embeddings, projected by the layer's own $W_q, W_k$.
#[derive(Module, Debug)]
pub struct DebertaParams {
    /// $E^r$, `[2s, d_model]`.
    pub rel: Param<Tensor<2>>,
}

/// DeBERTa's index for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\text{clip}(\text{bucket}(i - j) + s, 0, 2s - 1)$ ([`LogBuckets::index_matrix`]),
    /// `[L, L]`.
    pub index: Tensor<2, Int>,
}

impl Objects {
    /// The index for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the bucket configuration.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let buckets = LogBuckets::new(c.deberta_bucket_size, c.deberta_max_position)?;
        Ok(Self {
            index: index2(&buckets.index_matrix(len, len)?, device),
        })
    }
}

impl DebertaParams {
    /// $E^r \sim \mathcal N(0, 1)$, `[2s, d_model]`.
    ///
    /// # Errors
    /// When the initialiser rejects the spread.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let rel = normal((2 * c.deberta_bucket_size, c.d_model), 1.0, seed)?;
        Ok(Self {
            rel: param2(&rel, device),
        })
    }

    /// $t_{ij}$ = c2p $q_i \cdot K^r_{\text{idx}_{ij}}$ + p2c $k_j \cdot Q^r_{\text{idx}_{ij}}$.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        let h = input.config.heads;
        // K^r = E^r W_k, Q^r = E^r W_q, [H, 2s, dh]
        let pos_key = split_heads(input.key.forward(self.rel.val()), h);
        let pos_query = split_heads(input.query.forward(self.rel.val()), h);
        // x . P^r for every bucket, [B, H, L, 2s], gathered at idx_ij (transposed: at idx_ji)
        let gathered = |x: &Tensor<4>, pos: Tensor<3>, transposed: bool| {
            let scores = x.clone().matmul(pos.swap_dims(1, 2).unsqueeze::<4>());
            input.ops.relative_gather(scores, &o.index, transposed)
        };
        // c2p: q_i . K^r_{idx_ij}; p2c: k_j . Q^r_{idx_ij} (the transposed gather)
        let c2p = gathered(input.q, pos_key, false);
        let p2c = gathered(input.k, pos_query, true);
        ScoreTerms {
            relative: Some(c2p + p2c),
            ..ScoreTerms::default()
        }
    }
}
