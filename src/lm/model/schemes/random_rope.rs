//! Randomized RoPE in the byte LM (Ruoss et al. 2023): in training, each sequence's queries
//! and keys are rotated at its own ordered sample of $L$ positions from $[0, N)$
//! ([`RandomPositions::training`], fresh every step, fixed by the run's seed and the step), a
//! table per sequence in RoPE's fused rotation ([`Rotation::Sequences`]); at evaluation, at
//! the positions of [`RandomPositions::evaluation`], one table for the batch. Nothing to train.

use burn::tensor::{Device, Tensor};

use super::rope;
use crate::encodings::rope::{RandomEval, RandomPositions, RopeConfig};
use crate::error::{ensure, Result};
use crate::lm::config::ModelConfig;
use crate::lm::ops::{Rotation, ScoreTerms};

/// Randomized RoPE's tables.
#[derive(Debug, Clone)]
pub enum Objects {
    /// Evaluation: one position per index, shared by the batch (RoPE's tables).
    Shared(rope::Objects),
    /// A training step: a row of positions per sequence, `cos`, `sin` `[B, L, d_head]`.
    PerSequence {
        /// $\cos(p_{b,i}\theta_i)$, both halves.
        cos: Tensor<3>,
        /// $\sin(p_{b,i}\theta_i)$, both halves.
        sin: Tensor<3>,
    },
}

/// $N$ and the evaluation positions of `c`.
fn positions(c: &ModelConfig) -> Result<RandomPositions> {
    RandomPositions::new(c.random_positions_max, c.random_positions_eval)
}

impl Objects {
    /// The tables of an evaluation of `len` positions.
    ///
    /// # Errors
    /// When the encodings reject the configuration, or `len` exceeds $N$ with sampled
    /// evaluation positions.
    pub fn new(c: &ModelConfig, len: usize, device: &Device) -> Result<Self> {
        ensure(
            c.random_positions_eval == RandomEval::Contiguous || len <= c.random_positions_max,
            "length",
            len,
            &format!(
                "at most random_positions_max = {} with sampled evaluation positions (L distinct \
                 positions out of [0, N)); random_positions_eval \"contiguous\" evaluates at 0..L",
                c.random_positions_max
            ),
        )?;
        let freqs = RopeConfig::new(c.head_dim(), c.rope_base)?.frequencies(None)?;
        let at: Vec<f64> = positions(c)?
            .evaluation(len)?
            .into_iter()
            .map(|p| p as f64)
            .collect();
        Ok(Self::Shared(rope::Objects::at(&at, &freqs, device)))
    }

    /// The tables of training step `step` of a run seeded by `seed`, `batch` sequences of
    /// `len` positions, each at its own sample.
    ///
    /// # Errors
    /// When the encodings reject the configuration or `len` exceeds $N$.
    pub fn training(
        c: &ModelConfig,
        (batch, len): (usize, usize),
        seed: u64,
        step: u64,
        device: &Device,
    ) -> Result<Self> {
        let freqs = RopeConfig::new(c.head_dim(), c.rope_base)?.frequencies(None)?;
        let (cos, sin): (Vec<Tensor<2>>, Vec<Tensor<2>>) = positions(c)?
            .training(batch, len, seed, step)?
            .into_iter()
            .map(|p| {
                let at: Vec<f64> = p.into_iter().map(|p| p as f64).collect();
                rope::tables(&at, &freqs, device)
            })
            .unzip();
        Ok(Self::PerSequence {
            cos: Tensor::stack(cos, 0),
            sin: Tensor::stack(sin, 0),
        })
    }
}

/// RoPE's rotation at the drawn positions.
pub fn terms(o: &Objects) -> ScoreTerms {
    match o {
        Objects::Shared(o) => rope::terms(o),
        Objects::PerSequence { cos, sin } => ScoreTerms {
            rotation: Some(Rotation::Sequences {
                cos: cos.clone(),
                sin: sin.clone(),
            }),
            ..ScoreTerms::default()
        },
    }
}
