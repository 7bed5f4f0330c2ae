//! Training: AdamW with warm-up and cosine decay on random windows of the training split,
//! checkpoints written atomically, exact resume.
//!
//! A checkpoint is a folder:
//! * `config.json`: [`CheckpointInfo`] (model and training configuration, step, parameter
//!   count, dtype) — the model configuration is forced on resume and evaluation;
//! * `model.safetensors`: the weights;
//! * `state.json`: the loss curve and the parameter ids the optimizer state refers to;
//! * `optimizer.bpk`: AdamW's moments (burnpack), only needed to resume.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::grad_clipping::GradientClippingConfig;
use burn::module::Module;
use burn::optim::{AdamWConfig, GradientsParams};
use burn::tensor::Device;
use indicatif::{ProgressBar, ProgressStyle};
use serde::{Deserialize, Serialize};

use crate::data::{read_split, train_batch};
use crate::error::{Error, Result};
use crate::model::checkpoint::{io_error, load_weights, save_weights, write_atomic, WeightDtype};
use crate::model::{int_tensor, Kernels, Lm, ModelConfig, PositionContext};

/// Optimisation hyper-parameters. Defaults: the sweep's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TrainConfig {
    /// Sequences per step; default 32.
    pub batch: usize,
    /// Total optimiser steps; default 600.
    pub steps: usize,
    /// Peak learning rate; default 3e-3.
    pub lr: f64,
    /// Linear warm-up steps; default 50.
    pub warmup: usize,
    /// Final learning rate as a fraction of the peak (cosine decay); default 0.1.
    pub min_lr_ratio: f64,
    /// AdamW weight decay; default 0.01.
    pub weight_decay: f32,
    /// Gradient-norm clipping; default 1.0.
    pub grad_clip: f32,
    /// Seed of the weights and of the data order; default 0.
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            batch: 32,
            steps: 600,
            lr: 3e-3,
            warmup: 50,
            min_lr_ratio: 0.1,
            weight_decay: 0.01,
            grad_clip: 1.0,
            seed: 0,
        }
    }
}

impl TrainConfig {
    /// The learning rate at `step` (0-based): linear warm-up, then cosine to
    /// `min_lr_ratio * lr` at `steps`.
    pub fn lr_at(&self, step: usize) -> f64 {
        if step < self.warmup {
            return self.lr * (step + 1) as f64 / self.warmup as f64;
        }
        let span = (self.steps.saturating_sub(self.warmup)).max(1) as f64;
        let t = ((step - self.warmup) as f64 / span).min(1.0);
        let cos = 0.5 * (1.0 + (std::f64::consts::PI * t).cos());
        self.lr * (self.min_lr_ratio + (1.0 - self.min_lr_ratio) * cos)
    }
}

/// `config.json` of a checkpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckpointInfo {
    /// The model.
    pub model: ModelConfig,
    /// How it was trained.
    pub train: TrainConfig,
    /// Steps done.
    pub step: usize,
    /// Trainable parameters.
    pub params: usize,
    /// Precision of `model.safetensors`.
    pub dtype: WeightDtype,
    /// The checkpoint this one was fine-tuned from, if any.
    pub init_from: Option<String>,
    /// Mean training loss over the last 20 steps, nats per byte.
    pub final_train_loss: Option<f64>,
    /// Wall time of the training so far, seconds.
    pub train_seconds: f64,
    /// Training throughput of the last run, bytes per second (steps after the first).
    #[serde(default)]
    pub tokens_per_second: Option<f64>,
}

/// `state.json` of a checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrainState {
    /// Training loss of every step, nats per byte.
    pub losses: Vec<f64>,
    /// Parameter ids by name (the optimizer state is keyed by them).
    pub param_ids: std::collections::BTreeMap<String, u64>,
}

/// Options of one training run.
#[derive(Debug, Clone)]
pub struct TrainRun {
    /// The model to build (ignored on resume: the checkpoint's is used).
    pub model: ModelConfig,
    /// Optimisation.
    pub train: TrainConfig,
    /// Checkpoint folder.
    pub out: PathBuf,
    /// Continue from the checkpoint in `out`.
    pub resume: bool,
    /// Start from the weights of another checkpoint (fine-tuning).
    pub init: Option<PathBuf>,
    /// Stop after this many steps of this invocation (a checkpoint is written).
    pub stop_after: Option<usize>,
    /// Print a line every this many steps (0: never).
    pub log_every: usize,
    /// Show a progress bar.
    pub progress: bool,
    /// Precision of the written weights.
    pub dtype: WeightDtype,
    /// The corpus folder.
    pub corpus: PathBuf,
    /// The device (autodiff is enabled on it).
    pub device: Device,
    /// Fused or reference kernels (the fused ones only on the Flex CPU backend).
    pub kernels: Kernels,
}

/// Reads `config.json` of a checkpoint folder.
///
/// # Errors
/// A missing or unparsable file.
pub fn read_info(dir: &Path) -> Result<CheckpointInfo> {
    let path = dir.join("config.json");
    let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    serde_json::from_str(&text).map_err(|e| io_error(&path, e))
}

fn read_state(dir: &Path) -> Result<TrainState> {
    let path = dir.join("state.json");
    let text = std::fs::read_to_string(&path).map_err(|e| io_error(&path, e))?;
    serde_json::from_str(&text).map_err(|e| io_error(&path, e))
}

/// Loads a checkpoint's model on `device` (no autodiff unless the device has it).
///
/// # Errors
/// As [`read_info`] and [`load_weights`].
pub fn load_model(dir: &Path, device: &Device) -> Result<(Lm, CheckpointInfo)> {
    let info = read_info(dir)?;
    let model = Lm::new(&info.model, info.train.seed, device)?;
    let model = load_weights(model, &dir.join("model.safetensors"), None)?;
    Ok((model, info))
}

