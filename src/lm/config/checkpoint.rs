//! `config.json` of a checkpoint ([`CheckpointInfo`]) and the precision of its weights
//! ([`WeightDtype`]); the rest of the on-disk format is in `lm::checkpoint` (with the `train` feature).

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::{ModelConfig, TrainConfig};
use crate::error::{Error, Result};

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
    /// The digest of the weights of `init_from` when the fine-tune started (`lm::checkpoint::digest`, with the `train` feature).
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

/// Reads a JSON file into `T` (whose unknown keys are errors).
///
/// # Errors
/// [`Error::Io`] for an unreadable file, [`Error::Format`] naming the key or the line for bad
/// content.
pub fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    let text = fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    serde_json::from_str(&text).map_err(|e| {
        // serde names unknown keys itself; for a value of the wrong type, show its line
        let line = text
            .lines()
            .nth(e.line().saturating_sub(1))
            .map(str::trim)
            .filter(|l| e.line() > 0 && !l.is_empty());
        match line {
            Some(l) if e.is_data() => format_error(path, format!("{e}: `{l}`")),
            _ => format_error(path, e),
        }
    })
}

pub(crate) fn io_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

pub(crate) fn format_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
