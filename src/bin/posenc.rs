//! `posenc`: inspect position encodings from the command line.
//!
//! ```text
//! posenc dump t5-bucket --num-buckets 32 --max-distance 128 --min -20 --max 20
//! posenc dump rope-freqs --dim 64 --base 10000 --scaling yarn --factor 4 --original-max 2048
//! posenc rope --config tests/golden/configs/gpt-oss-20b.json [--json]    # a model's RoPE
//! posenc train --scheme alibi --steps 600 --out /tmp/alibi                # feature `train`
//! posenc eval --checkpoint data/checkpoints/rope --scaling yarn --lengths 128,512,2048
//! posenc sweep --config data/configs/sweep.json                          # every scheme
//! posenc sweep --config data/configs/sweep.json --plan                   # its items' cost
//! posenc export attention --checkpoint data/checkpoints/t5 --length 2048 --pool 32
//! posenc report --results data/results                                   # README's table
//! ```

#[path = "posenc/dump.rs"]
mod dump;
#[cfg(feature = "train")]
#[path = "posenc/eval_cli.rs"]
mod eval_cli;
#[path = "posenc/named_arg.rs"]
mod named_arg;
#[path = "posenc/rope.rs"]
mod rope;
#[cfg(feature = "train")]
#[path = "posenc/train_cli.rs"]
mod train_cli;

use std::io::Write;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use dump::Dump;
use posenc::encodings::rope::{
    RopeScaling, ScalingKind, LLAMA3_HIGH_FREQ_FACTOR, LLAMA3_LOW_FREQ_FACTOR, YARN_BETA_FAST,
    YARN_BETA_SLOW,
};
use posenc::encodings::sinusoidal::SinusoidalLayout;

use named_arg::named;

/// Positional encodings for Transformers: inspect, train, evaluate.
#[derive(Parser)]
#[command(name = "posenc", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a scheme's position object as JSON (default) or CSV.
    Dump {
        #[command(subcommand)]
        what: DumpWhat,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Json, global = true)]
        format: Format,
    },
    /// What a model's RoPE configuration means: frequencies, wavelengths against the original
    /// and extended length, cos/sin scale, softmax and logit multipliers (text, or --json).
    Rope(rope::RopeArgs),
    /// The results table of a sweep's results folder as markdown: mean and standard deviation
    /// over seeds at each length, parameters and seeds; with per-window losses, each model's
    /// change from the shortest length to the longest with its uncertainty over seeds and over
    /// the text, t-tested with a Holm correction and ranked, and tested against a reference
    /// model's change; the tables of the other window modes; with curves.csv, what each
    /// training run gained over its last 20% (--part table: the README's results section,
    /// --part details: docs/results.md).
    Report {
        /// The results folder: ppl_vs_length.csv and, when present, windows/*.csv and
        /// curves.csv.
        #[arg(long, default_value = "data/results")]
        results: std::path::PathBuf,
        /// Window mode of the table: matched, nonoverlap or sliding [default: the first the
        /// results have].
        #[arg(long)]
        mode: Option<String>,
        /// The model whose change the others' are tested against, by its label (alibi,
        /// rope/ft-yarn), or none [default: alibi when the table has it].
        #[arg(long)]
        reference: Option<String>,
        /// What to print: all; table (the table with its tests and the plateau totals); or
        /// details (the tests against the reference, the other modes' tables, every run's
        /// gain).
        #[arg(long, default_value = "all")]
        part: String,
    },
    /// Train the byte-level language model with one position scheme.
    #[cfg(feature = "train")]
    Train(Box<train_cli::TrainArgs>),
    /// Perplexity of a checkpoint versus length (CSV on standard output; --csv also writes it).
    #[cfg(feature = "train")]
    Eval(Box<eval_cli::EvalArgs>),
    /// Train and evaluate every scheme (the results table).
    #[cfg(feature = "train")]
    Sweep(train_cli::SweepArgs),
    /// What a checkpoint learned: T5 bias tables, pooled attention maps (CSV).
    #[cfg(feature = "train")]
    Export(train_cli::ExportArgs),
}

#[derive(Clone, Copy, ValueEnum)]
enum Format {
    Json,
    Csv,
}

