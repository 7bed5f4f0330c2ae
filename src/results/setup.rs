//! The setup of a sweep read back from what it wrote: every checkpoint's `config.json`
//! ([`CheckpointInfo`]) against the configuration the sweep recorded ([`SweepConfig`], the
//! `config` of its `sweep.json`), and the checkpoints against each other.
//!
//! [`check_setup`] names every way a checkpoint departs from the setup a reader is told:
//! - one text: every checkpoint trained on the text of one digest;
//! - finished: each trained its planned steps;
//! - **from scratch**, every model is the recorded model apart from its scheme
//!   ([`crate::lm::config::ModelConfig::differing_key`], which ignores the keys of other
//!   schemes) and trained exactly as recorded apart from its seed, or with the budget
//!   control's multiple of the steps;
//! - a **fine-tune** starts from the weights of the same scheme's from-scratch checkpoint of
//!   its seed (its `init_digest` is that checkpoint's `weights_digest`), is the model and
//!   training the record's fine-tune section gives for its length factor and scaling
//!   ([`SweepConfig::finetune_model`], [`SweepConfig::finetune_train`]), and sees as many
//!   bytes as every other fine-tune;
//! - every seed is one the sweep plans.
//!
//! The first and the last two compare checkpoints with each other, independently of how the
//! sweep derived their configurations.

use std::path::Path;

use crate::error::{Error, Result};
use crate::io::read_json;
use crate::lm::config::{CheckpointInfo, ModelConfig, SweepConfig, TrainConfig};

/// One checkpoint: its folder name and its `config.json`.
#[derive(Debug, Clone, PartialEq)]
pub struct TrainedModel {
    /// The folder's name (`rope`, `rope-ft-yarn-x4`, `nope-seed1`).
    pub name: String,
    /// Its `config.json`.
    pub info: CheckpointInfo,
}

/// How a checkpoint was trained, as [`check_setup`] reads it from its configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Training {
    /// From scratch on the sweep's budget.
    Scratch,
    /// From scratch on `multiple` times the budget (the budget control).
    Budget {
        /// Times the sweep's steps.
        multiple: usize,
    },
    /// A fine-tune at `factor` times the training length.
    Finetune {
        /// The length factor.
        factor: usize,
    },
}

/// A checkpoint with how it was trained, one row of the setup table.
#[derive(Debug, Clone, PartialEq)]
pub struct SetupRow {
    /// The checkpoint.
    pub model: TrainedModel,
    /// How it was trained.
    pub training: Training,
}

impl SetupRow {
    /// `from scratch`, `budget x2`, `fine-tune x4 (yarn)` or `fine-tune x16`.
    pub fn describe(&self) -> String {
        match &self.training {
            Training::Scratch => "from scratch".into(),
            Training::Budget { multiple } => format!("budget x{multiple}"),
            Training::Finetune { factor } => match self.model.info.model.rope_scaling.kind() {
                Some(kind) => format!("fine-tune x{factor} ({})", kind.name()),
                None => format!("fine-tune x{factor}"),
            },
        }
    }

    /// Bytes of text per step, batch × length.
    pub fn bytes_per_step(&self) -> usize {
        self.model.info.train.batch * self.model.info.model.train_len
    }

    /// Bytes of text over the planned steps.
    pub fn bytes(&self) -> usize {
        self.bytes_per_step() * self.model.info.train.steps
    }
}

/// The setup of a sweep: every checkpoint with how it was trained, and every departure from
/// the record ([`check_setup`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Setup {
    /// The checkpoints in name order.
    pub rows: Vec<SetupRow>,
    /// One sentence per departure; empty when the checkpoints are the setup recorded.
    pub problems: Vec<String>,
}

