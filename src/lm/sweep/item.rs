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
use crate::lm::config::{Extension, SweepConfig, SweepEval};
use crate::lm::eval::{
    evaluate_windows, EvalOptions, InferenceScaling, Mode, ReRopeWindow, ResultRow, RopeInference,
    ScalingKind, SelfExtendWindow, WindowRow,
};
use crate::lm::model::{Kernels, ModelConfig, Scheme};
use crate::lm::train::{load_model, log_line, read_info, TrainConfig};

impl SweepEval {
    /// The options of one evaluation in `mode` at the sweep's lengths, with `scaling` and
    /// `rope` (ReRoPE, log-$n$) at inference.
    pub(super) fn options(
        &self,
        mode: Mode,
        (scaling, rope): (Option<InferenceScaling>, RopeInference),
        corpus: &Path,
    ) -> EvalOptions {
        EvalOptions {
            lengths: self.lengths.clone(),
            mode,
            max_bytes: self.budget(mode),
            segment_bytes: self.segment_bytes,
            split: self.split.clone(),
            scaling,
            rope,
            force_separate: false,
            per_position: None,
            progress: false,
            corpus: corpus.to_path_buf(),
            kernels: Kernels::default(),
        }
    }

    /// Evaluates `model` in every mode: rows of `variant`, with `at_inference` (a scaling,
    /// ReRoPE, log-$n$), and the per-position losses of the longest non-overlapping window
    /// written to `per_position`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        lm: &crate::lm::model::Lm,
        info: &crate::lm::train::CheckpointInfo,
        variant: &str,
        at_inference: (Option<InferenceScaling>, RopeInference),
        per_position: Option<PathBuf>,
        corpus: &Path,
        device: &Device,
        progress: bool,
    ) -> Result<(Vec<ResultRow>, Vec<WindowRow>)> {
        let mut rows = Vec::new();
        let mut windows = Vec::new();
        for &mode in &self.modes {
            let opts = EvalOptions {
                per_position: per_position.clone().filter(|_| mode == Mode::Nonoverlap),
                progress,
                ..self.options(mode, at_inference, corpus)
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

    /// The model and training of the checkpoint `item` trains (none for a scaling at
    /// inference).
    pub(super) fn item_training(&self, item: &Item) -> Option<(ModelConfig, TrainConfig)> {
        match *item {
            Item::Base(scheme, seed) => Some((self.scheme_model(scheme), self.seed_train(seed))),
            Item::Budget(scheme, _, seed) => {
                Some((self.scheme_model(scheme), self.budget_train(seed)))
            }
            Item::Finetune {
                scheme,
                scaling,
                factor,
                seed,
            } => Some((
                self.finetune_model(scheme, scaling, factor),
                self.finetune_train(factor, seed),
            )),
            Item::Inference(..) => None,
        }
    }

    /// The scaling `item` applies at inference: its kind with the factor of each length
    /// (dynamic NTK: a fixed factor) and the sweep's bounds; none for the others, which are
    /// scored as trained (a fine-tune with the scaling of its own factor at every length).
    pub(super) fn item_scaling(&self, item: &Item) -> Option<InferenceScaling> {
        match *item {
            Item::Inference(method, _) => method.scaling_kind().map(|kind| InferenceScaling {
                kind,
                factor: (kind == ScalingKind::Dynamic).then_some(self.dynamic_factor),
                bounds: self.rope_bounds,
            }),
            _ => None,
        }
    }

    /// ReRoPE's window (the sweep's $w$, and $k$ for Leaky ReRoPE), Self-Extend's window and
    /// group, dynamic YaRN's ramp bounds and the temperature of `item` at inference; nothing
    /// for the others.
    pub(super) fn item_rope(&self, item: &Item) -> RopeInference {
        match *item {
            Item::Inference(method, _) => RopeInference {
                rerope: match method.extension {
                    Extension::ReRope => Some(ReRopeWindow {
                        window: self.rerope_window,
                        leak: None,
                    }),
                    Extension::LeakyReRope => Some(ReRopeWindow {
                        window: self.rerope_window,
                        leak: Some(self.rerope_leak),
                    }),
                    Extension::Plain
                    | Extension::Scaling(_)
                    | Extension::DynamicYarn
                    | Extension::SelfExtend => None,
                },
                self_extend: (method.extension == Extension::SelfExtend).then_some(
                    SelfExtendWindow {
                        window: self.self_extend_window,
                        group: self.self_extend_group,
                    },
                ),
                temperature: method
                    .temperature
                    .at(self.model.train_len, self.floor_log_beta),
                dynamic_yarn: (method.extension == Extension::DynamicYarn)
                    .then_some(self.rope_bounds),
            },
            _ => RopeInference::default(),
        }
    }
}

/// Whether the from-scratch checkpoint of `scheme` and `seed` is there and trained as this
/// sweep would train it (from the text of `corpus_digest`): then the items that need it use
/// it, whatever `reuse` says (it is this run's, or an earlier run's of the same everything),
/// else they train it.
pub(super) fn base_usable(
    config: &SweepConfig,
    scheme: Scheme,
    seed: u64,
    corpus_digest: &str,
) -> bool {
    let dir = config.base_dir(scheme, seed);
    let from = TrainedFrom {
        corpus_digest,
        init: None,
    };
    read_info(&dir).ok().is_some_and(|info| {
        let model = config.scheme_model(scheme);
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
    let from_scratch = TrainedFrom {
        corpus_digest,
        init: None,
    };
    // normally there from the item before; trained here when this item runs without it, by
    // the first of this run's workers that needs it (the others wait, then find it done)
    let base_dir = item
        .needs()
        .map(|scheme| (scheme, config.base_dir(scheme, seed)));
    if let Some((scheme, dir)) = &base_dir {
        if !base_usable(config, *scheme, seed, corpus_digest) {
            let writer = locks.writer(dir)?;
            if !base_usable(config, *scheme, seed, corpus_digest) {
                ensure_trained(
                    config,
                    &config.scheme_model(*scheme),
                    &config.seed_train(seed),
                    dir,
                    from_scratch,
                    corpus,
                    device,
                    progress,
                    writer.folder,
                )
                .map_err(|e| e.context(format!("training {scheme} (seed {seed})")))?;
            }
        }
    }
    let dir = config.item_dir(&item);
    let train_seconds = match config.item_training(&item) {
        Some((model, train)) => ensure_trained(
            config,
            &model,
            &train,
            &dir,
            TrainedFrom {
                corpus_digest,
                init: base_dir
                    .as_ref()
                    .filter(|_| matches!(item, Item::Finetune { .. }))
                    .map(|(_, d)| d.as_path()),
            },
            corpus,
            device,
            progress,
            locks.writer(&dir)?.folder,
        )
        .map_err(|e| e.context(format!("training {}", item.name())))?,
        None => 0.0,
    };
    let weights_digest = file_digest(&dir.join(WEIGHTS_FILE))?;
    if let Some(rows) = reusable_rows(config, &item, &weights_digest, train_seconds > 0.0)? {
        return Ok(rows);
    }
    let t = Instant::now();
    let (lm, info) = load_model(&dir, device)?;
    let variant = item.variant();
    let curve = match item {
        Item::Inference(..) => Vec::new(),
        _ => curve_rows(&dir, &info, &variant)?,
    };
    let per_position = config
        .results_dir()
        .join("per_position")
        .join(format!("{}.csv", item.stem()));
    let (rows, windows) = config
        .eval
        .run(
            &lm,
            &info,
            &variant,
            (config.item_scaling(&item), config.item_rope(&item)),
            Some(per_position),
            corpus,
            device,
            progress,
        )
        .map_err(|e| e.context(format!("evaluating {}", item.name())))?;
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
        rope_bounds: config.rope_bounds,
        rerope: config.item_rope(&item).rerope,
        self_extend: config.item_rope(&item).self_extend,
        temperature: config.item_rope(&item).temperature,
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
