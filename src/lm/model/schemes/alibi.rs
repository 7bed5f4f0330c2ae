//! ALiBi in the byte LM: a fixed penalty $-m_h (i - j)$ per head added to the scores
//! ([`crate::encodings::alibi`]); nothing to train.

use burn::tensor::{Device, Tensor, TensorData};

use crate::encodings::alibi::alibi_bias;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::ops::ScoreTerms;

/// ALiBi's bias for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $b_{ij} = -m_h (i - j)$ of every head, `[H, L, L]`.
    pub bias: Tensor<3>,
}

impl Objects {
    /// The bias for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the head count.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let h = c.heads;
        let bias = alibi_bias(h, len, len)?;
        let bias = bias.as_standard_layout();
        Ok(Self {
            bias: Tensor::from_data(
                TensorData::new(bias.iter().copied().collect::<Vec<_>>(), [h, len, len]),
                device,
            ),
        })
    }
}

/// The fixed bias $b_{ij}$.
pub fn terms(o: &Objects) -> ScoreTerms {
    ScoreTerms {
        bias: Some(o.bias.clone()),
        ..ScoreTerms::default()
    }
}