/// Every checkpoint in the folders `dirs` (each subfolder holding a `config.json`), in name
/// order; a folder that does not exist holds none, and a hidden one (`.NAME.new` of a save in
/// flight, `.NAME.snapshot` of a training in flight) is not a checkpoint.
///
/// # Errors
/// An unreadable folder, or a `config.json` that is not a checkpoint's (unknown keys
/// included).
pub fn read_checkpoints(dirs: &[&Path]) -> Result<Vec<TrainedModel>> {
    let mut models = Vec::new();
    let unreadable = |dir: &Path, e: std::io::Error| Error::Io(format!("{}: {e}", dir.display()));
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        for entry in std::fs::read_dir(dir).map_err(|e| unreadable(dir, e))? {
            let path = entry.map_err(|e| unreadable(dir, e))?.path();
            let config = path.join("config.json");
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if config.is_file() && !name.starts_with('.') {
                models.push(TrainedModel {
                    name,
                    info: read_json(&config)?,
                });
            }
        }
    }
    models.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(models)
}

/// The checkpoints `models` against the sweep's `record` (see the module documentation).
pub fn check_setup(record: &SweepConfig, models: &[TrainedModel]) -> Setup {
    let mut problems = Vec::new();
    let rows: Vec<SetupRow> = models
        .iter()
        .map(|m| SetupRow {
            model: m.clone(),
            training: training_of(record, &m.info),
        })
        .collect();
    let digests: Vec<&Option<String>> = models.iter().map(|m| &m.info.corpus_digest).collect();
    if digests.iter().any(|d| d.is_none() || *d != digests[0]) {
        problems.push(format!(
            "not one training text: {}",
            list(models, |m| format!("{:?}", m.info.corpus_digest))
        ));
    }
    for row in &rows {
        let (name, info) = (&row.model.name, &row.model.info);
        if info.step != info.train.steps {
            problems.push(format!(
                "{name}: {} of {} steps",
                info.step, info.train.steps
            ));
        }
        if !record.seeds.contains(&info.train.seed) {
            problems.push(format!("{name}: seed {} is not planned", info.train.seed));
        }
        match row.training {
            Training::Scratch => {
                let train = TrainConfig {
                    seed: info.train.seed,
                    ..record.train.clone()
                };
                same_model(&mut problems, name, &own_scheme(record, info), &info.model);
                same_training(&mut problems, name, &train, &info.train);
            }
            Training::Budget { multiple } => {
                same_model(&mut problems, name, &own_scheme(record, info), &info.model);
                let train = record.budget_train(info.train.seed);
                same_training(&mut problems, name, &train, &info.train);
                if multiple != record.budget_control.multiple {
                    problems.push(format!("{name}: {multiple} times the steps"));
                }
            }
            Training::Finetune { factor } => {
                let (scheme, kind) = (info.model.scheme, info.model.rope_scaling.kind());
                let model = record.finetune_model(scheme, kind, factor);
                same_model(&mut problems, name, &model, &info.model);
                same_training(
                    &mut problems,
                    name,
                    &record.finetune_train(factor, info.train.seed),
                    &info.train,
                );
                let base = rows.iter().find(|r| {
                    r.training == Training::Scratch
                        && r.model.info.model.scheme == scheme
                        && r.model.info.train.seed == info.train.seed
                });
                match base {
                    None => problems.push(format!(
                        "{name}: no from-scratch {} checkpoint of seed {} to start from",
                        scheme.name(),
                        info.train.seed
                    )),
                    Some(b) if b.model.info.weights_digest != info.init_digest => {
                        problems.push(format!(
                            "{name}: starts from {:?}, not {}'s weights {:?}",
                            info.init_digest, b.model.name, b.model.info.weights_digest
                        ))
                    }
                    Some(_) => {}
                }
            }
        }
    }
    let tunes: Vec<&SetupRow> = rows
        .iter()
        .filter(|r| matches!(r.training, Training::Finetune { .. }))
        .collect();
    if tunes.iter().any(|r| r.bytes() != tunes[0].bytes()) {
        problems.push(format!(
            "the fine-tunes see different bytes: {}",
            tunes
                .iter()
                .map(|r| format!("{} {}", r.model.name, r.bytes()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Setup { rows, problems }
}

/// From scratch (`init_from` absent) on the budget or a multiple of it, else a fine-tune at
/// its length over the recorded model's.
fn training_of(record: &SweepConfig, info: &CheckpointInfo) -> Training {
    if info.init_from.is_some() {
        let factor = info.model.train_len / record.model.train_len.max(1);
        return Training::Finetune { factor };
    }
    let steps = record.train.steps.max(1);
    if info.train.steps > steps && info.train.steps.is_multiple_of(steps) {
        Training::Budget {
            multiple: info.train.steps / steps,
        }
    } else {
        Training::Scratch
    }
}

/// The recorded model with this checkpoint's scheme.
fn own_scheme(record: &SweepConfig, info: &CheckpointInfo) -> ModelConfig {
    ModelConfig {
        scheme: info.model.scheme,
        ..record.model.clone()
    }
}

fn same_model(problems: &mut Vec<String>, name: &str, want: &ModelConfig, got: &ModelConfig) {
    if let Some(key) = want.differing_key(got) {
        let value = |c: &ModelConfig| {
            serde_json::to_value(c)
                .ok()
                .and_then(|v| v.get(key).cloned())
                .unwrap_or_default()
        };
        problems.push(format!(
            "{name}: model key {key} is {}, the record says {}",
            value(got),
            value(want)
        ));
    }
}

fn same_training(problems: &mut Vec<String>, name: &str, want: &TrainConfig, got: &TrainConfig) {
    if want != got {
        problems.push(format!(
            "{name}: trained with {}, the record says {}",
            serde_json::to_string(got).unwrap_or_default(),
            serde_json::to_string(want).unwrap_or_default()
        ));
    }
}

fn list(models: &[TrainedModel], f: impl Fn(&TrainedModel) -> String) -> String {
    models
        .iter()
        .map(|m| format!("{} {}", m.name, f(m)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::rope::ScalingKind;
    use crate::lm::config::{Scheme, WeightDtype};

    fn record() -> SweepConfig {
        SweepConfig::default()
    }

    fn checkpoint(name: &str, model: ModelConfig, train: TrainConfig) -> TrainedModel {
        let mut info = CheckpointInfo::new(model, train, 1000, WeightDtype::F16);
        info.step = info.train.steps;
        info.corpus_digest = Some("sha256:text".into());
        info.weights_digest = Some(format!("sha256:{name}"));
        TrainedModel {
            name: name.into(),
            info,
        }
    }

    /// A consistent small sweep: RoPE and ALiBi of seed 0, RoPE of seed 1, RoPE's YaRN x4
    /// fine-tune of seed 1, ALiBi's budget control.
    fn sweep(r: &SweepConfig) -> Vec<TrainedModel> {
        let scratch = |scheme: Scheme, seed: u64, name: &str| {
            let model = ModelConfig {
                scheme,
                ..r.model.clone()
            };
            let train = TrainConfig {
                seed,
                ..r.train.clone()
            };
            checkpoint(name, model, train)
        };
        let mut tune = checkpoint(
            "rope-ft-yarn-x4-seed1",
            r.finetune_model(Scheme::Rope, Some(ScalingKind::Yarn), 4),
            r.finetune_train(4, 1),
        );
        tune.info.init_from = Some("rope-seed1".into());
        tune.info.init_digest = Some("sha256:rope-seed1".into());
        let budget = checkpoint(
            "alibi-budget-x2",
            ModelConfig {
                scheme: Scheme::Alibi,
                ..r.model.clone()
            },
            r.budget_train(0),
        );
        vec![
            scratch(Scheme::Rope, 0, "rope"),
            scratch(Scheme::Alibi, 0, "alibi"),
            scratch(Scheme::Rope, 1, "rope-seed1"),
            tune,
            budget,
        ]
    }

    #[test]
    fn a_consistent_sweep_has_no_problem_and_every_training_is_named() {
        let r = record();
        let setup = check_setup(&r, &sweep(&r));
        assert_eq!(setup.problems, Vec::<String>::new());
        let described: Vec<String> = setup.rows.iter().map(SetupRow::describe).collect();
        assert_eq!(
            described,
            [
                "from scratch",
                "from scratch",
                "from scratch",
                "fine-tune x4 (yarn)",
                "budget x2"
            ]
        );
        // 200 steps of 32/4 = 8 sequences of 512 bytes: 819,200 bytes
        assert_eq!(setup.rows[3].bytes(), 200 * 8 * 512);
    }

    #[test]
    fn each_departure_is_named() {
        let r = record();
        type Change = Box<dyn Fn(&mut Vec<TrainedModel>)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "alibi: model key d_model is 64",
                Box::new(|m| m[1].info.model.d_model = 64),
            ),
            (
                "rope: trained with",
                Box::new(|m| m[0].info.train.lr = 1e-2),
            ),
            (
                "rope-seed1: 10 of 2000 steps",
                Box::new(|m| m[2].info.step = 10),
            ),
            (
                "rope-ft-yarn-x4-seed1: starts from",
                Box::new(|m| m[2].info.weights_digest = Some("sha256:other".into())),
            ),
            (
                "not one training text",
                Box::new(|m| m[4].info.corpus_digest = Some("sha256:another".into())),
            ),
            (
                "rope-seed1: seed 9 is not planned",
                Box::new(|m| m[2].info.train.seed = 9),
            ),
            (
                "no from-scratch rope checkpoint of seed 1",
                Box::new(|m| {
                    m.remove(2);
                }),
            ),
            (
                "rope-ft-yarn-x4-seed1: model key rope_scaling",
                Box::new(|m| {
                    m[3].info.model.rope_scaling =
                        crate::encodings::rope::RopeScaling::yarn(4.0, 128)
                }),
            ),
        ];
        for (want, change) in cases {
            let mut models = sweep(&r);
            change(&mut models);
            let problems = check_setup(&r, &models).problems;
            assert!(
                problems.iter().any(|p| p.contains(want)),
                "{want}: {problems:?}"
            );
        }
    }

    #[test]
    fn a_key_of_another_scheme_is_no_departure() {
        let r = record();
        let mut models = sweep(&r);
        models[1].info.model.fire_threshold = 128.0; // ALiBi does not read it
        assert!(check_setup(&r, &models).problems.is_empty());
    }

    #[test]
    fn fine_tunes_that_see_other_bytes_are_named() {
        let r = record();
        let mut models = sweep(&r);
        let mut other = models[3].clone();
        other.name = "rope-ft-yarn-x2-seed1".into();
        other.info.model = r.finetune_model(Scheme::Rope, Some(ScalingKind::Yarn), 2);
        other.info.train = r.finetune_train(2, 1);
        other.info.train.steps = 100;
        other.info.step = 100;
        models.push(other);
        let problems = check_setup(&r, &models).problems;
        assert!(
            problems
                .iter()
                .any(|p| p.starts_with("the fine-tunes see different bytes")),
            "{problems:?}"
        );
    }

    #[test]
    fn checkpoints_are_read_in_name_order_and_a_missing_or_hidden_folder_holds_none() {
        let dir = std::env::temp_dir().join(format!("posenc-setup-{}", std::process::id()));
        let r = record();
        for m in sweep(&r).iter().take(2) {
            // the checkpoint, and a training's snapshot beside it: hidden, not a checkpoint
            for sub in [dir.join(&m.name), dir.join(format!(".{}.snapshot", m.name))] {
                std::fs::create_dir_all(&sub).unwrap();
                std::fs::write(
                    sub.join("config.json"),
                    serde_json::to_string(&m.info).unwrap(),
                )
                .unwrap();
            }
        }
        std::fs::create_dir_all(dir.join("not-a-checkpoint")).unwrap();
        let read = read_checkpoints(&[&dir, &dir.join("absent")]).unwrap();
        let names: Vec<&str> = read.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(names, ["alibi", "rope"]);
        std::fs::write(dir.join("alibi/config.json"), r#"{"unknown": 1}"#).unwrap();
        assert!(read_checkpoints(&[&dir]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
