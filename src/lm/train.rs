//! Training: AdamW with warm-up and cosine decay on random windows of the training split,
//! checkpoints written atomically at the end and every `save_every` steps, exact resume (of a
//! checkpoint, `--resume`, or of the run's own snapshot after a kill, [`crate::lm::snapshot`]).
//!
//! The checkpoint format is [`crate::lm::checkpoint`]'s. The output folder is locked for the
//! whole run, and everything is checked before the first step: the configurations, the output
//! folder (writable, written by no other process; an existing checkpoint is replaced only when
//! asked), and on resume that nothing contradicts the checkpoint.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::lm::progress::progress_bar;
use burn::grad_clipping::GradientClippingConfig;
use burn::module::Module;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::Device;
use serde::Serialize;

use crate::error::{invalid, Error, Result};
use crate::io::{digest, ensure_dir_writable, format_error, io_error, FolderLock};
use crate::lm::checkpoint::{self, WeightDtype};
pub use crate::lm::checkpoint::{load_model, read_info, CheckpointInfo, TrainState, ValidLoss};
pub use crate::lm::config::TrainConfig;
use crate::lm::data::{read_split, train_batch, window_starts};
use crate::lm::eval::window_nll;
use crate::lm::model::{int_tensor, Kernels, Lm, ModelConfig, Ops, PositionContext};
use crate::lm::snapshot::{self, snapshot_dir};

/// Options of one training run.
#[derive(Debug, Clone)]
pub struct TrainRun {
    /// The model to build; on resume it must be the checkpoint's.
    pub model: ModelConfig,
    /// Optimisation; on resume it must be the checkpoint's except `steps`, which may extend
    /// the training but not fall below the steps already done.
    pub train: TrainConfig,
    /// Checkpoint folder.
    pub out: PathBuf,
    /// Continue from the checkpoint in `out`.
    pub resume: bool,
    /// Replace a checkpoint already in `out` (without it, a first training refuses to).
    pub overwrite: bool,
    /// Start from the weights of another checkpoint (fine-tuning).
    pub init: Option<PathBuf>,
    /// Stop after this many steps of this invocation (a checkpoint is written).
    pub stop_after: Option<usize>,
    /// Also write the checkpoint every this many steps (0: only at the end).
    pub save_every: usize,
    /// Keep the run's exact state in its snapshot beside `out` ([`crate::lm::snapshot`]) every
    /// this many steps (0: never), and continue from the snapshot when it holds an earlier
    /// state of this same run; the snapshot is removed when the run's last step is saved.
    pub snapshot_every: usize,
    /// Print a line every this many steps (0: never).
    pub log_every: usize,
    /// Show a progress bar.
    pub progress: bool,
    /// Precision of the written weights; on resume it must be the checkpoint's.
    pub dtype: WeightDtype,
    /// The corpus folder.
    pub corpus: PathBuf,
    /// The device (autodiff is enabled on it).
    pub device: Device,
    /// Fused or reference kernels (the fused ones only on the Flex CPU backend).
    pub kernels: Kernels,
}

/// A line on standard error; a closed stream is not an error (the training goes on).
pub(crate) fn log_line(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{message}");
}

/// The keys whose values differ between two serialisable configurations, as
/// `key = ours (checkpoint: theirs)`.
fn differences<T: Serialize>(ours: &T, theirs: &T) -> Vec<String> {
    let (Ok(serde_json::Value::Object(a)), Ok(serde_json::Value::Object(b))) =
        (serde_json::to_value(ours), serde_json::to_value(theirs))
    else {
        return vec!["(unreadable configuration)".into()];
    };
    a.iter()
        .filter(|(k, v)| b.get(*k) != Some(v))
        .map(|(k, v)| {
            let theirs = b.get(k).map_or("missing".into(), ToString::to_string);
            format!("{k} = {v} (checkpoint: {theirs})")
        })
        .collect()
}

