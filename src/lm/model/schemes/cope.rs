//! CoPE in the byte LM: per layer, `cope_max_pos` position embeddings shared by the heads
//! ([`crate::encodings::cope`]), counted by gates from the query's own logits. Attention
//! receives the embeddings as [`Contextual`] and adds $q_i \cdot e(p_{ij})$ after the scale.
//!
//! The count $p_{ij}$ needs every logit of a row before that row's softmax and differs for
//! every pair. The fused attention has them: a tile of query rows holds every key those rows
//! see, so it counts along each row and keeps only the tile's gates and counts
//! (`ops::fused::attention::contextual`): memory linear in $L$ in training and evaluation. The
//! composed attention expands the same term to `[B, H, L, L]` ([`reference::contextual_term`],
//! the specification).
//!
//! [`reference::contextual_term`]: crate::lm::ops::reference::contextual_term

use burn::module::{Module, Param};
use burn::tensor::{Device, Tensor};

use crate::encodings::cope::Cope;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::param2;
use crate::lm::ops::{Contextual, ScoreTerms};

/// CoPE's embeddings in one layer.
#[derive(Module, Debug)]
pub struct CopeParams {
    /// $e_p$, `[max_pos, d_h]`.
    pub pos_emb: Param<Tensor<2>>,
}

/// CoPE has no position-only object: its positions are counted from the logits.
#[derive(Debug, Clone)]
pub struct Objects;

impl CopeParams {
    /// The embeddings of [`Cope::new`]: zeros, as x-transformers.
    ///
    /// # Errors
    /// When the encodings reject `cope_max_pos` or the head width.
    pub fn init(c: &ModelConfig, device: &Device) -> Result<Self> {
        let cope = Cope::new(c.cope_max_pos, c.head_dim())?;
        Ok(Self {
            pos_emb: param2(&cope.pos_emb, device),
        })
    }

    /// $z_{ij} = q_i \cdot e(p_{ij})$, added after the scale.
    pub fn terms(&self, _o: &Objects) -> ScoreTerms {
        ScoreTerms {
            contextual: Some(Contextual {
                embeddings: self.pos_emb.val(),
            }),
            ..ScoreTerms::default()
        }
    }
}
