//! What a checkpoint folder holds: the names of its files, `state.json` ([`TrainState`]),
//! `config.json` ([`CheckpointInfo`], a configuration type usable without the `train`
//! feature), and the reading of both with the check that the weights are those `config.json`
//! records.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::io::{digest, format_error, io_error, read_json};
pub use crate::lm::config::{CheckpointInfo, WeightDtype};

/// The configuration file of a checkpoint.
pub const CONFIG_FILE: &str = "config.json";
/// The weights file of a checkpoint.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// The training-state file of a checkpoint.
pub const STATE_FILE: &str = "state.json";
/// The optimizer file of a checkpoint.
pub const OPTIMIZER_FILE: &str = "optimizer.bpk";
/// Every file a checkpoint folder may hold.
pub const FILES: [&str; 4] = [CONFIG_FILE, WEIGHTS_FILE, STATE_FILE, OPTIMIZER_FILE];

/// `state.json` of a checkpoint. Unknown keys are an error when it is read.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrainState {
    /// Training loss of every step, nats per byte.
    pub losses: Vec<f64>,
    /// The validation loss measured during training ([`crate::lm::config::TrainConfig::valid_every`]).
    #[serde(default)]
    pub valid: Vec<ValidLoss>,
    /// Parameter ids by name (the optimizer state is keyed by them).
    pub param_ids: BTreeMap<String, u64>,
}

/// One measurement of the validation loss during training.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidLoss {
    /// Steps done when it was measured.
    pub step: usize,
    /// Mean loss over the scored bytes, nats per byte.
    pub loss: f64,
}

/// `config.json` of `dir` itself, validated, without recovery.
pub(super) fn read_info_here(dir: &Path) -> Result<CheckpointInfo> {
    let path = dir.join(CONFIG_FILE);
    let info: CheckpointInfo = read_json(&path)?;
    info.validate().map_err(|e| format_error(&path, e))?;
    Ok(info)
}

/// Reads `state.json` of a checkpoint folder.
///
/// # Errors
/// A missing, unreadable or malformed file.
pub fn read_state(dir: &Path) -> Result<TrainState> {
    read_json(&dir.join(STATE_FILE))
}

/// The weights file's bytes, checked against the digest `info` records (when it records one).
pub(super) fn verify_weights(dir: &Path, info: &CheckpointInfo) -> Result<Vec<u8>> {
    let path = dir.join(WEIGHTS_FILE);
    let bytes = fs::read(&path).map_err(|e| io_error(&path, e))?;
    if let Some(expected) = &info.weights_digest {
        if &digest(&bytes) != expected {
            return Err(format_error(
                &path,
                format!(
                    "its digest is not the one {CONFIG_FILE} records ({expected}): the weights belong to another save"
                ),
            ));
        }
    }
    Ok(bytes)
}

/// Whether a folder holds a complete checkpoint: a readable, valid `config.json` and weights
/// whose digest is the one it records.
pub(super) fn is_complete(dir: &Path) -> bool {
    read_info_here(dir)
        .and_then(|info| verify_weights(dir, &info).map(|_| ()))
        .is_ok()
}
