//! Optimisation hyper-parameters ([`TrainConfig`]): batch, steps, the learning-rate schedule,
//! AdamW's weight decay, clipping, the seed and the validation loss, with the bounds one
//! training step must fit.

use serde::{Deserialize, Serialize};

use super::{
    ModelConfig, MAX_ATTENTION_ENTRIES, MAX_BATCH, MAX_STEPS, MAX_TOKENS_PER_STEP, MAX_VALID_BYTES,
};
use crate::error::{ensure, ensure_positive, Result};

/// Optimisation hyper-parameters. Defaults: the sweep's. Read from JSON, missing keys take the
/// defaults and unknown keys are an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Sequences per step; default 32.
    pub batch: usize,
    /// Total optimiser steps; default 600.
    pub steps: usize,
    /// Peak learning rate; default 3e-3.
    pub lr: f64,
    /// Linear warm-up steps; default 50.
    pub warmup: usize,
    /// Final learning rate as a fraction of the peak (cosine decay); default 0.1.
    pub min_lr_ratio: f64,
    /// AdamW weight decay; default 0.01.
    pub weight_decay: f32,
    /// Gradient-norm clipping; default 1.0.
    pub grad_clip: f32,
    /// Seed of the weights and of the data order; default 0.
    pub seed: u64,
    /// Steps between two measurements of the validation loss, and at the last step (0: none);
    /// default 0.
    pub valid_every: usize,
    /// Bytes of the validation split scored at each measurement: windows of `train_len` from
    /// its start, without overlap; default 16384.
    pub valid_bytes: usize,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            batch: 32,
            steps: 600,
            lr: 3e-3,
            warmup: 50,
            min_lr_ratio: 0.1,
            weight_decay: 0.01,
            grad_clip: 1.0,
            seed: 0,
            valid_every: 0,
            valid_bytes: 16_384,
        }
    }
}

impl TrainConfig {
    /// The learning rate at `step` (0-based): linear warm-up, then cosine to
    /// `min_lr_ratio * lr` at `steps`.
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.lr * (step + 1) as f64 / self.warmup as f64;
        }
        let span = (self.steps.saturating_sub(self.warmup)).max(1) as f64;
        let t = ((step - self.warmup) as f64 / span).min(1.0);
        let cos = 0.5 * (1.0 + (std::f64::consts::PI * t).cos());
        self.lr * (self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cos)
    }

    /// Checks every field.
    ///
    /// # Errors
    /// A batch of 0 or above [`MAX_BATCH`], 0 steps or more than [`MAX_STEPS`], a learning
    /// rate that is not a finite positive number, a final ratio outside 0..=1, a negative or
    /// non-finite weight decay, a clipping norm that is not finite and positive, a validation
    /// interval above [`MAX_STEPS`] or a validation budget outside 1..=[`MAX_VALID_BYTES`].
    pub fn validate(&self) -> Result<()> {
        ensure(
            (1..=MAX_BATCH).contains(&self.batch),
            "batch",
            self.batch,
            &format!("1 to {MAX_BATCH}"),
        )?;
        ensure(
            (1..=MAX_STEPS).contains(&self.steps),
            "steps",
            self.steps,
            &format!("1 to {MAX_STEPS}"),
        )?;
        ensure(
            self.warmup <= MAX_STEPS,
            "warmup",
            self.warmup,
            &format!("at most {MAX_STEPS}"),
        )?;
        ensure(
            self.lr.is_finite() && self.lr > 0.0 && self.lr <= 10.0,
            "lr",
            self.lr,
            "a finite number > 0 and at most 10",
        )?;
        ensure(
            self.min_lr_ratio.is_finite() && (0.0..=1.0).contains(&self.min_lr_ratio),
            "min_lr_ratio",
            self.min_lr_ratio,
            "a number from 0 to 1",
        )?;
        ensure(
            self.weight_decay.is_finite() && self.weight_decay >= 0.0,
            "weight_decay",
            self.weight_decay,
            "a finite number >= 0",
        )?;
        ensure_positive("grad_clip", self.grad_clip)?;
        ensure(
            self.valid_every <= MAX_STEPS,
            "valid_every",
            self.valid_every,
            &format!("at most {MAX_STEPS} (0: no validation loss)"),
        )?;
        ensure(
            (1..=MAX_VALID_BYTES).contains(&self.valid_bytes),
            "valid_bytes",
            self.valid_bytes,
            &format!("1 to {MAX_VALID_BYTES}"),
        )
    }

    /// Checks that one step of `model` fits: at most [`MAX_TOKENS_PER_STEP`] bytes and
    /// [`MAX_ATTENTION_ENTRIES`] attention weights.
    ///
    /// # Errors
    /// A batch too large for the model's training length and heads.
    pub fn validate_for(&self, model: &ModelConfig) -> Result<()> {
        self.validate()?;
        let tokens = self.batch.saturating_mul(model.train_len);
        ensure(
            tokens <= MAX_TOKENS_PER_STEP,
            "batch x train_len",
            format!("{} x {} = {tokens}", self.batch, model.train_len),
            &format!("at most {MAX_TOKENS_PER_STEP} bytes per step"),
        )?;
        let entries = tokens
            .saturating_mul(model.train_len)
            .saturating_mul(model.heads);
        ensure(
            entries <= MAX_ATTENTION_ENTRIES,
            "batch x heads x train_len^2",
            entries,
            &format!("at most {MAX_ATTENTION_ENTRIES} attention weights per step"),
        )
    }
}
