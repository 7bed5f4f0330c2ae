//! DeBERTa in the byte LM: content-to-position $q_i \cdot K^r_{\delta(i,j)}$ and
//! position-to-content $k_j \cdot Q^r_{\delta(j,i)}$ over log buckets, the relative embeddings
//! projected by the layer's own $W_q, W_k$ ([`crate::encodings::deberta`]). Attention
//! receives $q K^{r\top}$ and $k Q^{r\top}$ `[B, H, L, 2s]` and the row of every distance,
//! read inside the fused attention's tiles (in the query's row for c2p, in the key's for p2c).

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};

use super::{split_heads, LayerInput};
use crate::encodings::deberta::LogBuckets;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::{normal, param2};
use crate::lm::ops::{DistanceIndex, Gathered, ScoreTerms};

/// DeBERTa's relative embeddings, projected by the layer's own $W_q, W_k$.
#[derive(Module, Debug)]
pub struct DebertaParams {
    /// $E^r$, `[2s, d_model]`.
    pub rel: Param<Tensor<2>>,
}

/// DeBERTa's index for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\text{clip}(\text{bucket}(d) + s, 0, 2s - 1)$ for distances $d = i - j = 0..L$
    /// ([`LogBuckets::index`]).
    pub index: DistanceIndex,
}

impl Objects {
    /// The index for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the bucket configuration.
    pub fn new(c: &ModelConfig, len: usize) -> Result<Self> {
        let buckets = LogBuckets::new(c.deberta_bucket_size, c.deberta_max_position)?;
        Ok(Self {
            index: (0..len).map(|d| buckets.index(d as i64)).collect(),
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

    /// $t_{ij}$ = c2p $q_i \cdot K^r_{\text{idx}(i-j)}$ + p2c $k_j \cdot Q^r_{\text{idx}(i-j)}$.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        let h = input.config.heads;
        // K^r = E^r W_k, Q^r = E^r W_q, [H, 2s, dh]
        let pos_key = split_heads(input.key.forward(self.rel.val()), h);
        let pos_query = split_heads(input.query.forward(self.rel.val()), h);
        // x . P^r for every bucket, [B, H, L, 2s], read at column idx(i - j)
        let table = |x: &Tensor<4>, pos: Tensor<3>| Gathered {
            table: x.clone().matmul(pos.swap_dims(1, 2).unsqueeze::<4>()),
            index: o.index.clone(),
        };
        // c2p in the query's row: q_i . K^r_idx; p2c in the key's row: k_j . Q^r_idx
        ScoreTerms {
            query_table: Some(table(input.q, pos_key)),
            key_table: Some(table(input.k, pos_query)),
            ..ScoreTerms::default()
        }
    }
}
