//! `posenc eval`: perplexity of a checkpoint versus length, with a RoPE checkpoint's
//! extension at inference (a scaling, dynamic YaRN, ReRoPE or Leaky ReRoPE, Self-Extend, a
//! query temperature: log-$n$ or floor-log) (feature `train`).

use std::path::PathBuf;

use clap::Args;

use crate::named_arg::named;
use crate::train_cli::Common;
use posenc::encodings::rope::{RampBounds, ScalingKind};
use posenc::io::csv::csv_bytes;
use posenc::io::ensure_writable;
use posenc::lm::config::inference::DEFAULT_FLOOR_LOG_BETA;
use posenc::lm::config::{Extension, InferenceMethod, TemperatureKind, SWEEP_RAMP};
use posenc::lm::data::{read_split, TargetRegion};
use posenc::lm::eval::{
    check_lengths, evaluate, memory_plan, write_csv, EvalOptions, InferenceScaling, Mode,
    ReRopeWindow, RopeInference, SelfExtendWindow,
};
use posenc::lm::sweep::SweepEval;
use posenc::lm::train::load_model;

#[derive(Args)]
pub struct EvalArgs {
    /// Checkpoint folder (config.json + model.safetensors).
    #[arg(long)]
    checkpoint: PathBuf,
    /// RoPE scaling at inference (RoPE checkpoints).
    #[arg(long, value_parser = named::<ScalingKind>())]
    scaling: Option<ScalingKind>,
    /// Scaling factor [default: L / train_len at each length L].
    #[arg(long, requires = "scaling", allow_negative_numbers = true)]
    factor: Option<f64>,
    /// ReRoPE at inference with window W (RoPE checkpoints): relative positions exact below
    /// W, clipped at W beyond (two passes merged at the window).
    #[arg(long, value_name = "W", conflicts_with = "scaling")]
    rerope: Option<usize>,
    /// Leaky ReRoPE's k with --rerope: beyond the window, relative positions grow with slope
    /// 1/k.
    #[arg(
        long,
        value_name = "K",
        requires = "rerope",
        allow_negative_numbers = true
    )]
    leak: Option<f64>,
    /// Self-Extend at inference with neighbour window W (RoPE checkpoints): relative positions
    /// exact below W, positions grouped by --group beyond.
    #[arg(long, value_name = "W", conflicts_with_all = ["scaling", "rerope"], requires = "group")]
    self_extend: Option<usize>,
    /// Self-Extend's group size G.
    #[arg(long, value_name = "G", requires = "self_extend")]
    group: Option<usize>,
    /// YaRN's and Llama 3's ramp bounds for --scaling and --dynamic-yarn: the references'
    /// (beta 32 / 1, frequency factors 1 / 4) or the sweep's, chosen for its model (2 / 1 and
    /// 1 / 2: the sweep's table is computed with these).
    #[arg(long, value_parser = ["reference", "sweep"], default_value = "reference")]
    ramp: String,
    /// Dynamic YaRN as an engine with a key cache runs it (RoPE checkpoints): position m
    /// rotated with YaRN at factor max(1, (m + 1) / train_len), the factor of the step that
    /// cached it.
    #[arg(long, conflicts_with_all = ["scaling", "rerope", "self_extend"])]
    dynamic_yarn: bool,
    /// Log-n attention scaling at inference (RoPE checkpoints): the query at position m scaled
    /// by max(1, ln(m + 1) / ln train_len), alone or with --scaling, --dynamic-yarn, --rerope
    /// or --self-extend.
    #[arg(long)]
    log_n: bool,
    /// Floor-log attention temperature at inference (RoPE checkpoints), Ministral 3's form:
    /// the query at position m scaled by 1 + beta ln(1 + floor(m / train_len)); alone or with
    /// an extension, like --log-n.
    #[arg(long, conflicts_with = "log_n")]
    floor_log: bool,
    /// Floor-log's beta.
    #[arg(long, requires = "floor_log", default_value_t = DEFAULT_FLOOR_LOG_BETA)]
    floor_log_beta: f64,
    /// Lengths, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "128,256,512,1024,2048")]
    lengths: Vec<usize>,
    /// Window layout.
    #[arg(long, value_parser = named::<Mode>(), default_value_t = Mode::Nonoverlap)]
    mode: Mode,
    /// Only the first N bytes of the split; 0 for all [default: the sweep's budget of the
    /// mode: all of the split for matched and nonoverlap, 32768 for sliding].
    #[arg(long)]
    max_bytes: Option<usize>,
    /// Bytes per target segment in matched mode [default: the sweep's, 1024].
    #[arg(long)]
    segment_bytes: Option<usize>,
    /// valid or test [default: the sweep's, test].
    #[arg(long)]
    split: Option<String>,
    /// Write the mean loss at each position of the longest window to FILE (CSV).
    #[arg(long)]
    per_position: Option<PathBuf>,
    /// Also write the results to FILE (CSV; they are always printed).
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
    // everything checked before the model is loaded or a window evaluated
    check_lengths(&a.lengths).map_err(err)?;
    if let Some(f) = a.factor {
        if !(f.is_finite() && f > 0.0) {
            return Err(format!(
                "invalid --factor = {f}: allowed is a finite number > 0"
            ));
        }
    }
    for path in [&a.csv, &a.per_position].into_iter().flatten() {
        ensure_writable(path).map_err(err)?;
    }
    let sweep_eval = SweepEval::default();
    let split = a.split.clone().unwrap_or(sweep_eval.split.clone());
    let max_bytes = match a.max_bytes {
        Some(0) => None,
        Some(n) => Some(n),
        None => sweep_eval.budget(a.mode),
    };
    let segment_bytes = a.segment_bytes.unwrap_or(sweep_eval.segment_bytes);
    if a.mode == Mode::Matched {
        let text = read_split(&a.common.corpus(), &split).map_err(err)?;
        let longest = a.lengths.iter().copied().max().unwrap_or(1);
        TargetRegion::new(text.len(), longest, segment_bytes, max_bytes).map_err(err)?;
    }
    let device = a.common.device()?;
    let (model, info) = load_model(&a.checkpoint, &device).map_err(err)?;
    let bounds = match a.ramp.as_str() {
        "sweep" => SWEEP_RAMP,
        _ => RampBounds::default(),
    };
    let scaling = a.scaling.map(|kind| InferenceScaling {
        kind,
        factor: a.factor,
        bounds,
    });
    let temperature = if a.log_n {
        TemperatureKind::LogN
    } else if a.floor_log {
        TemperatureKind::FloorLog
    } else {
        TemperatureKind::None
    };
    let rope = RopeInference {
        rerope: a.rerope.map(|window| ReRopeWindow {
            window,
            leak: a.leak,
        }),
        self_extend: a
            .self_extend
            .zip(a.group)
            .map(|(window, group)| SelfExtendWindow { window, group }),
        temperature: temperature.at(info.model.train_len, a.floor_log_beta),
        dynamic_yarn: a.dynamic_yarn.then_some(bounds),
    };
    let extension = match (a.scaling, a.rerope, a.leak, a.self_extend) {
        _ if a.dynamic_yarn => Some(Extension::DynamicYarn),
        (Some(kind), ..) => Some(Extension::Scaling(kind)),
        (None, Some(_), None, _) => Some(Extension::ReRope),
        (None, Some(_), Some(_), _) => Some(Extension::LeakyReRope),
        (None, None, _, Some(_)) => Some(Extension::SelfExtend),
        (None, None, _, None) => (temperature != TemperatureKind::None).then_some(Extension::Plain),
    };
    let opts = EvalOptions {
        lengths: a.lengths.clone(),
        mode: a.mode,
        max_bytes,
        segment_bytes,
        split,
        scaling,
        rope,
        force_separate: a.separate,
        per_position: a.per_position.clone(),
        progress: !a.common.quiet,
        corpus: a.common.corpus(),
        kernels: a.common.kernels,
    };
    let variant = match (extension, info.model.rope_scaling.kind()) {
        (Some(extension), _) => InferenceMethod::tempered(extension, temperature).name(),
        (None, None) => "base".to_string(),
        (None, Some(kind)) => format!("ft-{kind}"),
    };
    // the memory the largest pass takes, said before it starts (evaluate refuses a pass that
    // does not fit, in one line)
    if let Some(plan) = memory_plan(&info.model, &opts, &device).map_err(err)? {
        if !a.common.quiet && plan.fits() {
            eprintln!("eval: {plan}");
        }
    }
    let rows = evaluate(&model, &info, &variant, &opts, &device).map_err(err)?;
    if let Some(path) = &a.csv {
        write_csv(path, &rows).map_err(err)?;
    }
    let text = csv_bytes(&rows).map_err(err)?;
    Ok(String::from_utf8_lossy(&text).trim_end().to_string())
}
