//! The sweep: every scheme trained with the same data order, steps and model size; every
//! checkpoint evaluated at every length; RoPE also with PI / NTK / dynamic NTK / YaRN / Llama3
//! at inference and fine-tuned briefly at a longer length with PI and with YaRN. Results go
//! to one CSV (rewritten after each model, so a partial sweep leaves partial results), and a
//! finished checkpoint whose configuration matches is reused rather than retrained.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::eval::{evaluate, write_csv, EvalOptions, EvalRow, InferenceScaling, Mode, ScalingKind};
use crate::model::checkpoint::{io_error, WeightDtype};
use crate::model::{ModelConfig, Scheme};
use crate::train::{load_model, read_info, to_json, train, TrainConfig, TrainRun};

/// Evaluation settings of the sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepEval {
    /// Lengths; default 128, 256, 512, 1024, 2048.
    pub lengths: Vec<usize>,
    /// Only the first bytes of the split; default 262144 (128 windows of 2048).
    pub max_bytes: Option<usize>,
    /// Split; default `valid`.
    pub split: String,
    /// Window layouts, each evaluated; default nonoverlap and sliding.
    pub modes: Vec<Mode>,
}

impl Default for SweepEval {
    fn default() -> Self {
        Self {
            lengths: vec![128, 256, 512, 1024, 2048],
            max_bytes: Some(262_144),
            split: "valid".into(),
            modes: vec![Mode::Nonoverlap, Mode::Sliding],
        }
    }
}

impl SweepEval {
    /// Evaluates `model` in every mode: rows of `variant`, with `scaling` at inference, and
    /// the per-position losses of the longest non-overlapping window written to
    /// `per_position`.
    #[allow(clippy::too_many_arguments)]
    fn run(
        &self,
        lm: &crate::model::Lm,
        info: &crate::train::CheckpointInfo,
        variant: &str,
        scaling: Option<InferenceScaling>,
        per_position: Option<PathBuf>,
        corpus: &Path,
        device: &Device,
        progress: bool,
    ) -> Result<Vec<EvalRow>> {
        let mut rows = Vec::new();
        for &mode in &self.modes {
            let opts = EvalOptions {
                lengths: self.lengths.clone(),
                mode,
                max_bytes: self.max_bytes,
                split: self.split.clone(),
                scaling,
                force_separate: false,
                per_position: per_position.clone().filter(|_| mode == Mode::Nonoverlap),
                progress,
                corpus: corpus.to_path_buf(),
            };
            rows.extend(evaluate(lm, info, variant, &opts, device)?);
        }
        Ok(rows)
    }
}

/// Fine-tuning of the RoPE checkpoint at a longer length.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepFinetune {
    /// Scalings to fine-tune with; default PI (`linear`) and YaRN.
    pub kinds: Vec<ScalingKind>,
    /// Length factor; default 2 (training at twice the length, with scaling factor 2).
    pub factor: usize,
    /// Steps; default 100.
    pub steps: usize,
    /// Sequences per step; default 16 (as many bytes per step as the base training).
    pub batch: usize,
    /// Peak learning rate; default 1e-3.
    pub lr: f64,
    /// Warm-up steps; default 10.
    pub warmup: usize,
}

impl Default for SweepFinetune {
    fn default() -> Self {
        Self {
            kinds: vec![ScalingKind::Linear, ScalingKind::Yarn],
            factor: 2,
            steps: 100,
            batch: 16,
            lr: 1e-3,
            warmup: 10,
        }
    }
}

/// The sweep's configuration (`posenc sweep --config FILE`, JSON; missing fields take the
/// defaults, which are the shipped results' settings).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SweepConfig {
    /// The model (its `scheme` is replaced by each scheme in turn).
    pub model: ModelConfig,
    /// Training.
    pub train: TrainConfig,
    /// Schemes; default all 13.
    pub schemes: Vec<Scheme>,
    /// Evaluation.
    pub eval: SweepEval,
    /// RoPE scalings applied at inference to the RoPE checkpoint (factor $L/L_{train}$ at each
    /// length); default all five.
    pub rope_inference: Vec<ScalingKind>,
    /// RoPE fine-tunes.
    pub finetune: SweepFinetune,
    /// Checkpoint folder; default `data/checkpoints`.
    pub checkpoints: PathBuf,
    /// Results CSV; default `data/results/ppl_vs_length.csv`.
    pub results: PathBuf,
    /// Precision of saved weights; default f16.
    pub dtype: WeightDtype,
    /// Reuse a finished checkpoint with the same configuration; default true.
    pub reuse: bool,
}

