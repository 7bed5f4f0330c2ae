//! p-RoPE in the byte LM: RoPE's frequencies for the fastest $\lfloor p\,d_h/2 \rfloor$ pairs,
//! 0 for the others ([`crate::encodings::rope::p_rope_inv_freq`]), through RoPE's fused
//! rotation. Nothing to train.

use burn::tensor::Device;

use super::rope;
use crate::encodings::rope::PairRope;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::ops::ScoreTerms;

/// p-RoPE's tables for $L$ positions (RoPE's, with its frequency vector).
#[derive(Debug, Clone)]
pub struct Objects(pub rope::Objects);

impl Objects {
    /// The tables for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the head width, base or fraction.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let scheme = PairRope::p_rope(c.head_dim(), c.rope_base, c.p_rope_kept)?;
        Ok(Self(rope::Objects::at(
            &rope::contiguous(len),
            &scheme.frequencies(),
            device,
        )))
    }
}

/// $q' = R_m q$, $k' = R_n k$, the dropped pairs at angle 0.
pub fn terms(o: &Objects) -> ScoreTerms {
    rope::terms(&o.0)
}
