//! TUPE in the byte LM: the untied absolute term $(p_i U^Q) \cdot (p_j U^K)$ beside the
//! content score, plus T5's bucket bias ([`crate::encodings::tupe`]); the absolute embeddings
//! $p$ are a model-level table ([`super::AbsolutePositions::Tupe`]). Attention receives the
//! projected rows $p U^Q$, $p U^K$ `[H, L, d_h]` (their products are formed inside the fused
//! attention's tiles) and T5's vector over distance.

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};

use super::{split_heads, t5, AbsoluteRows, LayerInput};
use crate::encodings::tupe::Tupe;
use crate::error::{Error, Result};
use crate::lm::config::ModelConfig;
use crate::lm::model::init::param2;
use crate::lm::ops::{ScoreTerms, Untied};

/// TUPE's untied projections of the absolute embeddings and its relative bucket bias (T5's,
/// whose on-disk name it keeps: `t5_table`).
#[derive(Module, Debug)]
pub struct TupeParams {
    /// $U^Q$ of every head side by side, `[d_model, d_model]`.
    pub u_q: Param<Tensor<2>>,
    /// $U^K$, `[d_model, d_model]`.
    pub u_k: Param<Tensor<2>>,
    /// The bucket bias $B$, `[num_buckets, heads]`.
    pub table: Param<Tensor<2>>,
}

/// The absolute embeddings $p$, `[max_positions, d_model]`, from [`Tupe::new`] (seed
/// `seed + 7`).
///
/// # Errors
/// When the encodings reject the sizes.
pub fn table(c: &ModelConfig, seed: u64, device: &Device) -> Result<Param<Tensor<2>>> {
    let tupe = Tupe::new(c.max_positions, c.d_model, c.d_model, seed + 7, None)?;
    Ok(param2(&tupe.positions, device))
}

impl TupeParams {
    /// T5's table ([`t5::table`]) and $U^Q, U^K \sim \mathcal N(0, 1/d_{model})$ from
    /// [`Tupe::new`] (seed `seed + 1`).
    ///
    /// # Errors
    /// When the encodings reject the sizes.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Self> {
        let table = t5::table(c, seed, device)?;
        let d = c.d_model;
        let tupe = Tupe::new(1, d, d, seed + 1, None)?;
        Ok(Self {
            u_q: param2(&tupe.u_q, device),
            u_k: param2(&tupe.u_k, device),
            table,
        })
    }

    /// $a_{ij} = (p_i U^Q) \cdot (p_j U^K)$ and the bucket bias $b_{ij}$.
    ///
    /// # Errors
    /// When the model-level rows are not TUPE's.
    pub fn terms(&self, o: &t5::Objects, input: &LayerInput) -> Result<ScoreTerms> {
        let AbsoluteRows::Untied(p) = input.rows else {
            return Err(Error::Conflict(
                "TUPE's layers need the model's untied absolute rows".into(),
            ));
        };
        let h = input.config.heads;
        // p U^Q, p U^K, [H, L, dh]
        let pos_query = split_heads(p.clone().matmul(self.u_q.val()), h);
        let pos_key = split_heads(p.clone().matmul(self.u_k.val()), h);
        Ok(ScoreTerms {
            untied: Some(Untied {
                queries: pos_query,
                keys: pos_key,
            }),
            bias: Some(o.bias(&self.table)),
            ..ScoreTerms::default()
        })
    }
}
