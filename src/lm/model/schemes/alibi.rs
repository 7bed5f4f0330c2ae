//! ALiBi in the byte LM: a fixed penalty $-m_h (i - j)$ per head added to the scores
//! ([`crate::encodings::alibi`]); nothing to train. Attention receives it as a vector over
//! distance per head, `[H, L]`, expanded inside the fused attention's tiles.

use burn::tensor::{Device, Tensor};

use crate::encodings::alibi::Alibi;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::tensor2;
use crate::lm::ops::{PositionBias, ScoreTerms};

/// ALiBi's bias for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $\beta_{h,d} = -m_h d$ for distances $d = 0..L$ ([`Alibi::distance_bias`]), `[H, L]`.
    pub bias: Tensor<2>,
}

impl Objects {
    /// The bias for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the head count.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let alibi = Alibi::new(c.heads)?;
        Ok(Self {
            bias: tensor2(&alibi.distance_bias(len), device),
        })
    }
}

/// The fixed bias $b_{ij} = \beta_{h,\,i-j}$.
pub fn terms(o: &Objects) -> ScoreTerms {
    ScoreTerms {
        bias: Some(PositionBias::Distance(o.bias.clone())),
        ..ScoreTerms::default()
    }
}