#[derive(Subcommand)]
enum DumpWhat {
    /// T5 buckets of relative positions (key - query, the HF convention).
    T5Bucket {
        /// Number of buckets (T5: 32).
        #[arg(long, default_value_t = 32)]
        num_buckets: usize,
        /// Distance where the last bucket starts (T5: 128).
        #[arg(long, default_value_t = 128)]
        max_distance: usize,
        /// Decoder (causal) buckets instead of encoder (bidirectional) ones.
        #[arg(long)]
        causal: bool,
        /// First relative position.
        #[arg(long, allow_hyphen_values = true, default_value_t = -300)]
        min: i64,
        /// Last relative position.
        #[arg(long, allow_hyphen_values = true, default_value_t = 300)]
        max: i64,
    },
    /// DeBERTa log buckets of relative positions (query - key, the HF convention).
    DebertaBucket {
        /// `position_buckets` (DeBERTa-v3: 256).
        #[arg(long, default_value_t = 256)]
        bucket_size: usize,
        /// `max_relative_positions` (DeBERTa-v3: 512).
        #[arg(long, default_value_t = 512)]
        max_position: usize,
        /// First relative position.
        #[arg(long, allow_hyphen_values = true, default_value_t = -1100)]
        min: i64,
        /// Last relative position.
        #[arg(long, allow_hyphen_values = true, default_value_t = 1100)]
        max: i64,
    },
    /// ALiBi slopes.
    AlibiSlopes {
        /// Number of heads.
        #[arg(long)]
        heads: usize,
    },
    /// RoPE inverse frequencies and attention factor (defaults as Hugging Face).
    RopeFreqs(RopeArgs),
    /// The sinusoidal table for positions 0..N.
    Sinusoidal {
        /// Number of positions.
        #[arg(long)]
        positions: usize,
        /// Width (even).
        #[arg(long)]
        dim: usize,
        /// Frequency base.
        #[arg(long, default_value_t = 10_000.0)]
        base: f64,
        /// Feature layout.
        #[arg(long, value_parser = named::<SinusoidalLayout>(), default_value_t = SinusoidalLayout::Interleaved)]
        layout: SinusoidalLayout,
    },
}

#[derive(Args)]
struct RopeArgs {
    /// Rotary dimension (even).
    #[arg(long)]
    dim: usize,
    /// Frequency base (rope_theta).
    #[arg(long, default_value_t = 10_000.0)]
    base: f64,
    /// Context-extension scaling; none if absent.
    #[arg(long, value_parser = named::<ScalingKind>())]
    scaling: Option<ScalingKind>,
    /// Scaling factor s (required with --scaling; for yarn, defaults to
    /// max-position / original-max as in HF when omitted).
    #[arg(long, allow_negative_numbers = true)]
    factor: Option<f64>,
    /// Training context L (original_max_position_embeddings); default: --max-position
    /// (llama3: 8192).
    #[arg(long)]
    original_max: Option<usize>,
    /// max_position_embeddings (HF LlamaConfig default 2048).
    #[arg(long, default_value_t = 2048)]
    max_position: usize,
    /// Current sequence length (dynamic only).
    #[arg(long)]
    seq_len: Option<usize>,
    /// YaRN (and NTK-by-parts) beta_fast.
    #[arg(long, default_value_t = YARN_BETA_FAST)]
    beta_fast: f64,
    /// YaRN (and NTK-by-parts) beta_slow.
    #[arg(long, default_value_t = YARN_BETA_SLOW)]
    beta_slow: f64,
    /// Llama3 low_freq_factor.
    #[arg(long, default_value_t = LLAMA3_LOW_FREQ_FACTOR)]
    low_freq_factor: f64,
    /// Llama3 high_freq_factor.
    #[arg(long, default_value_t = LLAMA3_HIGH_FREQ_FACTOR)]
    high_freq_factor: f64,
}

