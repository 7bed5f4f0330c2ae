//! Perplexity versus length.
//!
//! **matched** (the primary metric): the same target bytes at every length. The targets are
//! bytes $T_0..T_1$ of the split, $T_0$ the longest length and $T_1 - T_0$ a whole number of
//! segments ([`TargetRegion`]). At length $L$ they are cut into chunks of
//! $h = \lceil L/2 \rceil$ bytes from $T_0$, each scored by the window of length $L$ that ends
//! at it (its last positions), so every target byte is scored exactly once per length, with
//! between $\lfloor L/2 \rfloor + 1$ and $L$ bytes of context before it. The rows of
//! `windows/` are the segments (`start` the segment's first target byte, the same at every
//! length), which pair per segment across lengths, models and seeds. One pass per length.
//!
//! **nonoverlap** (the prefix view): windows of the longest length $L_{max}$ tile the text without
//! overlap; the score at length $L$ is the mean loss of the first $L$ positions of every
//! window, i.e. of the windows of length $L$ starting at the same offsets. With causal
//! attention and a *static* position scheme (every scheme here except dynamic NTK, whose
//! frequencies depend on the sequence length, and per-length scaling factors), the loss at
//! position $p < L$ of the long window equals the loss at $p$ of a window of length $L$, so
//! one forward pass at $L_{max}$ gives every length. Otherwise the code runs one pass per
//! length ([`EvalPlan::one_pass`] decides; `tests/train/eval.rs` proves both agree for
//! static schemes).
//!
//! Prefix scoring weighs the first positions of a window, which have little or no context,
//! $L_{max}/L$ times more at length $L$ than at $L_{max}$, and each length scores other bytes;
//! the per-position losses (`per_position/*.csv`) show the effect.
//!
//! **sliding**: for each $L$, windows of length $L$ every $L/2$ bytes; each window scores its
//! last $L/2$ positions (the first window all of them), so every byte is scored once with at
//! least $L/2$ bytes of context. One pass per length.

use std::path::{Path, PathBuf};

use crate::lm::progress::progress_bar;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};

pub use crate::encodings::rope::ScalingKind;
use crate::encodings::rope::{RampBounds, Rope, RopeConfig, RopeLayout, RopeScaling};
use crate::error::{invalid, Error, Result};
use crate::io::csv::csv_bytes;
use crate::io::write_atomic;
use crate::lm::checkpoint::CheckpointInfo;
pub use crate::lm::config::{check_lengths, Mode};
use crate::lm::data::{read_split, window_starts, TargetRegion};
use crate::lm::memory::{available_bytes, eval_bytes, MemoryPlan};
use crate::lm::model::{
    int_tensor, to_vec, Kernels, Lm, ModelConfig, Ops, PositionContext, Scheme,
};
pub use crate::lm::model::{ReRopeWindow, RopeInference, SelfExtendWindow};
use crate::lm::ops::is_flex;
pub use crate::results::{PositionRow, ResultRow, WindowRow};

/// RoPE scaling applied at inference.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct InferenceScaling {
    /// `linear` (PI), `ntk`, `dynamic`, `yarn` or `llama3`.
    pub kind: ScalingKind,
    /// A fixed factor, or `None` for $L / L_{orig}$ at each evaluated length $L$, with
    /// $L_{orig}$ the model's original length ([`ModelConfig::original_len`]).
    pub factor: Option<f64>,
    /// YaRN's betas and Llama 3's frequency factors (the references' by default).
    #[serde(default)]
    pub bounds: RampBounds,
}

/// What to evaluate.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Lengths to score.
    pub lengths: Vec<usize>,
    /// Window layout.
    pub mode: Mode,
    /// Only the first `max_bytes` bytes of the split.
    pub max_bytes: Option<usize>,
    /// Bytes per target segment in matched mode (the unit of the `windows` rows).
    pub segment_bytes: usize,
    /// `valid` or `test`.
    pub split: String,
    /// RoPE scaling at inference (RoPE checkpoints only).
    pub scaling: Option<InferenceScaling>,
    /// ReRoPE's or Self-Extend's window and log-$n$ at inference (RoPE checkpoints only; the
    /// default changes nothing).
    pub rope: RopeInference,
    /// Force one pass per length even where one pass would do (for tests).
    pub force_separate: bool,
    /// Write the mean loss at every position of the longest window to this CSV.
    pub per_position: Option<PathBuf>,
    /// Show a progress bar.
    pub progress: bool,
    /// The corpus folder.
    pub corpus: PathBuf,
    /// Fused or reference kernels (the fused ones only on the Flex CPU backend).
    pub kernels: Kernels,
}

