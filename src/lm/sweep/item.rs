//! One item of a sweep: its model trained (or reused), evaluated in every mode and length
//! with the item's scalings, and its files written, the record last.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::Device;

use super::locks::SweepLocks;
use super::plan::Item;
use super::reuse::{ensure_trained, reusable_rows, why_not_reusable, TrainedFrom};
use super::store::{curve_rows, write_item, ItemOutput, ItemRecord, SweepTiming};
use crate::error::Result;
use crate::io::{file_digest, write_json};
use crate::lm::checkpoint::WEIGHTS_FILE;
use crate::lm::config::{SweepConfig, SweepEval};
use crate::lm::eval::{
    evaluate_windows, EvalOptions, InferenceScaling, Mode, ResultRow, ScalingKind, WindowRow,
};
use crate::lm::model::{Kernels, ModelConfig, Scheme};
use crate::lm::train::{load_model, log_line, read_info, TrainConfig};

impl SweepEval {
    /// Evaluates `model` in every mode: rows of `variant`, with `scaling` at inference, and
    /// the per-position losses of the longest non-overlapping window written to
    /// `per_position`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        lm: &crate::lm::model::Lm,
        info: &crate::lm::train::CheckpointInfo,
        variant: &str,
        scaling: Option<InferenceScaling>,
        per_position: Option<PathBuf>,
        corpus: &Path,
        device: &Device,
        progress: bool,
    ) -> Result<(Vec<ResultRow>, Vec<WindowRow>)> {
        let mut rows = Vec::new();
        let mut windows = Vec::new();
        for &mode in &self.modes {
            let opts = EvalOptions {
                lengths: self.lengths.clone(),
                mode,
                max_bytes: self.budget(mode),
                segment_bytes: self.segment_bytes,
                split: self.split.clone(),
                scaling,
                force_separate: false,
                per_position: per_position.clone().filter(|_| mode == Mode::Nonoverlap),
                progress,
                corpus: corpus.to_path_buf(),
                kernels: Kernels::default(),
            };
            let (r, w) = evaluate_windows(lm, info, variant, &opts, device)?;
            rows.extend(r);
            windows.extend(w);
        }
        Ok((rows, windows))
    }
}

impl SweepConfig {
    /// The sweep's model with `scheme`.
    fn scheme_model(&self, scheme: Scheme) -> ModelConfig {
        ModelConfig {
            scheme,
            ..self.model.clone()
        }
    }

    /// The sweep's training with `seed`.
    fn seed_train(&self, seed: u64) -> TrainConfig {
        TrainConfig {
            seed,
            ..self.train.clone()
        }
    }
}

/// Whether the RoPE checkpoint of `seed` is there and trained as this sweep would train it
/// (from the text of `corpus_digest`): then the items that need it use it, whatever `reuse`
/// says (it is this run's, or an earlier run's of the same everything), else they train it.
pub(super) fn rope_usable(config: &SweepConfig, seed: u64, corpus_digest: &str) -> bool {
    let dir = config.rope_dir(seed);
    let from = TrainedFrom {
        corpus_digest,
        init: None,
    };
    read_info(&dir).ok().is_some_and(|info| {
        let model = config.scheme_model(Scheme::Rope);
        let train = config.seed_train(seed);
        matches!(
            why_not_reusable(config, &dir, &info, &model, &train, from),
            Ok(None)
        )
    })
}