/// Refuses a resume that contradicts the checkpoint `info` in `run.out`.
fn check_resume(run: &TrainRun, info: &CheckpointInfo) -> Result<()> {
    let out = run.out.display();
    if run.init.is_some() {
        return Err(Error::Conflict(format!(
            "--init starts a fine-tune from another checkpoint and --resume continues {out}: give one of them"
        )));
    }
    if run.train.steps < info.step {
        return Err(invalid(
            "steps",
            run.train.steps,
            format!(
                "at least {}, the steps already done in {out} (a checkpoint is never rewound)",
                info.step
            ),
        ));
    }
    let mut differ = differences(&run.model, &info.model);
    let planned = TrainConfig {
        steps: info.train.steps,
        ..run.train.clone()
    };
    differ.extend(differences(&planned, &info.train));
    if run.dtype != info.dtype {
        differ.push(format!(
            "dtype = {:?} (checkpoint: {:?})",
            run.dtype, info.dtype
        ));
    }
    if !differ.is_empty() {
        return Err(Error::Conflict(format!(
            "--resume continues {out} as it was trained, but {}",
            differ.join(", ")
        )));
    }
    Ok(())
}

/// Refuses to train into `out` when it holds anything but a checkpoint, or a checkpoint and
/// `overwrite` is false.
fn check_target(out: &Path, overwrite: bool) -> Result<()> {
    checkpoint::recover(out)?;
    if !out.exists() {
        return Ok(());
    }
    let entries: Vec<String> = std::fs::read_dir(out)
        .map_err(|e| io_error(out, e))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    let foreign: Vec<&String> = entries
        .iter()
        .filter(|n| !checkpoint::FILES.contains(&n.as_str()))
        .collect();
    if !foreign.is_empty() {
        let names: Vec<&str> = foreign.iter().map(|n| n.as_str()).collect();
        return Err(Error::Conflict(format!(
            "{} holds files that are not a checkpoint's ({}); choose another --out",
            out.display(),
            names.join(", ")
        )));
    }
    if !entries.is_empty() && !overwrite {
        let what = match read_info(out) {
            Ok(i) => format!(
                " ({}, step {} of {})",
                i.model.scheme, i.step, i.train.steps
            ),
            Err(_) => String::new(),
        };
        return Err(Error::Conflict(format!(
            "{} already holds a checkpoint{what}; --resume continues it, --force replaces it",
            out.display()
        )));
    }
    Ok(())
}

/// Everything a training run starts from.
struct Start {
    model: Lm,
    info: CheckpointInfo,
    state: TrainState,
    optim: burn::optim::ModuleOptimizer,
}

/// The model, checkpoint info, state and optimiser to start from: the checkpoint's on resume,
/// fresh ones (weights from `init` for a fine-tune) otherwise. Checks everything first.
fn start(run: &TrainRun, device: &Device, corpus_digest: &str) -> Result<Start> {
    if run.resume {
        let info = read_info(&run.out)?;
        check_resume(run, &info)?;
        if let Some(d) = info
            .corpus_digest
            .as_deref()
            .filter(|d| *d != corpus_digest)
        {
            return Err(Error::Conflict(format!(
                "{} was trained on another text ({d}); the corpus {} is {corpus_digest}",
                run.out.display(),
                run.corpus.display()
            )));
        }
        let mut start = continue_from(&run.out, &run.train, device)?;
        // the run's steps may extend the training; everything else is the checkpoint's
        start.info.train.steps = run.train.steps;
        return Ok(start);
    }
    check_target(&run.out, run.overwrite)?;
    let mut model = Lm::new(&run.model, run.train.seed, device)?;
    let mut info = CheckpointInfo::new(
        run.model.clone(),
        run.train.clone(),
        model.num_params(),
        run.dtype,
    );
    info.corpus_digest = Some(corpus_digest.to_string());
    if let Some(init) = &run.init {
        let from = read_info(init)?;
        let mut expected = run.model.clone();
        expected.train_len = from.model.train_len;
        expected.rope_scaling = from.model.rope_scaling;
        expected.max_positions = from.model.max_positions;
        if expected != from.model {
            return Err(Error::Conflict(format!(
                "--init {}: its model ({}) differs from the one asked for ({}): {}",
                init.display(),
                from.model,
                run.model,
                differences(&expected, &from.model).join(", ")
            )));
        }
        let (loaded, digest) = checkpoint::load_into(model, init)?;
        model = loaded;
        info.init_from = Some(init.display().to_string());
        info.init_digest = Some(digest);
    }
    if run.snapshot_every > 0 {
        if let Some(start) = from_snapshot(run, &info, device) {
            return Ok(start);
        }
    }
    Ok(Start {
        model,
        info,
        state: TrainState::default(),
        optim: optimizer(&run.train),
    })
}