/// Writes rows as CSV (atomically; [`csv_bytes`]).
///
/// # Errors
/// When the file cannot be written.
pub fn write_csv(path: &Path, rows: &[ResultRow]) -> Result<()> {
    write_atomic(path, &csv_bytes(rows)?)
}

/// How the evaluation runs: the position context of each length and whether one pass serves
/// all lengths.
#[derive(Debug, Clone)]
pub struct EvalPlan {
    /// The RoPE scaling at each length (`None`: the model's own).
    pub scaling_at: Vec<(usize, RopeScaling)>,
    /// One forward pass at the longest length gives every length.
    pub one_pass: bool,
}

impl EvalPlan {
    /// The plan for `model` and `opts`.
    ///
    /// # Errors
    /// A scaling, ReRoPE, Self-Extend or log-$n$ on a model that is not RoPE; a window or
    /// group of 0, a $k$ below 1, ReRoPE with Self-Extend.
    pub fn new(model: &ModelConfig, opts: &EvalOptions) -> Result<Self> {
        if !opts.rope.is_plain() && model.scheme != Scheme::Rope {
            return Err(invalid(
                "--rerope/--self-extend/--log-n",
                format!("{:?}", opts.rope),
                format!("only for RoPE checkpoints (this one is {})", model.scheme),
            ));
        }
        // w >= 1, k finite and >= 1, G >= 1, checked by the encodings before any window runs
        let rope = Rope::new(
            RopeConfig::new(model.head_dim(), model.rope_base)?,
            RopeLayout::Half,
        );
        opts.rope.second_pass(rope, 0)?;
        let scaling_at: Vec<(usize, RopeScaling)> = match &opts.scaling {
            None => opts
                .lengths
                .iter()
                .map(|&l| (l, model.rope_scaling))
                .collect(),
            Some(s) => {
                if model.scheme != Scheme::Rope {
                    return Err(invalid(
                        "--scaling",
                        s.kind.name(),
                        format!("only for RoPE checkpoints (this one is {})", model.scheme),
                    ));
                }
                let original = model.original_len();
                opts.lengths
                    .iter()
                    .map(|&l| {
                        let f = s.factor.unwrap_or(l as f64 / original as f64);
                        (l, s.kind.scaling_with(f, original, &s.bounds))
                    })
                    .collect()
            }
        };
        let all_same = scaling_at.windows(2).all(|w| w[0].1 == w[1].1);
        let dynamic = scaling_at
            .iter()
            .any(|(_, s)| PositionContext::is_dynamic(model, s));
        let one_pass =
            opts.mode == Mode::Nonoverlap && all_same && !dynamic && !opts.force_separate;
        Ok(Self {
            scaling_at,
            one_pass,
        })
    }
}

/// The memory of the largest evaluation pass `opts` asks of `model` ([`MemoryPlan`]): the
/// longest window when one pass gives every length, else the largest of the passes per length;
/// `None` off the CPU (a GPU's memory is not the system's).
///
/// # Errors
/// As [`EvalPlan::new`].
pub fn memory_plan(
    model: &ModelConfig,
    opts: &EvalOptions,
    device: &Device,
) -> Result<Option<MemoryPlan>> {
    if !is_flex(device) {
        return Ok(None);
    }
    let plan = EvalPlan::new(model, opts)?;
    let kernels = Ops::new(opts.kernels, device).kernels();
    let threads = rayon::current_num_threads();
    let passes: Vec<usize> = if plan.one_pass {
        opts.lengths.iter().max().copied().into_iter().collect()
    } else {
        opts.lengths.clone()
    };
    let l_max = opts.lengths.iter().max().copied().unwrap_or(1);
    // windows a pass: the batch, or fewer where `max_bytes` holds fewer windows
    let windows = |l: usize| {
        let held = opts.max_bytes.map_or(usize::MAX, |n| {
            let held = match opts.mode {
                Mode::Nonoverlap => n.saturating_sub(l + 1) / l + 1,
                Mode::Sliding => n.saturating_sub(l + 1) / (l / 2).max(1) + 1,
                // at most the targets after T0 = l_max in chunks of ceil(l / 2)
                Mode::Matched => n.saturating_sub(l_max).div_ceil(l.div_ceil(2).max(1)),
            };
            held.max(1)
        });
        batch_for(l).min(held)
    };
    let second_pass = opts.rope.rerope.is_some() || opts.rope.self_extend.is_some();
    let bytes = |l, b| eval_bytes(model, l, b, kernels, (threads, second_pass));
    let largest = passes
        .into_iter()
        .map(|l| (l, windows(l)))
        .max_by_key(|&(l, b)| bytes(l, b));
    Ok(largest.map(|(len, batch)| MemoryPlan {
        len,
        batch,
        bytes: bytes(len, batch),
        available: available_bytes(),
    }))
}

