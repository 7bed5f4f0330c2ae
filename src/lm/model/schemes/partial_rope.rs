//! Partial RoPE in the byte LM: the first $r = \lfloor f d_h \rfloor$ channels' worth of pairs
//! rotated at $b^{-2i/r}$, the others at frequency 0 ([`crate::encodings::rope::partial_inv_freq`]),
//! in the half layout of RoPE's fused rotation: GPT-NeoX's partial rotary after a fixed
//! permutation of the channels. Nothing to train.

use burn::tensor::Device;

use super::rope;
use crate::encodings::rope::PairRope;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::ops::ScoreTerms;

/// Partial RoPE's tables for $L$ positions (RoPE's, with its frequency vector).
#[derive(Debug, Clone)]
pub struct Objects(pub rope::Objects);

impl Objects {
    /// The tables for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the head width, base or factor.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let scheme = PairRope::partial(c.head_dim(), c.rope_base, c.partial_rotary_factor)?;
        Ok(Self(rope::Objects::at(
            &rope::contiguous(len),
            &scheme.frequencies(),
            device,
        )))
    }
}

/// $q' = R_m q$, $k' = R_n k$, the unrotated pairs at angle 0.
pub fn terms(o: &Objects) -> ScoreTerms {
    rope::terms(&o.0)
}