/// The model, state and optimiser of the checkpoint in `dir`, to continue its training with
/// `train`'s optimiser settings.
///
/// # Errors
/// An unreadable checkpoint, or one without optimizer state.
fn continue_from(dir: &Path, train: &TrainConfig, device: &Device) -> Result<Start> {
    let mut state = checkpoint::read_state(dir)?;
    let (model, info) = checkpoint::load(dir, device, Some(&state.param_ids))?;
    let path = dir.join(checkpoint::OPTIMIZER_FILE);
    if !path.is_file() {
        return Err(Error::Io(format!(
            "{}: no optimizer state, so it cannot be resumed (start a fine-tune from it with --init)",
            path.display()
        )));
    }
    let optim = optimizer(train)
        .load(&path)
        .map_err(|e| format_error(&path, format!("{e:?}")))?;
    state.losses.truncate(info.step);
    Ok(Start {
        model,
        info,
        state,
        optim,
    })
}

/// The run's own snapshot, when it holds an earlier state of the run that would start as
/// `fresh` ([`snapshot::why_not_continued`]); `None` (with a line on standard error saying
/// why, when there is a snapshot) otherwise: a snapshot is a cache, never a reason to fail.
fn from_snapshot(run: &TrainRun, fresh: &CheckpointInfo, device: &Device) -> Option<Start> {
    let dir = snapshot_dir(&run.out);
    checkpoint::recover(&dir).ok()?;
    if !dir.exists() {
        return None;
    }
    let not_used = |why: String| {
        log_line(&format!(
            "  not continuing from {}: {why}; starting at step 0",
            dir.display()
        ));
    };
    let found = match read_info(&dir) {
        Ok(found) => found,
        Err(e) => {
            not_used(e.to_string());
            return None;
        }
    };
    if let Some(why) = snapshot::why_not_continued(&found, fresh) {
        not_used(why);
        return None;
    }
    match continue_from(&dir, &run.train, device) {
        Ok(mut start) => {
            log_line(&format!(
                "  {}: continuing from its snapshot at step {} of {}",
                run.out.display(),
                start.info.step,
                start.info.train.steps
            ));
            // the snapshot's weights are f32; the checkpoint is written as the run asks
            start.info.dtype = fresh.dtype;
            start.info.init_from.clone_from(&fresh.init_from);
            Some(start)
        }
        Err(e) => {
            not_used(e.to_string());
            None
        }
    }
}

/// Trains (or resumes, or fine-tunes) and writes the checkpoint (at the end, and every
/// `save_every` steps); returns its info and loss curve. The checkpoint folder is locked
/// ([`FolderLock`]) from before any work until the last save: a second writer of it is refused
/// at once.
///
/// # Errors
/// Everything that can be checked is checked before the first step: bad configuration, an
/// output folder that cannot be written, is written by another process ([`Error::Conflict`])
/// or holds a checkpoint (unless `overwrite`), a resume that contradicts its checkpoint or
/// would rewind it, an unreadable corpus or checkpoint. Then a non-finite loss or weights
/// ([`Error::NonFinite`]: nothing is saved) or a failed write.
pub fn train(run: &TrainRun) -> Result<(CheckpointInfo, TrainState)> {
    train_holding(run, None)
}

