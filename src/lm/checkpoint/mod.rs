//! A checkpoint: one folder holding the whole on-disk format, written as one atomic unit.
//!
//! * `config.json`: [`CheckpointInfo`] (model and training configuration, steps done, the
//!   digests of the weights, of the training text and of the checkpoint fine-tuned from);
//! * `model.safetensors`: the weights, f32 or f16, named by their path in the model
//!   (`blocks.0.attn.query.weight`);
//! * `state.json`: [`TrainState`], the loss curve and the parameter ids the optimizer refers to;
//! * `optimizer.bpk`: AdamW's moments (burnpack), only needed to resume.
//!
//! **Atomicity.** [`save`] writes the four files into a fresh sibling folder `.NAME.new`, syncs
//! every file and the folder, then moves an existing checkpoint aside (`.NAME.old`), renames
//! the new folder into place and only then deletes the old one, syncing the parent folder after
//! each rename. A kill at any point leaves `NAME` whole (old or new), or `NAME` missing beside a
//! whole `.NAME.new` and `.NAME.old`; [`recover`] (called by every reader and by the next save)
//! then puts the new one in place if it is complete, else the old one. Weights that are not
//! finite are never written, and `config.json` records the digest of the weights it belongs
//! with, so a reader never pairs one save's weights with another's configuration.
//!
//! The file names and `state.json` are in `format.rs`, the folder protocol in `folder.rs`, the
//! safetensors writer and reader in `weights.rs`; this module is their public face.

mod folder;
mod format;
mod weights;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

use burn::optim::ModuleOptimizer;
use burn::tensor::Device;

use crate::error::Result;
use crate::io::{digest, io_error, to_json};
use crate::lm::model::Lm;

#[doc(hidden)]
pub use folder::SaveStep;
pub use format::{
    read_state, CheckpointInfo, TrainState, ValidLoss, WeightDtype, CONFIG_FILE, FILES,
    OPTIMIZER_FILE, STATE_FILE, WEIGHTS_FILE,
};
pub use weights::{load_weights, save_weights, weights_bytes, ParamPath};

use format::{is_complete, read_info_here, verify_weights};
use weights::weights_from_bytes;

/// Brings a checkpoint whose save was interrupted back to a whole state: when `dir` is missing
/// but `.NAME.new` or `.NAME.old` is there, the new one goes into place if it is complete, else
/// the old one. A present `dir` is left alone (leftovers beside it are removed by the next
/// save).
///
/// # Errors
/// A failed rename.
pub fn recover(dir: &Path) -> Result<()> {
    folder::recover(dir, is_complete)
}

/// Writes a checkpoint into `dir` as one atomic unit (see the module documentation): the
/// weights of `model`, the optimizer's state (when given), `state` (its parameter ids are
/// filled in) and `info` (its weights digest is filled in).
///
/// # Errors
/// [`crate::Error::NonFinite`] when a weight is not finite (nothing is written), or a failed
/// write (the previous checkpoint, if any, stays whole).
pub fn save(
    dir: &Path,
    model: &Lm,
    optimizer: Option<&ModuleOptimizer>,
    info: &mut CheckpointInfo,
    state: &mut TrainState,
) -> Result<()> {
    save_until(dir, model, optimizer, info, state, None)
}

/// [`save`], stopped after `stop` as a kill would stop it (for the tests of [`recover`]).
#[doc(hidden)]
pub(crate) fn save_until(
    dir: &Path,
    model: &Lm,
    optimizer: Option<&ModuleOptimizer>,
    info: &mut CheckpointInfo,
    state: &mut TrainState,
    stop: Option<SaveStep>,
) -> Result<()> {
    let (weights, ids) = weights_bytes(model, info.dtype)?;
    state.param_ids = ids;
    info.weights_digest = Some(digest(&weights));
    let info: &CheckpointInfo = info;
    let fill = |new: &Path| {
        let write = |name: &str, bytes: &[u8]| {
            let path = new.join(name);
            fs::write(&path, bytes).map_err(|e| io_error(&path, e))
        };
        write(WEIGHTS_FILE, &weights)?;
        if stop == Some(SaveStep::WeightsWritten) {
            return Err(folder::stopped(dir));
        }
        if let Some(optim) = optimizer {
            let path = new.join(OPTIMIZER_FILE);
            optim
                .save(&path)
                .map_err(|e| io_error(&path, format!("{e:?}")))?;
        }
        write(STATE_FILE, to_json(state).as_bytes())?;
        // config.json last: a folder whose config.json parses has every other file
        write(CONFIG_FILE, to_json(info).as_bytes())
    };
    let ours =
        |dir: &Path| read_info_here(dir).is_ok_and(|i| i.weights_digest == info.weights_digest);
    folder::replace(dir, stop, is_complete, fill, ours)
}

