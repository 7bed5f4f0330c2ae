//! `posenc train`, `posenc eval`, `posenc sweep` (feature `train`).

use std::path::PathBuf;

use burn::tensor::Device;
use clap::{Args, ValueEnum};
use posenc::data::default_corpus_dir;
use posenc::eval::{evaluate, write_csv, EvalOptions, InferenceScaling, Mode, ScalingKind};
use posenc::experiment::{sweep as run_sweep, SweepConfig, SweepEval};
use posenc::model::checkpoint::WeightDtype;
use posenc::model::{Kernels, ModelConfig, Scheme};
use posenc::train::{load_model, train as run_train, TrainConfig, TrainRun};

/// Where tensors live.
#[derive(Clone, Copy, ValueEnum)]
pub enum DeviceKind {
    /// Burn's Flex CPU backend (SIMD kernels, rayon threads).
    Cpu,
    /// Burn's CUDA backend (needs the `cuda` feature and the CUDA toolkit).
    Cuda,
}

#[derive(Args)]
pub struct Common {
    /// Device.
    #[arg(long, value_enum, default_value_t = DeviceKind::Cpu)]
    device: DeviceKind,
    /// Corpus folder with train.txt / valid.txt / test.txt [default: data/corpus].
    #[arg(long)]
    corpus: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Attention, GELU, LayerNorm and loss: one fused operation each (CPU only; other devices
    /// use the reference) or burn's composed operations.
    #[arg(long, value_enum, default_value_t = Kernels::Fused)]
    kernels: Kernels,
}

impl Common {
    /// Refuses `--kernels reference` where the command does not take it (sweep, export), so the
    /// flag is never accepted and ignored.
    fn fused_only(&self, command: &str) -> Result<(), String> {
        match self.kernels {
            Kernels::Fused => Ok(()),
            Kernels::Reference => Err(format!(
                "--kernels reference applies to train and eval; {command} runs the fused kernels"
            )),
        }
    }

    fn device(&self) -> Result<Device, String> {
        match self.device {
            DeviceKind::Cpu => Ok(Device::flex()),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => Ok(Device::cuda(0)),
            #[cfg(not(feature = "cuda"))]
            DeviceKind::Cuda => Err("--device cuda needs a build with `--features cuda`".into()),
        }
    }

    fn corpus(&self) -> PathBuf {
        self.corpus.clone().unwrap_or_else(default_corpus_dir)
    }
}

#[derive(Args)]
pub struct TrainArgs {
    /// Position scheme: nope, sinusoidal, learned, shaw, xl, t5, deberta, tupe, rope, alibi,
    /// xpos, kerple, fire.
    #[arg(long)]
    scheme: String,
    /// Training length.
    #[arg(long, default_value_t = 128)]
    train_len: usize,
    /// Total optimiser steps.
    #[arg(long, default_value_t = 600)]
    steps: usize,
    /// Seed of weights and data order.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Checkpoint folder [default: data/checkpoints/<scheme>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Continue the checkpoint in --out (its model and optimiser state; same loss curve).
    #[arg(long)]
    resume: bool,
    /// Start from another checkpoint's weights (fine-tuning, e.g. RoPE at 2x with --scaling).
    #[arg(long)]
    init: Option<PathBuf>,
    /// Stop after this many steps of this run (a checkpoint is written; --resume continues).
    #[arg(long)]
    stop_after: Option<usize>,
    /// Blocks.
    #[arg(long, default_value_t = 4)]
    layers: usize,
    /// Model width.
    #[arg(long, default_value_t = 128)]
    d_model: usize,
    /// Heads.
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// FFN width.
    #[arg(long, default_value_t = 512)]
    d_ff: usize,
    /// Rows of the learned / TUPE absolute tables [default: --train-len].
    #[arg(long)]
    max_positions: Option<usize>,
    /// RoPE scaling to train with (fine-tuning): linear, ntk, dynamic, yarn, llama3.
    #[arg(long)]
    scaling: Option<String>,
    /// Scaling factor (with --scaling).
    #[arg(long, default_value_t = 2.0)]
    factor: f64,
    /// Original (pre-extension) length for --scaling [default: --train-len / --factor].
    #[arg(long)]
    original_len: Option<usize>,
    /// Sequences per step.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Peak learning rate.
    #[arg(long, default_value_t = 3e-3)]
    lr: f64,
    /// Warm-up steps.
    #[arg(long, default_value_t = 50)]
    warmup: usize,
    /// Print a line every N steps.
    #[arg(long, default_value_t = 100)]
    log_every: usize,
    /// Store weights in f16 instead of f32.
    #[arg(long)]
    f16: bool,
    #[command(flatten)]
    common: Common,
}

pub fn train(a: TrainArgs) -> Result<String, String> {
    let err = |e: posenc::Error| e.to_string();
    let scheme = Scheme::parse(&a.scheme).map_err(err)?;
    let rope_scaling = match &a.scaling {
        None => posenc::encodings::rope::RopeScaling::None,
        Some(name) => {
            let original = a
                .original_len
                .unwrap_or((a.train_len as f64 / a.factor).round() as usize);
            ScalingKind::parse(name)
                .map_err(err)?
                .scaling(a.factor, original)
        }
    };
    let model = ModelConfig {
        scheme,
        layers: a.layers,
        d_model: a.d_model,
        heads: a.heads,
        d_ff: a.d_ff,
        train_len: a.train_len,
        max_positions: a.max_positions.unwrap_or(a.train_len),
        fire_threshold: a.train_len as f32,
        rope_scaling,
        ..ModelConfig::default()
    };
    let train = TrainConfig {
        batch: a.batch,
        steps: a.steps,
        lr: a.lr,
        warmup: a.warmup,
        seed: a.seed,
        ..TrainConfig::default()
    };
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from("data/checkpoints").join(scheme.name()));
    let run = TrainRun {
        model,
        train,
        out: out.clone(),
        resume: a.resume,
        init: a.init.clone(),
        stop_after: a.stop_after,
        log_every: a.log_every,
        progress: !a.common.quiet,
        dtype: if a.f16 {
            WeightDtype::F16
        } else {
            WeightDtype::F32
        },
        corpus: a.common.corpus(),
        device: a.common.device()?,
        kernels: a.common.kernels,
    };
    let (info, _) = run_train(&run).map_err(err)?;
    Ok(format!(
        "checkpoint {} (step {}/{}, {} parameters, final train loss {:.4} nats/byte, {:.0} s, {:.0} tokens/s)",
        out.display(),
        info.step,
        info.train.steps,
        info.params,
        info.final_train_loss.unwrap_or(f64::NAN),
        info.train_seconds,
        info.tokens_per_second.unwrap_or(f64::NAN)
    ))
}