/// [`train`], into a folder whose exclusive lock `held` the caller holds already (a sweep takes
/// the locks of everything it writes before its first item), or takes itself (`None`).
pub(crate) fn train_holding(
    run: &TrainRun,
    held: Option<&FolderLock>,
) -> Result<(CheckpointInfo, TrainState)> {
    if !run.resume {
        run.model.validate()?;
        run.train.validate_for(&run.model)?;
    } else {
        run.train.validate()?;
    }
    ensure_dir_writable(&run.out)?;
    // held until the last save; a second writer of `out` is refused here, before any work
    let _own = match held {
        Some(lock) => {
            debug_assert_eq!(lock.target(), run.out, "the lock of another folder");
            None
        }
        None => Some(FolderLock::exclusive(&run.out)?),
    };
    let device = run.device.clone().autodiff();
    let text = read_split(&run.corpus, "train")?;
    let corpus_digest = digest(&text);
    let Start {
        mut model,
        mut info,
        mut state,
        mut optim,
    } = start(run, &device, &corpus_digest)?;
    info.corpus_digest = Some(corpus_digest);
    let c = info.model.clone();
    let tc = info.train.clone();
    tc.validate_for(&c)?;
    let ctx = PositionContext::new(&c, c.train_len, c.rope_scaling, &device)?;
    let ops = Ops::new(run.kernels, &device);
    let validation = if tc.valid_every > 0 {
        let text = read_split(&run.corpus, "valid")?;
        let ctx = PositionContext::new(&c, c.train_len, c.rope_scaling, &run.device)?;
        let starts = window_starts(text.len(), c.train_len, c.train_len, Some(tc.valid_bytes));
        if starts.is_empty() {
            return Err(invalid(
                "valid_bytes",
                tc.valid_bytes,
                format!(
                    "more than train_len {} (one window of {} bytes) and a validation split that long ({} bytes)",
                    c.train_len,
                    c.train_len + 1,
                    text.len()
                ),
            ));
        }
        Some((text, starts, ctx))
    } else {
        None
    };
    let start = info.step;
    let end = run
        .stop_after
        .map_or(tc.steps, |n| start.saturating_add(n).min(tc.steps));
    if end == start {
        return Ok((info, state));
    }
    let bar = progress_bar(
        run.progress,
        (end - start) as u64,
        format!("train {}", c.scheme),
        "",
    );
    let tokens_per_step = (tc.batch * c.train_len) as f64;
    let seconds_before = info.train_seconds;
    let began = Instant::now();
    let mut last = Instant::now();
    let mut after_first: Option<Instant> = None;
    for step in start..end {
        let (x, y) = train_batch(&text, tc.batch, c.train_len, tc.seed, step as u64)?;
        let shape = [tc.batch, c.train_len];
        let step_ctx = ctx.for_step(&c, tc.batch, tc.seed, step as u64)?;
        let loss = model.loss(
            &c,
            &step_ctx,
            ops,
            int_tensor(x, shape, &device),
            int_tensor(y, shape, &device),
        )?;
        let value = f64::from(crate::lm::model::to_vec(loss.clone())[0]);
        if !value.is_finite() {
            bar.abandon();
            return Err(Error::NonFinite(format!(
                "training diverged: loss is {value} at step {step} (scheme {}, lr {:.2e}); nothing was saved from this run; lower --lr or raise --warmup",
                c.scheme,
                tc.lr_at(step)
            )));
        }
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(tc.lr_at(step), model, grads);
        state.losses.push(value);
        let now = Instant::now();
        after_first.get_or_insert(now);
        let rate = tokens_per_step / now.duration_since(last).as_secs_f64();
        last = now;
        bar.set_message(format!("loss {value:.3} | {rate:.0} tok/s"));
        bar.inc(1);
        if run.log_every > 0 && ((step + 1) % run.log_every == 0 || step + 1 == end) {
            let msg = format!(
                "{} step {}: train loss {value:.4} nats/byte, lr {:.2e}, {rate:.0} tokens/s",
                run.out.display(),
                step + 1,
                tc.lr_at(step)
            );
            if run.progress {
                bar.println(msg);
            } else {
                log_line(&msg);
            }
        }
        let done = step + 1;
        if let Some((text, starts, vctx)) = &validation {
            if done % tc.valid_every == 0 || done == tc.steps {
                let loss = validation_loss(&model.valid(), &c, vctx, ops, text, starts)?;
                state.valid.push(ValidLoss { step: done, loss });
                let msg = format!(
                    "{} step {done}: validation loss {loss:.4} nats/byte",
                    run.out.display()
                );
                if run.progress {
                    bar.println(msg);
                } else if run.log_every > 0 {
                    log_line(&msg);
                }
            }
        }
        let save = done == end || (run.save_every > 0 && done % run.save_every == 0);
        let snap = done < tc.steps && run.snapshot_every > 0 && done % run.snapshot_every == 0;
        if save || snap {
            info.step = done;
            info.train_seconds = seconds_before + began.elapsed().as_secs_f64();
            if let Some(t) = after_first.filter(|_| done > start + 1) {
                info.tokens_per_second =
                    Some(tokens_per_step * (done - start - 1) as f64 / t.elapsed().as_secs_f64());
            }
            let tail = &state.losses[state.losses.len().saturating_sub(20)..];
            info.final_train_loss =
                (!tail.is_empty()).then(|| tail.iter().sum::<f64>() / tail.len() as f64);
        }
        if snap {
            // the exact state: f32 weights, whatever the checkpoint's precision
            let mut exact = CheckpointInfo {
                dtype: WeightDtype::F32,
                ..info.clone()
            };
            let dir = snapshot_dir(&run.out);
            if let Err(e) = checkpoint::save(&dir, &model, Some(&optim), &mut exact, &mut state) {
                bar.abandon();
                return Err(e.context(format!("saving {} at step {done}", dir.display())));
            }
        }
        if save {
            if let Err(e) = checkpoint::save(&run.out, &model, Some(&optim), &mut info, &mut state)
            {
                bar.abandon();
                return Err(e.context(format!("saving {} at step {done}", run.out.display())));
            }
        }
    }
    bar.finish_and_clear();
    if run.snapshot_every > 0 && info.step == tc.steps {
        snapshot::remove(&run.out)?;
    }
    Ok((info, state))
}

/// The mean loss, nats per byte, of `model` on the windows of `text` starting at `starts`
/// (each `train_len + 1` bytes: inputs and next bytes), scored in batches of 32.
///
/// # Errors
/// A non-finite loss.
pub fn validation_loss(
    model: &Lm,
    c: &ModelConfig,
    ctx: &PositionContext,
    ops: Ops,
    text: &[u8],
    starts: &[usize],
) -> Result<f64> {
    let l = c.train_len;
    let mut total = 0.0f64;
    for chunk in starts.chunks(32) {
        total += window_nll(model, c, ctx, ops, text, chunk, l)?
            .iter()
            .map(|&v| f64::from(v))
            .sum::<f64>();
    }
    let mean = total / (starts.len() * l) as f64;
    if !mean.is_finite() {
        return Err(Error::NonFinite(format!("validation loss is {mean}")));
    }
    Ok(mean)
}

fn optimizer(tc: &TrainConfig) -> burn::optim::ModuleOptimizer {
    AdamWConfig::new()
        .with_beta_2(0.95)
        .with_epsilon(1e-8)
        .with_weight_decay(tc.weight_decay)
        .with_grad_clipping(Some(GradientClippingConfig::Norm(tc.grad_clip)))
        .init()
}
