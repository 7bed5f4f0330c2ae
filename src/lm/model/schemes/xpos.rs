//! xPos in the byte LM: RoPE's rotation of adjacent pairs with an exponential scale
//! $\zeta^{\pm m/B}$ on queries and keys ([`crate::encodings::xpos`]), positions centred as
//! torchscale does.

use burn::tensor::{Device, Tensor};

use crate::encodings::sinusoidal::DEFAULT_BASE;
use crate::encodings::xpos::XPos;
use crate::error::Result;
use crate::lm::config::ModelConfig;
use crate::lm::model::init::tensor2;
use crate::lm::ops::{Rotation, ScoreTerms};

/// xPos's scaled tables ([`XPos::tables`]) for $L$ positions, `[L, d_head/2]` each.
#[derive(Debug, Clone)]
pub struct Objects {
    /// Query $\zeta^{m/B}\cos(m\theta_i)$.
    pub q_cos: Tensor<2>,
    /// Query $\zeta^{m/B}\sin(m\theta_i)$.
    pub q_sin: Tensor<2>,
    /// Key $\zeta^{-n/B}\cos(n\theta_i)$.
    pub k_cos: Tensor<2>,
    /// Key $\zeta^{-n/B}\sin(n\theta_i)$.
    pub k_sin: Tensor<2>,
}

impl Objects {
    /// The tables for `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        let xpos = XPos::new(c.head_dim(), DEFAULT_BASE, c.xpos_scale_base)?;
        let (qp, kp) = XPos::centred_positions(len, len);
        let (q_cos, q_sin) = xpos.tables(&qp, false)?;
        let (k_cos, k_sin) = xpos.tables(&kp, true)?;
        Ok(Self {
            q_cos: tensor2(&q_cos, device),
            q_sin: tensor2(&q_sin, device),
            k_cos: tensor2(&k_cos, device),
            k_sin: tensor2(&k_sin, device),
        })
    }
}

/// Queries and keys rotated pairwise and scaled, each with its own tables.
pub fn terms(o: &Objects) -> ScoreTerms {
    ScoreTerms {
        rotation: Some(Rotation::Pairs {
            q_cos: o.q_cos.clone(),
            q_sin: o.q_sin.clone(),
            k_cos: o.k_cos.clone(),
            k_sin: o.k_sin.clone(),
        }),
        ..ScoreTerms::default()
    }
}
