//! The reuse policy of a sweep: a finished checkpoint stands for a training when everything it
//! was trained from is the same (the model's keys and its scheme's own,
//! [`ModelConfig::differing_key`]; training, precision, the training text's digest and, for a
//! fine-tune, the digest of the weights it started from; [`why_not_reusable`]), and an
//! item's results stand for an evaluation when its record names the same weights and the same
//! evaluation ([`reusable_rows`]).

use std::path::Path;

use burn::tensor::Device;

use super::plan::Item;
use super::store::read_record;
use crate::error::Result;
use crate::io::csv::read_csv;
use crate::io::{file_digest, FolderLock};
use crate::lm::checkpoint::{holds_every_tensor, WEIGHTS_FILE};
use crate::lm::config::SweepConfig;
use crate::lm::eval::ResultRow;
use crate::lm::model::{Kernels, ModelConfig};
use crate::lm::train::{log_line, read_info, train_holding, CheckpointInfo, TrainConfig, TrainRun};

/// The rows an earlier run recorded for `item`, when they stand for an evaluation now: reuse
/// is on, the record names these very weights (`weights_digest`, not just trained: `trained`
/// is false) and the same evaluation.
///
/// # Errors
/// An unreadable rows file of a complete record.
pub(super) fn reusable_rows(
    config: &SweepConfig,
    item: &Item,
    weights_digest: &str,
    trained: bool,
) -> Result<Option<Vec<ResultRow>>> {
    if !config.reuse || trained {
        return Ok(None);
    }
    let Some(record) = read_record(config, item) else {
        return Ok(None);
    };
    let same = record.weights_digest == weights_digest && record.evaluates_as(config, item);
    if !same {
        return Ok(None);
    }
    log_line(&format!(
        "  {}: results of these weights reused",
        item.name()
    ));
    read_csv(&config.item_file("items", item, "csv")).map(Some)
}

/// What a checkpoint is trained from besides its configuration.
#[derive(Clone, Copy)]
pub(super) struct TrainedFrom<'a> {
    /// The digest of the training text.
    pub(super) corpus_digest: &'a str,
    /// The checkpoint a fine-tune starts from.
    pub(super) init: Option<&'a Path>,
}

/// Why the checkpoint `info` cannot stand for a training of `model` with `train_cfg` from
/// `from`, or `None` when it can.
pub(super) fn why_not_reusable(
    config: &SweepConfig,
    dir: &Path,
    info: &CheckpointInfo,
    model: &ModelConfig,
    train_cfg: &TrainConfig,
    from: TrainedFrom,
) -> Result<Option<String>> {
    if let Some(key) = model.differing_key(&info.model) {
        return Ok(Some(format!("another model configuration ({key})")));
    }
    if &info.train != train_cfg {
        return Ok(Some("another training configuration".into()));
    }
    if info.step != train_cfg.steps {
        return Ok(Some(format!(
            "{} of {} steps done",
            info.step, train_cfg.steps
        )));
    }
    if info.dtype != config.dtype {
        return Ok(Some("another weight precision".into()));
    }
    if info.corpus_digest.as_deref() != Some(from.corpus_digest) {
        return Ok(Some(match &info.corpus_digest {
            None => "no record of the text it was trained on".into(),
            Some(_) => "trained on another text".into(),
        }));
    }
    let weights = file_digest(&dir.join(WEIGHTS_FILE)).ok();
    if weights.is_none()
        || info
            .weights_digest
            .as_ref()
            .is_some_and(|w| Some(w) != weights.as_ref())
    {
        return Ok(Some(format!(
            "its {WEIGHTS_FILE} is missing or not the one its config.json records"
        )));
    }
    if !holds_every_tensor(dir, model)? {
        return Ok(Some(format!(
            "its {WEIGHTS_FILE} has other tensors than this model (an older version of it)"
        )));
    }
    if let Some(init) = from.init {
        let base = file_digest(&init.join(WEIGHTS_FILE))?;
        if info.init_digest.as_deref() != Some(base.as_str()) {
            return Ok(Some(format!(
                "fine-tuned from other weights than those now in {}",
                init.display()
            )));
        }
    }
    Ok(None)
}