/// Trains (if needed) and evaluates one item, writes its files and returns its rows; an item
/// whose record names the same weights and evaluation is not evaluated again (its rows are
/// read back). `locks` are the run's ([`SweepLocks`]): a checkpoint is trained only into a
/// folder it holds for writing.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_item(
    config: &SweepConfig,
    item: Item,
    corpus: &Path,
    corpus_digest: &str,
    device: &Device,
    progress: bool,
    locks: &SweepLocks,
) -> Result<Vec<ResultRow>> {
    let seed = item.seed();
    let rope_dir = config.rope_dir(seed);
    let train_seed = config.seed_train(seed);
    // normally there from the item before; trained here when this item runs without it, by
    // the first of this run's workers that needs it (the others wait, then find it done)
    if item.needs_rope() && !rope_usable(config, seed, corpus_digest) {
        let writer = locks.writer(&rope_dir)?;
        if !rope_usable(config, seed, corpus_digest) {
            ensure_trained(
                config,
                &config.scheme_model(Scheme::Rope),
                &train_seed,
                &rope_dir,
                TrainedFrom {
                    corpus_digest,
                    init: None,
                },
                corpus,
                device,
                progress,
                writer.folder,
            )
            .map_err(|e| e.context(format!("training rope (seed {seed})")))?;
        }
    }
    let dir = config.item_dir(&item);
    let train_seconds = match item {
        Item::Base(scheme, _) => ensure_trained(
            config,
            &config.scheme_model(scheme),
            &train_seed,
            &dir,
            TrainedFrom {
                corpus_digest,
                init: None,
            },
            corpus,
            device,
            progress,
            locks.writer(&dir)?.folder,
        )
        .map_err(|e| e.context(format!("training {scheme} (seed {seed})")))?,
        Item::Finetune(kind, _) => ensure_trained(
            config,
            &config.finetune_model(kind),
            &TrainConfig {
                seed,
                ..config.finetune_train()
            },
            &dir,
            TrainedFrom {
                corpus_digest,
                init: Some(&rope_dir),
            },
            corpus,
            device,
            progress,
            locks.writer(&dir)?.folder,
        )
        .map_err(|e| e.context(format!("fine-tuning {}", item.name())))?,
        Item::Inference(..) => 0.0,
    };
    let weights_digest = file_digest(&dir.join(WEIGHTS_FILE))?;
    if let Some(rows) = reusable_rows(config, &item, &weights_digest, train_seconds > 0.0)? {
        return Ok(rows);
    }
    let t = Instant::now();
    let (lm, info) = load_model(&dir, device)?;
    let base_variant = match item {
        Item::Finetune(kind, _) => format!("ft-{}", kind.name()),
        _ => "base".to_string(),
    };
    let curve = match item {
        Item::Inference(..) => Vec::new(),
        _ => curve_rows(&dir, &info, &base_variant)?,
    };
    // (variant, scaling at inference): fine-tunes also with the factor that matches each length
    let evaluations: Vec<(String, Option<InferenceScaling>)> = match item {
        Item::Base(..) => vec![("base".into(), None)],
        Item::Inference(kind, _) => vec![(
            kind.name().to_string(),
            Some(InferenceScaling {
                kind,
                factor: (kind == ScalingKind::Dynamic).then_some(config.dynamic_factor),
            }),
        )],
        Item::Finetune(kind, _) => vec![
            (base_variant.clone(), None),
            (
                format!("{base_variant}-matched"),
                Some(InferenceScaling { kind, factor: None }),
            ),
        ],
    };
    let mut rows = Vec::new();
    let mut windows = Vec::new();
    for (variant, scaling) in evaluations {
        let per_position = Some(config.results_dir().join("per_position").join(format!(
            "{}{}.csv",
            item.stem(),
            if variant.ends_with("-matched") {
                "-matched"
            } else {
                ""
            }
        )));
        let (r, w) = config
            .eval
            .run(
                &lm,
                &info,
                &variant,
                scaling,
                per_position,
                corpus,
                device,
                progress,
            )
            .map_err(|e| e.context(format!("evaluating {}", item.name())))?;
        rows.extend(r);
        windows.extend(w);
    }
    let timing = SweepTiming {
        name: item.name(),
        train_seconds,
        eval_seconds: t.elapsed().as_secs_f64(),
    };
    let record = ItemRecord {
        item: item.name(),
        weights_digest,
        eval: config.eval.clone(),
        dynamic_factor: config.dynamic_factor,
        timing: timing.clone(),
    };
    let out = ItemOutput {
        rows,
        windows,
        curve,
    };
    // the record goes last: an item counts as done only with it
    write_item(config, &item, &out)?;
    write_json(&config.item_file("items", &item, "json"), &record)?;
    Ok(out.rows)
}

/// Logs an item's rows, one line per mode and length.
pub(super) fn print_rows(name: &str, rows: &[ResultRow]) {
    log_line(&format!("{name}:"));
    for r in rows {
        log_line(&format!(
            "  {:<10} {:<9} {:<10} L={:<5} {:.4} ± {:.4} nats/byte ({} bytes)",
            r.scheme.name(),
            r.variant,
            r.mode.name(),
            r.eval_len,
            r.nats_per_byte,
            r.std_error,
            r.tokens_scored
        ));
    }
}