impl Default for SweepConfig {
    fn default() -> Self {
        Self {
            model: ModelConfig::default(),
            train: TrainConfig::default(),
            schemes: Scheme::ALL.to_vec(),
            eval: SweepEval::default(),
            rope_inference: vec![
                ScalingKind::Linear,
                ScalingKind::Ntk,
                ScalingKind::Dynamic,
                ScalingKind::Yarn,
                ScalingKind::Llama3,
            ],
            finetune: SweepFinetune::default(),
            checkpoints: "data/checkpoints".into(),
            results: "data/results/ppl_vs_length.csv".into(),
            dtype: WeightDtype::F16,
            reuse: true,
        }
    }
}

impl SweepConfig {
    /// Reads a JSON file.
    ///
    /// # Errors
    /// An unreadable or invalid file.
    pub fn read(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| io_error(path, e))?;
        serde_json::from_str(&text).map_err(|e| io_error(path, e))
    }
}

/// Timing of one sweep item.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SweepTiming {
    /// `scheme/variant`.
    pub name: String,
    /// Training seconds (0 if reused).
    pub train_seconds: f64,
    /// Evaluation seconds.
    pub eval_seconds: f64,
}

/// Runs the sweep; returns every row (also written to `config.results`).
///
/// # Errors
/// Any training or evaluation error, with the scheme.
pub fn sweep(
    config: &SweepConfig,
    corpus: &Path,
    device: &Device,
    progress: bool,
) -> Result<Vec<EvalRow>> {
    let began = Instant::now();
    let mut rows: Vec<EvalRow> = Vec::new();
    let mut timings: Vec<SweepTiming> = Vec::new();
    let total = config.schemes.len() + config.finetune.kinds.len();
    let mut done = 0;
    for &scheme in &config.schemes {
        done += 1;
        let mut model = config.model.clone();
        model.scheme = scheme;
        let dir = config.checkpoints.join(scheme.name());
        eprintln!("[{done}/{total}] {scheme}: {model}");
        let train_seconds = ensure_trained(
            config,
            &model,
            &config.train,
            &dir,
            None,
            corpus,
            device,
            progress,
        )?;
        let t = Instant::now();
        let (lm, info) = load_model(&dir, device)?;
        let first = rows.len();
        let per_position = Some(per_position_path(config, scheme.name()));
        rows.extend(config.eval.run(
            &lm,
            &info,
            "base",
            None,
            per_position,
            corpus,
            device,
            progress,
        )?);
        if scheme == Scheme::Rope {
            for &kind in &config.rope_inference {
                let scaling = Some(InferenceScaling { kind, factor: None });
                let per_position =
                    Some(per_position_path(config, &format!("rope-{}", kind.name())));
                rows.extend(config.eval.run(
                    &lm,
                    &info,
                    kind.name(),
                    scaling,
                    per_position,
                    corpus,
                    device,
                    progress,
                )?);
            }
        }
        timings.push(SweepTiming {
            name: scheme.name().into(),
            train_seconds,
            eval_seconds: t.elapsed().as_secs_f64(),
        });
        print_rows(&rows[first..]);
        write_outputs(config, &rows, &timings, began)?;
    }
    let base = config.checkpoints.join(Scheme::Rope.name());
    for &kind in &config.finetune.kinds {
        done += 1;
        let ft = &config.finetune;
        let mut model = config.model.clone();
        model.scheme = Scheme::Rope;
        model.train_len = config.model.train_len * ft.factor;
        model.rope_scaling = kind.scaling(ft.factor as f64, config.model.train_len);
        let train_cfg = TrainConfig {
            batch: ft.batch,
            steps: ft.steps,
            lr: ft.lr,
            warmup: ft.warmup,
            ..config.train.clone()
        };
        let name = format!("rope-ft-{}", kind.name());
        eprintln!("[{done}/{total}] {name}: {model}");
        if !base.join("config.json").exists() {
            return Err(Error::Io(format!(
                "fine-tuning needs the RoPE checkpoint {}",
                base.display()
            )));
        }
        let dir = config.checkpoints.join(&name);
        let train_seconds = ensure_trained(
            config,
            &model,
            &train_cfg,
            &dir,
            Some(&base),
            corpus,
            device,
            progress,
        )?;
        let t = Instant::now();
        let (lm, info) = load_model(&dir, device)?;
        let first = rows.len();
        let variant = format!("ft-{}", kind.name());
        let per_position = Some(per_position_path(config, &name));
        rows.extend(config.eval.run(
            &lm,
            &info,
            &variant,
            None,
            per_position,
            corpus,
            device,
            progress,
        )?);
        timings.push(SweepTiming {
            name,
            train_seconds,
            eval_seconds: t.elapsed().as_secs_f64(),
        });
        print_rows(&rows[first..]);
        write_outputs(config, &rows, &timings, began)?;
    }
    eprintln!(
        "sweep done in {:.1} min: {}",
        began.elapsed().as_secs_f64() / 60.0,
        config.results.display()
    );
    Ok(rows)
}