#[derive(Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Nonoverlap,
    Sliding,
}

#[derive(Args)]
pub struct EvalArgs {
    /// Checkpoint folder (config.json + model.safetensors).
    #[arg(long)]
    checkpoint: PathBuf,
    /// RoPE scaling at inference: linear (PI), ntk, dynamic, yarn, llama3.
    #[arg(long)]
    scaling: Option<String>,
    /// Scaling factor [default: L / train_len at each length L].
    #[arg(long)]
    factor: Option<f64>,
    /// Lengths, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128,256,512,1024,2048")]
    lengths: Vec<usize>,
    /// Window layout.
    #[arg(long, value_enum, default_value_t = ModeArg::Nonoverlap)]
    mode: ModeArg,
    /// Only the first N bytes of the split; 0 for all [default: the sweep's, 131072 for
    /// nonoverlap and 32768 for sliding, so that the shipped results are reproduced].
    #[arg(long)]
    max_bytes: Option<usize>,
    /// valid or test.
    #[arg(long, default_value = "valid")]
    split: String,
    /// Write the mean loss at each position of the longest window to FILE (CSV).
    #[arg(long)]
    per_position: Option<PathBuf>,
    /// Results CSV [default: <checkpoint>/eval.csv].
    #[arg(long)]
    csv: Option<PathBuf>,
    /// One pass per length even for static schemes (checks the one-pass shortcut).
    #[arg(long)]
    separate: bool,
    #[command(flatten)]
    common: Common,
}

pub fn eval(a: EvalArgs) -> Result<String, String> {
    let err = |e: posenc::Error| e.to_string();
    let device = a.common.device()?;
    let (model, info) = load_model(&a.checkpoint, &device).map_err(err)?;
    let scaling = match &a.scaling {
        None => None,
        Some(name) => Some(InferenceScaling {
            kind: ScalingKind::parse(name).map_err(err)?,
            factor: a.factor,
        }),
    };
    let opts = EvalOptions {
        lengths: a.lengths.clone(),
        mode: match a.mode {
            ModeArg::Nonoverlap => Mode::Nonoverlap,
            ModeArg::Sliding => Mode::Sliding,
        },
        max_bytes: match (a.max_bytes, a.mode) {
            (Some(0), _) => None,
            (Some(n), _) => Some(n),
            (None, ModeArg::Nonoverlap) => SweepEval::default().max_bytes,
            (None, ModeArg::Sliding) => SweepEval::default().sliding_max_bytes,
        },
        split: a.split.clone(),
        scaling,
        force_separate: a.separate,
        per_position: a.per_position.clone(),
        progress: !a.common.quiet,
        corpus: a.common.corpus(),
        kernels: a.common.kernels,
    };
    let variant = match (&scaling, info.model.rope_scaling) {
        (Some(s), _) => s.kind.name().to_string(),
        (None, posenc::encodings::rope::RopeScaling::None) => "base".to_string(),
        (None, s) => format!("ft-{}", s.name()),
    };
    let rows = evaluate(&model, &info, &variant, &opts, &device).map_err(err)?;
    let csv = a
        .csv
        .clone()
        .unwrap_or_else(|| a.checkpoint.join("eval.csv"));
    write_csv(&csv, &rows).map_err(err)?;
    let mut out = String::from(posenc::eval::ResultRow::HEADER);
    for r in &rows {
        out.push('\n');
        out.push_str(&r.csv());
    }
    Ok(out)
}

