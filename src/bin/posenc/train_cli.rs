//! `posenc train`, `posenc sweep`, `posenc export` (feature `train`); `posenc eval` is in
//! `eval_cli.rs`.

use std::path::PathBuf;

use burn::tensor::Device;
use clap::{Args, ValueEnum};

use crate::named_arg::named;
use posenc::encodings::fire::initial_threshold;
use posenc::encodings::rope::{RopeScaling, ScalingKind};
use posenc::io::{ensure_writable, write_atomic};
use posenc::lm::checkpoint::WeightDtype;
use posenc::lm::data::{default_corpus_dir, read_split};
use posenc::lm::model::{Kernels, ModelConfig, Scheme};
use posenc::lm::sweep::{plan_text, sweep as run_sweep, Progress, Selection, SweepConfig};
use posenc::lm::train::{load_model, read_info, train as run_train, TrainConfig, TrainRun};

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
    pub(crate) quiet: bool,
    /// Attention, GELU, LayerNorm and loss: one fused operation each (CPU only; other devices
    /// use the reference) or burn's composed operations.
    #[arg(long, value_parser = named::<Kernels>(), default_value_t = Kernels::Fused)]
    pub(crate) kernels: Kernels,
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

    pub(crate) fn device(&self) -> Result<Device, String> {
        match self.device {
            DeviceKind::Cpu => Ok(Device::flex()),
            #[cfg(feature = "cuda")]
            DeviceKind::Cuda => Ok(Device::cuda(0)),
            #[cfg(not(feature = "cuda"))]
            DeviceKind::Cuda => Err("--device cuda needs a build with `--features cuda`".into()),
        }
    }

    pub(crate) fn corpus(&self) -> PathBuf {
        self.corpus.clone().unwrap_or_else(default_corpus_dir)
    }
}

/// `posenc train`. Model and optimisation flags without a value take the defaults of a first
/// training, or with `--resume` the checkpoint's; a value that contradicts the checkpoint is
/// refused.
#[derive(Args)]
pub struct TrainArgs {
    /// Position scheme (required unless --resume).
    #[arg(long, value_parser = named::<Scheme>(), required_unless_present = "resume")]
    scheme: Option<Scheme>,
    /// Checkpoint folder to write (required; an existing checkpoint there is replaced only
    /// with --force, or continued with --resume).
    #[arg(long)]
    out: PathBuf,
    /// Replace a checkpoint already in --out.
    #[arg(long, conflicts_with = "resume")]
    force: bool,
    /// Continue the checkpoint in --out (its model, optimiser state and settings; same loss
    /// curve as one run).
    #[arg(long)]
    resume: bool,
    /// Start from another checkpoint's weights (fine-tuning, e.g. RoPE at 2x with --scaling).
    #[arg(long, conflicts_with = "resume")]
    init: Option<PathBuf>,
    /// Training length [default: 128]; a fresh FIRE model starts its threshold at a quarter of
    /// it, as the paper.
    #[arg(long)]
    train_len: Option<usize>,
    /// Total optimiser steps [default: 600; with --resume, the checkpoint's]; with --resume,
    /// at least the steps already done.
    #[arg(long)]
    steps: Option<usize>,
    /// Stop after this many steps of this run (a checkpoint is written; --resume continues).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    stop_after: Option<u64>,
    /// Also write the checkpoint every N steps, so that a killed run loses at most N steps
    /// (--resume continues it).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    save_every: Option<u64>,
    /// Seed of weights and data order [default: 0].
    #[arg(long)]
    seed: Option<u64>,
    /// Blocks [default: 4].
    #[arg(long)]
    layers: Option<usize>,
    /// Model width [default: 128].
    #[arg(long)]
    d_model: Option<usize>,
    /// Heads [default: 4].
    #[arg(long)]
    heads: Option<usize>,
    /// FFN width [default: 512].
    #[arg(long)]
    d_ff: Option<usize>,
    /// Rows of the learned / TUPE absolute tables [default: --train-len].
    #[arg(long)]
    max_positions: Option<usize>,
    /// RoPE scaling to train with (fine-tuning a rope model).
    #[arg(long, value_parser = named::<ScalingKind>())]
    scaling: Option<ScalingKind>,
    /// Scaling factor [default: 2].
    #[arg(long, requires = "scaling", allow_negative_numbers = true)]
    factor: Option<f64>,
    /// Original (pre-extension) length for --scaling [default: --train-len / --factor].
    #[arg(long, requires = "scaling")]
    original_len: Option<usize>,
    /// Sequences per step [default: 32].
    #[arg(long)]
    batch: Option<usize>,
    /// Peak learning rate [default: 3e-3].
    #[arg(long, allow_negative_numbers = true)]
    lr: Option<f64>,
    /// Warm-up steps [default: 50].
    #[arg(long)]
    warmup: Option<usize>,
    /// Measure the validation loss every N steps and at the last (kept in state.json)
    /// [default: 0, never].
    #[arg(long)]
    valid_every: Option<usize>,
    /// Bytes of the validation split each measurement scores [default: 16384].
    #[arg(long)]
    valid_bytes: Option<usize>,
    /// Print a line every N steps.
    #[arg(long, default_value_t = 100)]
    log_every: usize,
    /// Store weights in f16 instead of f32 [default: f32; with --resume, the checkpoint's].
    #[arg(long)]
    f16: bool,
    #[command(flatten)]
    common: Common,
}