/// Evaluates a model at every length of `opts`; returns one row per length (variant and
/// checkpoint facts filled from `info` and `variant`).
///
/// # Errors
/// Bad lengths, a pass that will not fit in the memory available ([`memory_plan`]), an
/// unreadable corpus, or a text too short for the longest window.
pub fn evaluate(
    model: &Lm,
    info: &CheckpointInfo,
    variant: &str,
    opts: &EvalOptions,
    device: &Device,
) -> Result<Vec<ResultRow>> {
    Ok(evaluate_windows(model, info, variant, opts, device)?.0)
}

/// [`evaluate`], and the loss of every window behind each row.
///
/// # Errors
/// As [`evaluate`].
pub fn evaluate_windows(
    model: &Lm,
    info: &CheckpointInfo,
    variant: &str,
    opts: &EvalOptions,
    device: &Device,
) -> Result<(Vec<ResultRow>, Vec<WindowRow>)> {
    let c = &info.model;
    check_lengths(&opts.lengths)?;
    if let Some(plan) = memory_plan(c, opts, device)? {
        if !plan.fits() {
            return Err(Error::Conflict(format!(
                "{plan}: not enough memory (evaluate shorter lengths)"
            )));
        }
    }
    let text = read_split(&opts.corpus, &opts.split)?;
    let plan = EvalPlan::new(c, opts)?;
    let l_max = *opts.lengths.iter().max().unwrap_or(&1);
    let factor_at = |l: usize| {
        plan.scaling_at
            .iter()
            .find(|(at, _)| *at == l)
            .and_then(|(_, s)| s.factor())
    };
    let mut window_rows = Vec::new();
    let mut row = |eval_len: usize, windows: &[(f64, usize)], starts: &[usize]| {
        let (nats, std_error, n) = mean_and_std_error(windows);
        window_rows.extend(
            windows
                .iter()
                .zip(starts)
                .map(|(&(sum, k), &start)| WindowRow {
                    scheme: c.scheme,
                    variant: variant.to_string(),
                    seed: info.train.seed,
                    mode: opts.mode,
                    eval_len,
                    start,
                    bytes: k,
                    nats_per_byte: sum / k.max(1) as f64,
                }),
        );
        ResultRow {
            scheme: c.scheme,
            variant: variant.to_string(),
            train_len: c.train_len,
            eval_len,
            mode: opts.mode,
            nats_per_byte: nats,
            std_error,
            bits_per_byte: nats / std::f64::consts::LN_2,
            perplexity: nats.exp(),
            tokens_scored: n,
            steps: info.step,
            params: info.params,
            seed: info.train.seed,
            scaling_factor: factor_at(eval_len),
        }
    };
    let too_short = |l: usize| {
        invalid(
            "--max-bytes",
            opts.max_bytes.unwrap_or(text.len()),
            format!("at least one window of {} bytes", l + 1),
        )
    };
    let mut results = Vec::new();
    match opts.mode {
        Mode::Nonoverlap => {
            let starts = window_starts(text.len(), l_max, l_max, opts.max_bytes);
            if starts.is_empty() {
                return Err(too_short(l_max));
            }
            // (sum of the first l losses, l) of every window
            let prefixes = |rows: &[Vec<f32>], l: usize| -> Vec<(f64, usize)> {
                rows.iter()
                    .map(|r| (r[..l].iter().map(|&x| f64::from(x)).sum(), l))
                    .collect()
            };
            if plan.one_pass {
                let rows = window_losses(
                    model,
                    c,
                    &text,
                    &starts,
                    l_max,
                    plan.scaling_at[0].1,
                    device,
                    opts,
                )?;
                for &l in &opts.lengths {
                    results.push(row(l, &prefixes(&rows, l), &starts));
                }
                if let Some(path) = &opts.per_position {
                    write_per_position(path, &rows)?;
                }
            } else {
                for &(l, scaling) in &plan.scaling_at {
                    let rows = window_losses(model, c, &text, &starts, l, scaling, device, opts)?;
                    results.push(row(l, &prefixes(&rows, l), &starts));
                    if l == l_max {
                        if let Some(path) = &opts.per_position {
                            write_per_position(path, &rows)?;
                        }
                    }
                }
            }
        }
        Mode::Matched => {
            let region = TargetRegion::new(text.len(), l_max, opts.segment_bytes, opts.max_bytes)?;
            let segment_starts = region.segment_starts();
            for &(l, scaling) in &plan.scaling_at {
                let windows = region.windows(l);
                let starts: Vec<usize> = windows.iter().map(|w| w.start).collect();
                let rows = window_losses(model, c, &text, &starts, l, scaling, device, opts)?;
                // the loss of every target T0..T1 in order: each window's last `scored`
                let targets: Vec<f64> = windows
                    .iter()
                    .zip(&rows)
                    .flat_map(|(w, r)| r[l - w.scored..].iter().map(|&x| f64::from(x)))
                    .collect();
                let segments: Vec<(f64, usize)> = targets
                    .chunks(region.segment)
                    .map(|t| (t.iter().sum(), t.len()))
                    .collect();
                results.push(row(l, &segments, &segment_starts));
            }
        }
        Mode::Sliding => {
            for &(l, scaling) in &plan.scaling_at {
                let stride = (l / 2).max(1);
                let starts = window_starts(text.len(), l, stride, opts.max_bytes);
                if starts.is_empty() {
                    return Err(too_short(l));
                }
                let rows = window_losses(model, c, &text, &starts, l, scaling, device, opts)?;
                // the first window scores every position, the others their last `stride`
                let scored: Vec<(f64, usize)> = rows
                    .iter()
                    .enumerate()
                    .map(|(w, r)| {
                        let from = if w == 0 { 0 } else { l - stride };
                        (r[from..].iter().map(|&x| f64::from(x)).sum(), l - from)
                    })
                    .collect();
                results.push(row(l, &scored, &starts));
            }
        }
    }
    Ok((results, window_rows))
}