/// The hidden folder `.NAME.SUFFIX` beside the checkpoint folder `dir` (`NAME`): where its
/// replacement is written (`new`), the one it replaces waits (`old`), or a training run keeps its
/// snapshot (`snapshot`, [`crate::lm::snapshot`]).
pub fn sibling_of(dir: &Path, suffix: &str) -> std::path::PathBuf {
    folder::sibling(dir, suffix)
}

/// Reads and validates `config.json` of a checkpoint folder (after [`recover`]).
///
/// # Errors
/// A missing or unreadable file ([`crate::Error::Io`]), unknown keys or invalid values
/// ([`crate::Error::Format`], naming the key).
pub fn read_info(dir: &Path) -> Result<CheckpointInfo> {
    recover(dir)?;
    read_info_here(dir)
}

/// Loads a checkpoint's model on `device` (no autodiff unless the device has it), with
/// `ids` the saved parameter ids (for resuming with the optimizer state).
///
/// # Errors
/// As [`read_info`] and [`load_weights`]; weights whose digest differs from the recorded one.
pub fn load(
    dir: &Path,
    device: &Device,
    ids: Option<&BTreeMap<String, u64>>,
) -> Result<(Lm, CheckpointInfo)> {
    let info = read_info(dir)?;
    let bytes = verify_weights(dir, &info)?;
    let model = Lm::new(&info.model, info.train.seed, device)?;
    let model = weights_from_bytes(model, &bytes, &dir.join(WEIGHTS_FILE), ids)?;
    Ok((model, info))
}

/// Loads the weights of the checkpoint in `dir` into `model` (of the same shapes; a fine-tune
/// may differ in length or RoPE scaling); returns it and the digest of the weights.
///
/// # Errors
/// As [`load`].
pub fn load_into(model: Lm, dir: &Path) -> Result<(Lm, String)> {
    let info = read_info(dir)?;
    let bytes = verify_weights(dir, &info)?;
    let model = weights_from_bytes(model, &bytes, &dir.join(WEIGHTS_FILE), None)?;
    Ok((model, digest(&bytes)))
}

/// Whether the weights in `dir` hold exactly the tensors of a model of `config`: false for a
/// checkpoint written by an older version of that model (FIRE's, before it learned $c$ and
/// $L$), which loads ([`load`]) but is not a training of the model as it is now.
///
/// # Errors
/// An unreadable or malformed weights file; a configuration the model rejects.
pub fn holds_every_tensor(dir: &Path, config: &crate::lm::config::ModelConfig) -> Result<bool> {
    let path = dir.join(WEIGHTS_FILE);
    let bytes = fs::read(&path).map_err(|e| io_error(&path, e))?;
    let tensors = safetensors::SafeTensors::deserialize(&bytes)
        .map_err(|e| crate::io::format_error(&path, e))?;
    let stored: BTreeSet<String> = tensors.names().into_iter().map(String::from).collect();
    let model = Lm::new(config, 0, &Device::flex())?;
    Ok(weights::tensor_names(&model) == stored)
}

