//! The exact state of an unfinished training run, kept beside its checkpoint folder `NAME` as
//! `.NAME.snapshot`, so that a run killed midway (a sweep stopped at the end of a sitting)
//! continues from its last snapshot instead of from step 0.
//!
//! A snapshot is a checkpoint folder ([`crate::lm::checkpoint`]'s format and atomic folder
//! protocol) whose weights are f32 whatever the run's precision, with the optimizer's state and
//! the loss curve so far: the whole state a step reads (the data order, the learning rate and
//! randomized positions depend only on the seed and the step), so a run continued from one ends
//! with the same bits as a run never stopped. It belongs to the writer that holds `NAME`'s
//! lock, and is removed once the finished checkpoint is written.
//!
//! It is a cache: a snapshot of another run (another model, training, training text or starting
//! weights), one whose weights are not f32, or one that cannot be read, is not used (a line on
//! standard error says why) and the run's first snapshot replaces it.

use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::io::io_error;
use crate::lm::checkpoint::{self, CheckpointInfo, WeightDtype};

/// The snapshot folder of the checkpoint folder `out`: `.NAME.snapshot` beside it.
pub fn snapshot_dir(out: &Path) -> PathBuf {
    checkpoint::sibling_of(out, "snapshot")
}

/// Why the snapshot `found` is not an earlier state of the run that would start as `fresh`
/// (its model, training, text digest and starting-weights digest), or `None` when it is: the
/// same everything, f32 weights, and fewer steps done than the run's, but at least one.
pub(crate) fn why_not_continued(found: &CheckpointInfo, fresh: &CheckpointInfo) -> Option<String> {
    let differs = |what: &str| Some(format!("it is a snapshot of another {what}"));
    if found.model != fresh.model {
        return differs("model");
    }
    if found.train != fresh.train {
        return differs("training configuration");
    }
    if found.corpus_digest != fresh.corpus_digest {
        return differs("training text");
    }
    if found.init_digest != fresh.init_digest {
        return differs("starting checkpoint");
    }
    if found.dtype != WeightDtype::F32 {
        return Some("its weights are not f32, so it is not the run's exact state".into());
    }
    if found.step == 0 || found.step >= fresh.train.steps {
        return Some(format!(
            "it holds step {} of {}, not an unfinished run",
            found.step, fresh.train.steps
        ));
    }
    None
}

/// Removes the snapshot of `out`, if any.
///
/// # Errors
/// A snapshot that exists and cannot be removed.
pub(crate) fn remove(out: &Path) -> Result<()> {
    let dir = snapshot_dir(out);
    match std::fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_error(&dir, e)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lm::config::{ModelConfig, Scheme, TrainConfig};

    fn info(step: usize) -> CheckpointInfo {
        let train = TrainConfig {
            steps: 10,
            ..TrainConfig::default()
        };
        let mut i =
            CheckpointInfo::new(ModelConfig::tiny(Scheme::Alibi), train, 0, WeightDtype::F32);
        i.step = step;
        i.corpus_digest = Some("text".into());
        i
    }

    #[test]
    fn only_an_unfinished_f32_state_of_the_same_run_is_continued() {
        let fresh = info(0);
        assert_eq!(why_not_continued(&info(4), &fresh), None);
        for (found, why) in [
            (info(0), "step 0 of 10"),
            (info(10), "step 10 of 10"),
            (
                CheckpointInfo {
                    dtype: WeightDtype::F16,
                    ..info(4)
                },
                "not f32",
            ),
            (
                CheckpointInfo {
                    corpus_digest: Some("other".into()),
                    ..info(4)
                },
                "training text",
            ),
            (
                CheckpointInfo {
                    init_digest: Some("base".into()),
                    ..info(4)
                },
                "starting checkpoint",
            ),
            (
                CheckpointInfo {
                    model: ModelConfig::tiny(Scheme::Rope),
                    ..info(4)
                },
                "another model",
            ),
        ] {
            let said = why_not_continued(&found, &fresh).expect(why);
            assert!(said.contains(why), "{said} (expected {why})");
        }
        let mut longer = info(4);
        longer.train.steps = 20;
        assert!(why_not_continued(&longer, &fresh)
            .unwrap()
            .contains("training configuration"));
    }

    #[test]
    fn the_snapshot_is_a_hidden_sibling_and_removing_none_is_fine() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("nope");
        assert_eq!(snapshot_dir(&out), tmp.path().join(".nope.snapshot"));
        remove(&out).unwrap();
        std::fs::create_dir_all(snapshot_dir(&out).join("x")).unwrap();
        remove(&out).unwrap();
        assert!(!snapshot_dir(&out).exists());
    }
}