/// The mean loss per byte over windows given as `(sum, count)`, the standard error of that
/// mean estimated from the spread of the windows' own means
/// ($s / \sqrt{n_w}$, $s$ the sample standard deviation of the window means; 0 for one
/// window), and the bytes scored.
pub fn mean_and_std_error(windows: &[(f64, usize)]) -> (f64, f64, usize) {
    let n: usize = windows.iter().map(|w| w.1).sum();
    let mean = windows.iter().map(|w| w.0).sum::<f64>() / n.max(1) as f64;
    let nw = windows.len();
    if nw < 2 {
        return (mean, 0.0, n);
    }
    let means: Vec<f64> = windows.iter().map(|&(s, k)| s / k.max(1) as f64).collect();
    let m = means.iter().sum::<f64>() / nw as f64;
    let var = means.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (nw - 1) as f64;
    (mean, (var / nw as f64).sqrt(), n)
}

/// Windows per forward pass at length `l` (about 8k positions, at least 1).
pub fn batch_for(l: usize) -> usize {
    (8192 / l).clamp(1, 64)
}

/// Per-position NLL `[n * l]` of windows starting at `starts` (inputs `l` bytes, targets the
/// next `l`).
pub(crate) fn window_nll(
    model: &Lm,
    c: &ModelConfig,
    ctx: &PositionContext,
    ops: Ops,
    text: &[u8],
    starts: &[usize],
    l: usize,
) -> Result<Vec<f32>> {
    let device = &ctx.device();
    let mut x = Vec::with_capacity(starts.len() * l);
    let mut y = Vec::with_capacity(starts.len() * l);
    for &s in starts {
        x.extend(text[s..s + l].iter().map(|&b| b as i64));
        y.extend(text[s + 1..s + l + 1].iter().map(|&b| b as i64));
    }
    let shape = [starts.len(), l];
    Ok(to_vec(model.nll(
        c,
        ctx,
        ops,
        int_tensor(x, shape, device),
        int_tensor(y, shape, device),
    )?))
}