/// Trains into `dir`, whose exclusive `lock` the caller holds, unless a finished checkpoint
/// trained from the same everything is there ([`why_not_reusable`]); a training killed midway
/// continues from its snapshot ([`crate::lm::snapshot`]). Returns the training seconds, those
/// before a kill included (0 when reused).
#[allow(clippy::too_many_arguments)]
pub(super) fn ensure_trained(
    config: &SweepConfig,
    model: &ModelConfig,
    train_cfg: &TrainConfig,
    dir: &Path,
    from: TrainedFrom,
    corpus: &Path,
    device: &Device,
    progress: bool,
    lock: &FolderLock,
) -> Result<f64> {
    if config.reuse {
        if let Ok(info) = read_info(dir) {
            match why_not_reusable(config, dir, &info, model, train_cfg, from)? {
                None => {
                    log_line(&format!("  reusing {}", dir.display()));
                    return Ok(0.0);
                }
                Some(why) => log_line(&format!("  retraining {}: {why}", dir.display())),
            }
        }
    }
    let (info, _) = train_holding(
        &TrainRun {
            model: model.clone(),
            train: train_cfg.clone(),
            out: dir.to_path_buf(),
            resume: false,
            // the configuration names this folder: its checkpoint is the sweep's to replace
            overwrite: true,
            init: from.init.map(Path::to_path_buf),
            stop_after: None,
            save_every: 0,
            // a kill (the end of a sitting) loses at most a twentieth of the steps
            snapshot_every: if config.reuse {
                (train_cfg.steps / 20).max(1)
            } else {
                0
            },
            log_every: (train_cfg.steps / 6).max(1),
            progress,
            dtype: config.dtype,
            corpus: corpus.to_path_buf(),
            device: device.clone(),
            kernels: Kernels::default(),
        },
        Some(lock),
    )?;
    log_line(&format!(
        "  {}: trained {} steps in {:.0} s, final train loss {:.3} nats/byte",
        dir.display(),
        info.step,
        info.train_seconds,
        info.final_train_loss.unwrap_or(f64::NAN)
    ));
    Ok(info.train_seconds)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::digest;
    use crate::lm::checkpoint::{weights_bytes, WeightDtype};
    use crate::lm::model::{Lm, Scheme};

    /// The weights file of `model` in `dir`, and its digest.
    fn write_weights(dir: &Path, model: &Lm) -> String {
        let (bytes, _) = weights_bytes(model, WeightDtype::F32).unwrap();
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join(WEIGHTS_FILE), &bytes).unwrap();
        digest(&bytes)
    }

    #[test]
    fn a_checkpoint_is_reused_only_when_everything_it_was_trained_from_is_the_same() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let base_weights = dir.join(WEIGHTS_FILE);
        std::fs::write(&base_weights, b"base weights").unwrap();
        let own = dir.join("own");
        let config = SweepConfig::default();
        let model = ModelConfig::tiny(Scheme::Fire);
        let lm = Lm::new(&model, 0, &Device::flex()).unwrap();
        let own_digest = write_weights(&own, &lm);
        let train = config.train.clone();
        let mut info = CheckpointInfo::new(model.clone(), train.clone(), 1, config.dtype);
        info.step = train.steps;
        info.corpus_digest = Some(digest(b"corpus"));
        info.init_digest = Some(digest(b"base weights"));
        info.weights_digest = Some(own_digest);
        let from = |corpus: &'static str, init: Option<&'static Path>| TrainedFrom {
            corpus_digest: Box::leak(digest(corpus.as_bytes()).into_boxed_str()),
            init,
        };
        let why = |info: &CheckpointInfo, from: TrainedFrom| {
            why_not_reusable(&config, &own, info, &model, &train, from).unwrap()
        };
        assert_eq!(why(&info, from("corpus", None)), None);
        let leaked: &'static Path = Box::leak(dir.to_path_buf().into_boxed_path());
        assert_eq!(why(&info, from("corpus", Some(leaked))), None);
        assert!(why(&info, from("another corpus", None))
            .unwrap()
            .contains("another text"));
        std::fs::write(&base_weights, b"retrained base").unwrap();
        assert!(why(&info, from("corpus", Some(leaked)))
            .unwrap()
            .contains("other weights"));
        let mut older = info.clone();
        older.corpus_digest = None;
        assert!(why(&older, from("corpus", None))
            .unwrap()
            .contains("no record"));
        let mut other_save = info.clone();
        other_save.weights_digest = Some(digest(b"other weights"));
        assert!(why(&other_save, from("corpus", None))
            .unwrap()
            .contains("not the one"));
        // another scheme's key does not matter, this scheme's does, by name
        let mut other_scheme_key = info.clone();
        other_scheme_key.model.shaw_max_relative += 1;
        assert_eq!(why(&other_scheme_key, from("corpus", None)), None);
        let mut own_key = info.clone();
        own_key.model.fire_threshold += 1.0;
        assert!(why(&own_key, from("corpus", None))
            .unwrap()
            .contains("(fire_threshold)"));
        let mut partial = info.clone();
        partial.step = 5;
        assert!(why(&partial, from("corpus", None))
            .unwrap()
            .contains("5 of"));
        // FIRE's weights from before it learned c and L: they load, but are not a training
        // of the model as it is now
        let older = dir.join("older");
        let mut older_info = info.clone();
        older_info.weights_digest = Some(write_weights(&older, &lm.with_fixed_fire_transform()));
        let why_older = why_not_reusable(
            &config,
            &older,
            &older_info,
            &model,
            &train,
            from("corpus", None),
        );
        assert!(why_older.unwrap().unwrap().contains("older version"));
    }
}