#[derive(Args)]
pub struct SweepArgs {
    /// JSON configuration (fields not given take the defaults of the shipped results).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the effective configuration and stop.
    #[arg(long)]
    print_config: bool,
    /// Models trained or evaluated at the same time [default: the number of cores, at most 4].
    /// Results do not depend on it; with more than one, progress bars give way to log lines.
    #[arg(long)]
    jobs: Option<usize>,
    #[command(flatten)]
    common: Common,
}

pub fn sweep(a: SweepArgs) -> Result<String, String> {
    let err = |e: posenc::Error| e.to_string();
    let config = match &a.config {
        Some(path) => SweepConfig::read(path).map_err(err)?,
        None => SweepConfig::default(),
    };
    if a.print_config {
        return serde_json::to_string_pretty(&config).map_err(|e| e.to_string());
    }
    a.common.fused_only("sweep")?;
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)));
    if jobs == 0 {
        return Err("invalid --jobs = 0: allowed is >= 1".into());
    }
    let rows = run_sweep(
        &config,
        &a.common.corpus(),
        &a.common.device()?,
        !a.common.quiet,
        jobs,
    )
    .map_err(err)?;
    Ok(format!(
        "{} rows -> {}",
        rows.len(),
        config.results.display()
    ))
}

#[derive(Args)]
pub struct ExportArgs {
    #[command(subcommand)]
    what: ExportWhat,
}

#[derive(clap::Subcommand)]
enum ExportWhat {
    /// The learned T5 (or TUPE) bias of every layer and head versus key - query.
    T5Bias {
        /// Checkpoint folder of a t5 or tupe model.
        #[arg(long)]
        checkpoint: PathBuf,
        /// First relative position (key - query).
        #[arg(long, allow_hyphen_values = true, default_value_t = -2048)]
        min: i64,
        /// Last relative position.
        #[arg(long, allow_hyphen_values = true, default_value_t = 0)]
        max: i64,
        /// CSV file [default: standard output].
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
    /// Attention weights of every layer and head on corpus windows, pooled into blocks.
    Attention {
        /// Checkpoint folder.
        #[arg(long)]
        checkpoint: PathBuf,
        /// Window length.
        #[arg(long, default_value_t = 2048)]
        length: usize,
        /// Block size (divides --length): the map has (length / pool)^2 cells per head.
        #[arg(long, default_value_t = 32)]
        pool: usize,
        /// Consecutive windows averaged.
        #[arg(long, default_value_t = 2)]
        windows: usize,
        /// First byte of the first window.
        #[arg(long, default_value_t = 0)]
        offset: usize,
        /// valid or test.
        #[arg(long, default_value = "valid")]
        split: String,
        /// CSV file [default: standard output].
        #[arg(long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        common: Common,
    },
}

pub fn export(a: ExportArgs) -> Result<String, String> {
    let err = |e: posenc::Error| e.to_string();
    let (csv, rows, out) = match a.what {
        ExportWhat::T5Bias {
            checkpoint,
            min,
            max,
            out,
            common,
        } => {
            common.fused_only("export")?;
            let (model, info) = load_model(&checkpoint, &common.device()?).map_err(err)?;
            let rows = posenc::export::t5_bias(&model, &info, min, max).map_err(err)?;
            (posenc::export::t5_bias_csv(&rows), rows.len(), out)
        }
        ExportWhat::Attention {
            checkpoint,
            length,
            pool,
            windows,
            offset,
            split,
            out,
            common,
        } => {
            common.fused_only("export")?;
            let device = common.device()?;
            let (model, info) = load_model(&checkpoint, &device).map_err(err)?;
            let opts = posenc::export::AttentionOptions {
                length,
                pool,
                windows,
                offset,
                split,
                corpus: common.corpus(),
            };
            let cells =
                posenc::export::attention_map(&model, &info, &opts, &device).map_err(err)?;
            (posenc::export::attention_csv(&cells), cells.len(), out)
        }
    };
    match out {
        None => Ok(csv.trim_end().to_string()),
        Some(path) => {
            posenc::model::checkpoint::write_atomic(&path, csv.as_bytes()).map_err(err)?;
            Ok(format!("{rows} rows -> {}", path.display()))
        }
    }
}