/// The loss at each position `0..l` of every window starting at `starts`, one row per window.
#[allow(clippy::too_many_arguments)]
fn window_losses(
    model: &Lm,
    c: &ModelConfig,
    text: &[u8],
    starts: &[usize],
    l: usize,
    scaling: RopeScaling,
    device: &Device,
    opts: &EvalOptions,
) -> Result<Vec<Vec<f32>>> {
    let progress = opts.progress;
    let ctx = PositionContext::at_inference(c, l, scaling, &opts.rope, device)?;
    let ops = Ops::new(opts.kernels, device);
    let chunks: Vec<&[usize]> = starts.chunks(batch_for(l)).collect();
    let bar = progress_bar(
        progress,
        chunks.len() as u64,
        format!("eval {} L={l}", c.scheme),
        "batches",
    );
    let mut rows = Vec::with_capacity(starts.len());
    for chunk in chunks {
        let nll = window_nll(model, c, &ctx, ops, text, chunk, l)?;
        rows.extend(nll.chunks(l).map(<[f32]>::to_vec));
        bar.inc(1);
    }
    bar.finish_and_clear();
    if rows.iter().flatten().any(|x| !x.is_finite()) {
        return Err(Error::NonFinite(format!(
            "non-finite loss evaluating {} at length {l}",
            c.scheme
        )));
    }
    Ok(rows)
}

/// The mean loss at each position over the windows, as CSV `position,nats_per_byte`.
fn write_per_position(path: &Path, rows: &[Vec<f32>]) -> Result<()> {
    let l = rows.first().map_or(0, Vec::len);
    let n = rows.len().max(1) as f64;
    let means: Vec<PositionRow> = (0..l)
        .map(|position| PositionRow {
            position,
            nats_per_byte: rows.iter().map(|r| f64::from(r[position])).sum::<f64>() / n,
        })
        .collect();
    write_atomic(path, &csv_bytes(&means)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_error_is_the_spread_of_window_means() {
        // window means 1, 2, 3 (each of 4 bytes): mean 2, s = 1, se = 1 / sqrt(3)
        let (mean, se, n) = mean_and_std_error(&[(4.0, 4), (8.0, 4), (12.0, 4)]);
        assert_eq!(n, 12);
        assert!((mean - 2.0).abs() < 1e-12);
        assert!((se - 1.0 / 3f64.sqrt()).abs() < 1e-12);
        // one window: no spread to estimate from
        assert_eq!(mean_and_std_error(&[(3.0, 2)]), (1.5, 0.0, 2));
    }

    /// [`memory_plan`] counts the windows `max_bytes` holds at 1024 bytes (a batch of 8):
    /// nonoverlap every 1024 bytes after the first 1025, sliding every 512, matched the
    /// targets after the longest length in chunks of 512; the batch without a budget.
    #[test]
    fn memory_plan_counts_the_windows_max_bytes_holds() {
        let device = Device::flex();
        let windows = |mode: Mode, max_bytes: Option<usize>| {
            let opts = EvalOptions {
                lengths: vec![1024],
                mode,
                max_bytes,
                segment_bytes: 512,
                split: "valid".to_string(),
                scaling: None,
                rope: RopeInference::default(),
                force_separate: false,
                per_position: None,
                progress: false,
                corpus: PathBuf::new(),
                kernels: Kernels::Fused,
            };
            let plan = memory_plan(&ModelConfig::default(), &opts, &device).unwrap();
            plan.map(|p| (p.len, p.batch))
        };
        let budget = Some(3 * 1024 + 1);
        assert_eq!(windows(Mode::Nonoverlap, budget), Some((1024, 3)));
        assert_eq!(windows(Mode::Sliding, budget), Some((1024, 5)));
        assert_eq!(windows(Mode::Matched, budget), Some((1024, 5)));
        assert_eq!(windows(Mode::Matched, None), Some((1024, batch_for(1024))));
    }
}