/// Loads a checkpoint's model on `device`.
///
/// # Errors
/// As [`load`].
pub fn load_model(dir: &Path, device: &Device) -> Result<(Lm, CheckpointInfo)> {
    load(dir, device, None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::lm::config::{ModelConfig, Scheme, TrainConfig};
    use burn::module::{Module, ModuleMapper, Param};
    use burn::tensor::Tensor;
    use folder::sibling;

    /// A model (weights seeded by `seed`) saved as step `step`, or stopped at `stop`.
    fn save_model(dir: &Path, seed: u64, step: usize, stop: Option<SaveStep>) -> Result<Lm> {
        let model = Lm::new(&ModelConfig::tiny(Scheme::Alibi), seed, &Device::flex()).unwrap();
        let train = TrainConfig {
            steps: 10,
            ..TrainConfig::default()
        };
        let mut info =
            CheckpointInfo::new(ModelConfig::tiny(Scheme::Alibi), train, 0, WeightDtype::F32);
        info.step = step;
        let optim = burn::optim::AdamWConfig::new().init();
        save_until(
            dir,
            &model,
            Some(&optim),
            &mut info,
            &mut TrainState::default(),
            stop,
        )
        .map(|()| model)
    }

    fn embedding(model: &Lm) -> Vec<f32> {
        crate::lm::model::to_vec(model.embedding.val())
    }

    #[test]
    fn a_save_stopped_at_any_step_leaves_the_old_or_the_new_checkpoint_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let device = Device::flex();
        for stop in [
            SaveStep::WeightsWritten,
            SaveStep::NewSynced,
            SaveStep::OldMovedAside,
            SaveStep::NewMovedIn,
        ] {
            let dir = root.join(format!("{stop:?}"));
            let old = save_model(&dir, 1, 1, None).unwrap();
            let err = save_model(&dir, 2, 2, Some(stop)).map(|_| ()).unwrap_err();
            assert!(err.to_string().contains("stopped"), "{err}");
            let new = Lm::new(&ModelConfig::tiny(Scheme::Alibi), 2, &device).unwrap();
            // a reader recovers a whole checkpoint: weights and config.json of one save
            let (loaded, info) = load_model(&dir, &device).unwrap();
            let expected = match info.step {
                1 => &old,
                2 => &new,
                s => panic!("{stop:?}: step {s}"),
            };
            assert_eq!(embedding(&loaded), embedding(expected), "{stop:?}");
            // the new save is the one kept once its folder is complete and the old one moved
            let want_new = matches!(stop, SaveStep::OldMovedAside | SaveStep::NewMovedIn);
            assert_eq!(info.step, if want_new { 2 } else { 1 }, "{stop:?}");
            // the next save completes and leaves no leftovers
            save_model(&dir, 3, 3, None).unwrap();
            assert_eq!(read_info(&dir).unwrap().step, 3);
            for suffix in ["new", "old"] {
                assert!(!sibling(&dir, suffix).exists(), "{stop:?}: .{suffix} left");
            }
        }
    }

    #[test]
    fn a_first_save_stopped_early_leaves_no_checkpoint_and_a_late_stop_a_whole_one() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let device = Device::flex();
        for (stop, whole) in [
            (SaveStep::WeightsWritten, false),
            (SaveStep::NewSynced, true),
            (SaveStep::OldMovedAside, true),
        ] {
            let dir = root.join(format!("{stop:?}"));
            assert!(save_model(&dir, 1, 1, Some(stop)).is_err());
            match load_model(&dir, &device) {
                Ok((_, info)) => assert!(whole && info.step == 1, "{stop:?}"),
                Err(e) => assert!(!whole, "{stop:?}: {e}"),
            }
        }
    }

    #[test]
    fn weights_of_another_save_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let (a, b) = (root.join("a"), root.join("b"));
        save_model(&a, 1, 1, None).unwrap();
        save_model(&b, 2, 2, None).unwrap();
        fs::copy(b.join(WEIGHTS_FILE), a.join(WEIGHTS_FILE)).unwrap();
        let e = load_model(&a, &Device::flex()).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e:?}");
        assert!(e.to_string().contains("another save"), "{e}");
    }

    #[test]
    fn non_finite_weights_are_never_saved() {
        struct Poison;
        impl ModuleMapper for Poison {
            fn map_float<const D: usize>(&mut self, p: Param<Tensor<D>>) -> Param<Tensor<D>> {
                p.map(|t| t.mul_scalar(f32::NAN))
            }
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let dir = root.join("c");
        let good = save_model(&dir, 1, 1, None).unwrap();
        let bad = good.clone().map(&mut Poison);
        let mut info = read_info(&dir).unwrap();
        info.step = 2;
        let e = save(&dir, &bad, None, &mut info, &mut TrainState::default()).unwrap_err();
        assert!(matches!(e, Error::NonFinite(_)), "{e:?}");
        assert!(e.to_string().contains("not finite"), "{e}");
        // the good checkpoint is untouched and nothing was written beside it
        let (loaded, info) = load_model(&dir, &Device::flex()).unwrap();
        assert_eq!(info.step, 1);
        assert_eq!(embedding(&loaded), embedding(&good));
        assert!(!sibling(&dir, "new").exists());
        // f32 weights too large for f16 are not finite in f16
        let huge = good.map(&mut {
            struct Scale;
            impl ModuleMapper for Scale {
                fn map_float<const D: usize>(&mut self, p: Param<Tensor<D>>) -> Param<Tensor<D>> {
                    p.map(|t| t.mul_scalar(1e9))
                }
            }
            Scale
        });
        let e = weights_bytes(&huge, WeightDtype::F16).unwrap_err();
        assert!(e.to_string().contains("in f16"), "{e}");
        assert!(weights_bytes(&huge, WeightDtype::F32).is_ok());
    }

    #[test]
    fn unknown_keys_in_config_json_are_format_errors_naming_the_key() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let dir = root.join("c");
        save_model(&dir, 1, 1, None).unwrap();
        let path = dir.join(CONFIG_FILE);
        let text = fs::read_to_string(&path).unwrap();
        fs::write(&path, text.replace("\"rope_scaling\"", "\"rope_scalin\"")).unwrap();
        let e = read_info(&dir).unwrap_err();
        assert!(matches!(e, Error::Format { .. }), "{e:?}");
        assert!(e.to_string().contains("rope_scalin"), "{e}");
        // an out-of-range value names its key too
        fs::write(&path, text.replace("\"lr\": 0.003", "\"lr\": null")).unwrap();
        assert!(read_info(&dir).unwrap_err().to_string().contains("lr"));
        fs::write(&path, text.replace("\"batch\": 32", "\"batch\": 0")).unwrap();
        let e = read_info(&dir).unwrap_err().to_string();
        assert!(e.contains("invalid batch = 0"), "{e}");
    }
}