fn per_position_path(config: &SweepConfig, name: &str) -> PathBuf {
    let dir = config.results.parent().unwrap_or(Path::new("."));
    dir.join("per_position").join(format!("{name}.csv"))
}

/// Trains into `dir` unless a finished checkpoint with the same configuration is there;
/// returns the training seconds (0 when reused).
#[allow(clippy::too_many_arguments)]
fn ensure_trained(
    config: &SweepConfig,
    model: &ModelConfig,
    train_cfg: &TrainConfig,
    dir: &Path,
    init: Option<&Path>,
    corpus: &Path,
    device: &Device,
    progress: bool,
) -> Result<f64> {
    if config.reuse {
        if let Ok(info) = read_info(dir) {
            if &info.model == model && &info.train == train_cfg && info.step == train_cfg.steps {
                eprintln!("  reusing {}", dir.display());
                return Ok(0.0);
            }
        }
    }
    let t = Instant::now();
    let (info, _) = train(&TrainRun {
        model: model.clone(),
        train: train_cfg.clone(),
        out: dir.to_path_buf(),
        resume: false,
        init: init.map(Path::to_path_buf),
        stop_after: None,
        log_every: (train_cfg.steps / 6).max(1),
        progress,
        dtype: config.dtype,
        corpus: corpus.to_path_buf(),
        device: device.clone(),
    })
    .map_err(|e| Error::Io(format!("training {}: {e}", model.scheme)))?;
    eprintln!(
        "  trained {} steps in {:.0} s, final train loss {:.3} nats/byte",
        info.step,
        info.train_seconds,
        info.final_train_loss.unwrap_or(f64::NAN)
    );
    Ok(t.elapsed().as_secs_f64())
}

fn print_rows(rows: &[EvalRow]) {
    for r in rows {
        eprintln!(
            "  {:<10} {:<9} {:<10} L={:<5} {:.4} ± {:.4} nats/byte ({} bytes)",
            r.scheme, r.variant, r.mode, r.eval_len, r.nats_per_byte, r.std_error, r.tokens_scored
        );
    }
}

fn write_outputs(
    config: &SweepConfig,
    rows: &[EvalRow],
    timings: &[SweepTiming],
    began: Instant,
) -> Result<()> {
    write_csv(&config.results, rows)?;
    let summary = serde_json::json!({
        "config": config,
        "wall_seconds": began.elapsed().as_secs_f64(),
        "items": timings,
    });
    let path = config.results.with_file_name("sweep.json");
    crate::model::checkpoint::write_atomic(&path, to_json(&summary).as_bytes())
}