/// A count given on the command line as `u64`, as `usize`.
fn count(n: Option<u64>) -> Option<usize> {
    n.map(|n| usize::try_from(n).unwrap_or(usize::MAX))
}

pub fn train(a: TrainArgs) -> Result<String, String> {
    let err = |e: posenc::Error| e.to_string();
    // with --resume, the checkpoint's settings are the defaults (and contradictions are refused)
    let resumed = if a.resume {
        Some(read_info(&a.out).map_err(err)?)
    } else {
        None
    };
    let (base_model, base_train) = match &resumed {
        Some(info) => (info.model.clone(), info.train.clone()),
        None => (ModelConfig::default(), TrainConfig::default()),
    };
    let scheme = a.scheme.unwrap_or(base_model.scheme);
    let train_len = a.train_len.unwrap_or(base_model.train_len);
    if let Some(kind) = a.scaling {
        if scheme != Scheme::Rope {
            return Err(format!(
                "invalid --scaling = {kind}: allowed is only with --scheme rope (RoPE scalings; this is {scheme})"
            ));
        }
    }
    let rope_scaling = match a.scaling {
        None if a.resume => base_model.rope_scaling,
        None => RopeScaling::None,
        Some(kind) => {
            let factor = a.factor.unwrap_or(2.0);
            let original = a
                .original_len
                .unwrap_or((train_len as f64 / factor).round() as usize);
            kind.scaling(factor, original)
        }
    };
    let fresh = resumed.is_none();
    let model = ModelConfig {
        scheme,
        layers: a.layers.unwrap_or(base_model.layers),
        d_model: a.d_model.unwrap_or(base_model.d_model),
        heads: a.heads.unwrap_or(base_model.heads),
        d_ff: a.d_ff.unwrap_or(base_model.d_ff),
        train_len,
        max_positions: a.max_positions.unwrap_or(if fresh {
            train_len
        } else {
            base_model.max_positions
        }),
        fire_threshold: if fresh {
            initial_threshold(train_len)
        } else {
            base_model.fire_threshold
        },
        rope_scaling,
        ..base_model
    };
    let train = TrainConfig {
        batch: a.batch.unwrap_or(base_train.batch),
        steps: a.steps.unwrap_or(base_train.steps),
        lr: a.lr.unwrap_or(base_train.lr),
        warmup: a.warmup.unwrap_or(base_train.warmup),
        seed: a.seed.unwrap_or(base_train.seed),
        valid_every: a.valid_every.unwrap_or(base_train.valid_every),
        valid_bytes: a.valid_bytes.unwrap_or(base_train.valid_bytes),
        ..base_train
    };
    let dtype = match (&resumed, a.f16) {
        (_, true) => WeightDtype::F16,
        (Some(info), false) => info.dtype,
        (None, false) => WeightDtype::F32,
    };
    let run = TrainRun {
        model,
        train,
        out: a.out.clone(),
        resume: a.resume,
        overwrite: a.force,
        init: a.init.clone(),
        stop_after: count(a.stop_after),
        save_every: count(a.save_every).unwrap_or(0),
        snapshot_every: 0,
        log_every: a.log_every,
        progress: !a.common.quiet,
        dtype,
        corpus: a.common.corpus(),
        device: a.common.device()?,
        kernels: a.common.kernels,
    };
    let (info, _) = run_train(&run).map_err(err)?;
    Ok(format!(
        "checkpoint {} (step {}/{}, {} parameters, final train loss {:.4} nats/byte, {:.0} s, {:.0} tokens/s)",
        a.out.display(),
        info.step,
        info.train.steps,
        info.params,
        info.final_train_loss.unwrap_or(f64::NAN),
        info.train_seconds,
        info.tokens_per_second.unwrap_or(f64::NAN)
    ))
}