fn save(
    dir: &Path,
    model: &Lm,
    optim: &burn::optim::ModuleOptimizer,
    info: &CheckpointInfo,
    state: &mut TrainState,
) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
    state.param_ids = save_weights(model, &dir.join("model.safetensors"), info.dtype)?;
    let tmp = dir.join(format!(".optimizer.bpk.tmp-{}", std::process::id()));
    optim
        .save(&tmp)
        .map_err(|e| io_error(&tmp, format!("{e:?}")))?;
    std::fs::rename(&tmp, dir.join("optimizer.bpk")).map_err(|e| io_error(dir, e))?;
    write_atomic(&dir.join("state.json"), to_json(state).as_bytes())?;
    write_atomic(&dir.join("config.json"), to_json(info).as_bytes())
}

/// Pretty JSON with a final newline.
pub(crate) fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default() + "\n"
}

/// Trains (or resumes, or fine-tunes) and writes the checkpoint; returns its info and loss
/// curve.
///
/// # Errors
/// Bad configuration, unreadable corpus or checkpoint, a non-finite loss (with the step and a
/// hint), or a failed write.
pub fn train(run: &TrainRun) -> Result<(CheckpointInfo, TrainState)> {
    let device = run.device.clone().autodiff();
    let text = read_split(&run.corpus, "train")?;
    let (mut model, mut info, mut state, mut optim) = if run.resume {
        let info = read_info(&run.out)?;
        let mut state = read_state(&run.out)?;
        let model = Lm::new(&info.model, info.train.seed, &device)?;
        let model = load_weights(
            model,
            &run.out.join("model.safetensors"),
            Some(&state.param_ids),
        )?;
        let optim = optimizer(&run.train)
            .load(run.out.join("optimizer.bpk"))
            .map_err(|e| io_error(&run.out.join("optimizer.bpk"), format!("{e:?}")))?;
        state.losses.truncate(info.step);
        // the run's steps may extend the training; everything else is the checkpoint's
        let mut info = info;
        info.train.steps = run.train.steps;
        (model, info, state, optim)
    } else {
        run.model.validate()?;
        let mut model = Lm::new(&run.model, run.train.seed, &device)?;
        if let Some(init) = &run.init {
            let from = read_info(init)?;
            let mut expected = run.model.clone();
            expected.train_len = from.model.train_len;
            expected.rope_scaling = from.model.rope_scaling;
            expected.max_positions = from.model.max_positions;
            if expected != from.model {
                return Err(Error::Io(format!(
                    "{}: its model ({}) differs from the one asked for ({})",
                    init.display(),
                    from.model,
                    run.model
                )));
            }
            model = load_weights(model, &init.join("model.safetensors"), None)?;
        }
        let info = CheckpointInfo {
            model: run.model.clone(),
            train: run.train.clone(),
            step: 0,
            params: model.num_params(),
            dtype: run.dtype,
            init_from: run.init.as_ref().map(|p| p.display().to_string()),
            final_train_loss: None,
            train_seconds: 0.0,
            tokens_per_second: None,
        };
        (model, info, TrainState::default(), optimizer(&run.train))
    };
    let c = info.model.clone();
    let tc = info.train.clone();
    let ctx =
        PositionContext::new(&c, c.train_len, c.rope_scaling, &device)?.with_kernels(run.kernels);
    let start = info.step;
    let end = run
        .stop_after
        .map_or(tc.steps, |n| (start + n).min(tc.steps));
    let bar = progress_bar(run.progress, (end - start) as u64, &c);
    let tokens_per_step = (tc.batch * c.train_len) as f64;
    let began = Instant::now();
    let mut last = Instant::now();
    let mut after_first: Option<Instant> = None;
    for step in start..end {
        let (x, y) = train_batch(&text, tc.batch, c.train_len, tc.seed, step as u64)?;
        let shape = [tc.batch, c.train_len];
        let loss = model.loss(
            &c,
            &ctx,
            int_tensor(x, shape, &device),
            int_tensor(y, shape, &device),
        );
        let value = f64::from(crate::model::to_vec(loss.clone())[0]);
        if !value.is_finite() {
            bar.abandon();
            return Err(Error::Io(format!(
                "training diverged: loss is {value} at step {step} (scheme {}, lr {:.2e}); lower --lr or raise --warmup",
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
                eprintln!("{msg}");
            }
        }
    }
    bar.finish_and_clear();
    if let Some(t) = after_first.filter(|_| end > start + 1) {
        info.tokens_per_second =
            Some(tokens_per_step * (end - start - 1) as f64 / t.elapsed().as_secs_f64());
    }
    info.step = end;
    info.train_seconds += began.elapsed().as_secs_f64();
    let tail = &state.losses[state.losses.len().saturating_sub(20)..];
    info.final_train_loss =
        (!tail.is_empty()).then(|| tail.iter().sum::<f64>() / tail.len() as f64);
    save(&run.out, &model, &optim, &info, &mut state)?;
    Ok((info, state))
}

fn optimizer(tc: &TrainConfig) -> burn::optim::ModuleOptimizer {
    AdamWConfig::new()
        .with_beta_2(0.95)
        .with_epsilon(1e-8)
        .with_weight_decay(tc.weight_decay)
        .with_grad_clipping(Some(GradientClippingConfig::Norm(tc.grad_clip)))
        .init()
}

fn progress_bar(show: bool, len: u64, c: &ModelConfig) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("train {}", c.scheme));
    bar
}
