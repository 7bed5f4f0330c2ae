//! The sinusoidal table in the byte LM, added to the input ([`crate::encodings::sinusoidal`],
//! interleaved layout, base 10000).

use burn::tensor::{Device, Tensor};

use crate::encodings::sinusoidal::SinusoidalAbsolute;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::tensor2;

/// The table for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects {
    /// $PE_{p, 2i} = \sin(p / 10000^{2i/d})$, $PE_{p, 2i+1} = \cos(\cdot)$, `[L, d_model]`.
    pub table: Tensor<2>,
}

impl Objects {
    /// The table for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the width.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let table = SinusoidalAbsolute::new(c.d_model)?.table(len)?;
        Ok(Self {
            table: tensor2(&table, device),
        })
    }
}
