//! The RoPE/NoPE hybrid in the byte LM (Llama 4's iRoPE, Command A): RoPE in every layer but
//! every `nope_every`-th, which has no position encoding at all
//! ([`crate::encodings::nope::is_nope_layer`]). A property of each layer's position
//! parameters, which know their layer's index; attention sees RoPE's rotation or nothing. All
//! layers attend globally here (Llama 4 and Command A make the RoPE layers local), and the NoPE
//! layers' queries are not rescaled (Llama 4's temperature is 1 below position 8191).

use burn::module::Module;
use burn::tensor::Device;

use super::{rope, LayerInput};
use crate::encodings::nope::is_nope_layer;
use crate::encodings::rope::RopeScaling;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::ops::ScoreTerms;

/// A layer of the hybrid: its index (no trainable parameters).
#[derive(Module, Debug)]
pub struct RopeNopeLayer {
    /// The layer's index, from 0.
    pub layer: usize,
}

/// The RoPE layers' tables for $L$ positions.
#[derive(Debug, Clone)]
pub struct Objects(pub rope::Objects);

impl Objects {
    /// RoPE's tables for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the head width or base.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        Ok(Self(rope::Objects::new(c, len, RopeScaling::None, device)?))
    }
}

impl RopeNopeLayer {
    /// Whether this layer has no position encoding.
    pub fn is_nope(&self, c: &ModelConfig) -> bool {
        is_nope_layer(self.layer, c.nope_every)
    }

    /// Nothing in a NoPE layer, RoPE's rotation in the others.
    pub fn terms(&self, o: &Objects, input: &LayerInput) -> ScoreTerms {
        if self.is_nope(input.config) {
            ScoreTerms::default()
        } else {
            rope::terms(&o.0)
        }
    }
}