impl RopeArgs {
    fn scaling(&self) -> Result<RopeScaling, String> {
        let Some(kind) = self.scaling else {
            return Ok(RopeScaling::None);
        };
        let require_factor = || {
            self.factor
                .ok_or_else(|| "--factor is required with --scaling".to_string())
        };
        Ok(match kind {
            ScalingKind::Linear => RopeScaling::Linear {
                factor: require_factor()?,
            },
            ScalingKind::Ntk => RopeScaling::NtkAware {
                factor: require_factor()?,
            },
            ScalingKind::Dynamic => RopeScaling::Dynamic {
                factor: require_factor()?,
                original_max: self.original_max.unwrap_or(self.max_position),
            },
            ScalingKind::NtkByParts => RopeScaling::NtkByParts {
                factor: require_factor()?,
                original_max: self.original_max.unwrap_or(self.max_position),
                beta_fast: self.beta_fast,
                beta_slow: self.beta_slow,
                truncate: true,
            },
            ScalingKind::Yarn => {
                let original_max = self.original_max.unwrap_or(self.max_position);
                let factor = self
                    .factor
                    .unwrap_or(self.max_position as f64 / original_max.max(1) as f64);
                RopeScaling::Yarn {
                    factor,
                    original_max,
                    beta_fast: self.beta_fast,
                    beta_slow: self.beta_slow,
                    mscale: None,
                    mscale_all_dim: None,
                    attention_factor: None,
                    truncate: true,
                }
            }
            ScalingKind::Llama3 => RopeScaling::Llama3 {
                factor: require_factor()?,
                original_max: self.original_max.unwrap_or(8192),
                low_freq_factor: self.low_freq_factor,
                high_freq_factor: self.high_freq_factor,
            },
        })
    }
}

fn run(cli: Cli) -> Result<String, String> {
    let (what, format) = match cli.command {
        Command::Dump { what, format } => (what, format),
        Command::Report {
            results,
            mode,
            reference,
            part,
        } => {
            return posenc::results::ReportPart::from_name(&part)
                .and_then(|part| {
                    posenc::results::report(&results, mode.as_deref(), reference.as_deref(), part)
                })
                .map_err(|e| e.to_string())
        }
        Command::Rope(args) => return rope::run(&args),
        #[cfg(feature = "train")]
        Command::Train(args) => return train_cli::train(*args),
        #[cfg(feature = "train")]
        Command::Eval(args) => return eval_cli::eval(*args),
        #[cfg(feature = "train")]
        Command::Sweep(args) => return train_cli::sweep(args),
        #[cfg(feature = "train")]
        Command::Export(args) => return train_cli::export(args),
    };
    let err = |e: posenc::Error| e.to_string();
    let dump: Dump = match what {
        DumpWhat::T5Bucket {
            num_buckets,
            max_distance,
            causal,
            min,
            max,
        } => dump::t5_buckets(num_buckets, max_distance, causal, min, max).map_err(err)?,
        DumpWhat::DebertaBucket {
            bucket_size,
            max_position,
            min,
            max,
        } => dump::deberta_buckets(bucket_size, max_position, min, max).map_err(err)?,
        DumpWhat::AlibiSlopes { heads } => dump::alibi(heads).map_err(err)?,
        DumpWhat::RopeFreqs(args) => {
            let scaling = args.scaling()?;
            dump::rope_frequencies(args.dim, args.base, scaling, args.seq_len).map_err(err)?
        }
        DumpWhat::Sinusoidal {
            positions,
            dim,
            base,
            layout,
        } => dump::sinusoidal(positions, dim, base, layout).map_err(err)?,
    };
    Ok(match format {
        Format::Json => dump.to_json().to_string(),
        Format::Csv => dump.to_csv().trim_end().to_string(),
    })
}

/// Writes the command's output and a newline to standard output. A reader that closed the
/// pipe early (`posenc dump ... | head`) is not an error: the output is simply not wanted.
fn print_output(out: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match writeln!(stdout, "{out}").and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => other,
    }
}

/// Keeps freed memory in the process instead of returning it to the kernel: a training step
/// allocates and frees tensors of megabytes, which glibc by default maps and unmaps (or trims
/// off the heap) each time, so every step page-faults them in and zeroes them again (a fifth of
/// the samples of a profiled step). Freed blocks up to 256 MiB are reused from the heap instead.
#[cfg(all(feature = "train", target_os = "linux", target_env = "gnu"))]
fn keep_freed_memory() {
    // SAFETY: mallopt only sets allocator parameters; called before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 1 << 30);
    }
}

#[cfg(not(all(feature = "train", target_os = "linux", target_env = "gnu")))]
fn keep_freed_memory() {}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version on stdout (status 0), errors whole on stderr (status 2):
            // clap's suggestions ("a similar argument exists", possible values) included
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
    };
    let result = run(cli);
    match result {
        Ok(out) => match print_output(&out) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                let _ = writeln!(std::io::stderr(), "error: writing the output: {e}");
                ExitCode::FAILURE
            }
        },
        Err(message) => {
            let _ = writeln!(std::io::stderr(), "error: {message}");
            ExitCode::FAILURE
        }
    }
}