#[derive(Args)]
pub struct SweepArgs {
    /// JSON configuration (fields not given take the defaults of the shipped results).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Print the effective configuration and stop.
    #[arg(long)]
    print_config: bool,
    /// Print the items of the sweep that the other flags choose (one per line, in order) and
    /// stop.
    #[arg(long, conflicts_with = "print_config")]
    list: bool,
    /// Print the items that the other flags choose with their cost (training steps x
    /// sequences x bytes, validation and evaluation positions), whether each is finished, the
    /// totals by length and an estimate of the time left, and stop.
    #[arg(long, conflicts_with_all = ["print_config", "list"])]
    plan: bool,
    /// Run only these items (names as --list prints them; repeat or separate by commas).
    /// The results of every item done so far are merged into one CSV.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Run every N-th group of the chosen items (a seed's model with the items that use its
    /// checkpoint) starting at the I-th (0-based), for example 0/3, 1/3, 2/3 on three machines;
    /// copy the result folders together and any run merges them.
    #[arg(long, value_parser = parse_shard)]
    shard: Option<(usize, usize)>,
    /// Choose only the items not finished (whose rows are not in the results table, as
    /// --plan marks them) before --shard splits them, so that shards formed at the same time
    /// share what is left evenly. It trusts the results folder's records; a run without it
    /// also checks the weights behind each record.
    #[arg(long)]
    left: bool,
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
    // every flag checked, with --list too: it prints what a run with them would run
    let selection = Selection {
        only: a.only.clone(),
        shard: a.shard,
        left_out: if a.left {
            Progress::read(&config, &config.items()).finished_names()
        } else {
            Vec::new()
        },
    };
    a.common.fused_only("sweep")?;
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get().min(4)));
    if jobs == 0 {
        return Err("invalid --jobs = 0: allowed is >= 1".into());
    }
    if a.list || a.plan {
        config.validate().map_err(err)?;
        let items = config.items();
        let chosen: Vec<_> = selection
            .choose(&items)
            .map_err(err)?
            .into_iter()
            .map(|i| items[i])
            .collect();
        if a.plan {
            let corpus = a.common.corpus();
            let valid = read_split(&corpus, "valid").map_err(err)?.len();
            let eval = read_split(&corpus, &config.eval.split).map_err(err)?.len();
            let costs = config.costs(&chosen, valid, eval).map_err(err)?;
            // every item's finished seeds estimate it, chosen or not
            let progress = Progress::read(&config, &items);
            return Ok(plan_text(&costs, &progress).trim_end().to_string());
        }
        let names: Vec<String> = chosen.iter().map(|i| i.name()).collect();
        return Ok(names.join("\n"));
    }
    let rows = run_sweep(
        &config,
        &selection,
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

/// `I/N` with `0 <= I < N`.
fn parse_shard(s: &str) -> Result<(usize, usize), String> {
    let bad = || format!("expected I/N with 0 <= I < N (for example 0/3), not {s:?}");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (i, n): (usize, usize) = (
        i.trim().parse().map_err(|_| bad())?,
        n.trim().parse().map_err(|_| bad())?,
    );
    if n == 0 || i >= n {
        return Err(bad());
    }
    Ok((i, n))
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
    let writable = |out: &Option<PathBuf>| match out {
        Some(path) => ensure_writable(path).map_err(err),
        None => Ok(()),
    };
    let (csv, rows, out) = match a.what {
        ExportWhat::T5Bias {
            checkpoint,
            min,
            max,
            out,
            common,
        } => {
            common.fused_only("export")?;
            writable(&out)?;
            let (model, info) = load_model(&checkpoint, &common.device()?).map_err(err)?;
            let rows = posenc::lm::export::t5_bias(&model, &info, min, max).map_err(err)?;
            (
                posenc::lm::export::t5_bias_csv(&rows).map_err(err)?,
                rows.len(),
                out,
            )
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
            writable(&out)?;
            let device = common.device()?;
            let (model, info) = load_model(&checkpoint, &device).map_err(err)?;
            let opts = posenc::lm::export::AttentionOptions {
                length,
                pool,
                windows,
                offset,
                split,
                corpus: common.corpus(),
            };
            let cells =
                posenc::lm::export::attention_map(&model, &info, &opts, &device).map_err(err)?;
            (
                posenc::lm::export::attention_csv(&cells).map_err(err)?,
                cells.len(),
                out,
            )
        }
    };
    match out {
        None => Ok(String::from_utf8_lossy(&csv).trim_end().to_string()),
        Some(path) => {
            write_atomic(&path, &csv).map_err(err)?;
            Ok(format!("{rows} rows -> {}", path.display()))
        }
    }
}
