//! `config.json` of a checkpoint ([`CheckpointInfo`]) and the precision of its weights
//! ([`WeightDtype`]); the rest of the on-disk format is in `lm::checkpoint` (with the `train` feature).

use serde::{Deserialize, Serialize};

use super::{ModelConfig, TrainConfig};
use crate::error::Result;

/// Storage precision of checkpoint weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    /// 32-bit floats.
    #[default]
    F32,
    /// IEEE half precision (what the shipped checkpoints use).
    F16,
}

/// `config.json` of a checkpoint. Unknown keys are an error when it is read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckpointInfo {
    /// The model.
    pub model: ModelConfig,
    /// How it was trained.
    pub train: TrainConfig,
    /// Steps done.
    pub step: usize,
    /// Trainable parameters.
    pub params: usize,
    /// Precision of `model.safetensors`.
    pub dtype: WeightDtype,
    /// The checkpoint this one was fine-tuned from, if any.
    pub init_from: Option<String>,
    /// The digest of the weights of `init_from` when the fine-tune started ([`crate::io::digest`]).
    #[serde(default)]
    pub init_digest: Option<String>,
    /// The digest of the training text (`train.txt`) the steps were trained on.
    #[serde(default)]
    pub corpus_digest: Option<String>,
    /// The digest of `model.safetensors` written with this file (checked when loading).
    #[serde(default)]
    pub weights_digest: Option<String>,
    /// Mean training loss over the last 20 steps, nats per byte.
    pub final_train_loss: Option<f64>,
    /// Wall time of the training so far, seconds.
    pub train_seconds: f64,
    /// Training throughput of the last run, bytes per second (steps after the first).
    #[serde(default)]
    pub tokens_per_second: Option<f64>,
}

impl CheckpointInfo {
    /// A checkpoint of `model` and `train` before its first step (digests unknown).
    pub fn new(model: ModelConfig, train: TrainConfig, params: usize, dtype: WeightDtype) -> Self {
        Self {
            model,
            train,
            step: 0,
            params,
            dtype,
            init_from: None,
            init_digest: None,
            corpus_digest: None,
            weights_digest: None,
            final_train_loss: None,
            train_seconds: 0.0,
            tokens_per_second: None,
        }
    }

    /// Checks the configurations and that the steps done do not exceed the steps planned.
    ///
    /// # Errors
    /// As [`ModelConfig::validate`] and [`TrainConfig::validate`]; `step > train.steps`.
    pub fn validate(&self) -> Result<()> {
        self.model.validate()?;
        self.train.validate()?;
        crate::error::ensure(
            self.step <= self.train.steps,
            "step",
            self.step,
            &format!("at most train.steps = {}", self.train.steps),
        )
    }
}
