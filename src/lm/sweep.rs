//! The sweep: every scheme trained with the same data order, steps and model size; every
//! checkpoint evaluated at every length; RoPE also with PI / NTK / dynamic NTK / YaRN / Llama3
//! at inference and fine-tuned briefly at a longer length with PI and with YaRN. Results go
//! to one CSV (rewritten after each model, so a partial sweep leaves partial results), and a
//! finished checkpoint is reused rather than retrained when everything it was trained from is
//! the same: model, training, precision, the training text (its digest) and, for a fine-tune,
//! the weights it started from (their digest).
//!
//! The configuration is checked whole before any training: unknown keys, out-of-range values,
//! lengths no window fits, output folders that cannot be written. Its default folders are under
//! `target/sweep/`: the sweep writes under `data/` only when its configuration says so
//! (`data/configs/sweep.json`, the shipped results).

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use burn::tensor::Device;
use serde::{Deserialize, Serialize};

use crate::error::{ensure, invalid, Error, Result};
use crate::io::csv::{csv_bytes, read_csv};
use crate::lm::checkpoint::{
    digest, ensure_dir_writable, ensure_writable, file_digest, read_json, read_state, to_json,
    write_atomic, WEIGHTS_FILE,
};
pub use crate::lm::config::{SweepConfig, SweepEval, SweepFinetune};
use crate::lm::data::{read_split, window_starts};
use crate::lm::eval::{
    evaluate_windows, write_csv, EvalOptions, InferenceScaling, Mode, ResultRow, ScalingKind,
    WindowRow,
};
use crate::lm::model::{Kernels, ModelConfig, Scheme};
use crate::lm::train::{
    load_model, log_line, read_info, train, CheckpointInfo, TrainConfig, TrainRun,
};
pub use crate::results::CurveRow;

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
                max_bytes: match mode {
                    Mode::Nonoverlap => self.max_bytes,
                    Mode::Sliding => self.sliding_max_bytes,
                },
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

/// Timing of one sweep item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepTiming {
    /// The item's name ([`SweepConfig::items`]).
    pub name: String,
    /// Training seconds (0 if reused).
    pub train_seconds: f64,
    /// Evaluation seconds.
    pub eval_seconds: f64,
}

/// One unit of work of the sweep, for one training seed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Item {
    /// Train (or reuse) a scheme and evaluate it.
    Base(Scheme, u64),
    /// Evaluate the RoPE checkpoint with a scaling applied at inference.
    Inference(ScalingKind, u64),
    /// Fine-tune the RoPE checkpoint at a longer length with a scaling, and evaluate it with
    /// its training factor and with the factor that matches each length.
    Finetune(ScalingKind, u64),
}

impl Item {
    /// `scheme/seedK`, `rope/KIND/seedK` or `rope-ft-KIND/seedK`: what `--list` prints and
    /// `--only` takes.
    pub fn name(&self) -> String {
        match self {
            Item::Base(s, seed) => format!("{}/seed{seed}", s.name()),
            Item::Inference(k, seed) => format!("rope/{}/seed{seed}", k.name()),
            Item::Finetune(k, seed) => format!("rope-ft-{}/seed{seed}", k.name()),
        }
    }

    /// The item's name as a file stem (`/` replaced by `-`).
    fn stem(&self) -> String {
        self.name().replace('/', "-")
    }

    /// The training seed.
    fn seed(&self) -> u64 {
        match *self {
            Item::Base(_, seed) | Item::Inference(_, seed) | Item::Finetune(_, seed) => seed,
        }
    }

    /// Whether the item reads the RoPE checkpoint of its seed.
    fn needs_rope(&self) -> bool {
        !matches!(self, Item::Base(..))
    }
}

/// Which items of the sweep to run: all, those named (`--only`), or a share (`--shard I/N`,
/// 0-based): the items form groups (a seed's RoPE model with the items that use its
/// checkpoint; every other model alone), and shard `I` takes groups `I, I + N, ...`, so no
/// shard needs another's checkpoint. The results of every item done so far, by any run, are
/// merged into one CSV.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Selection {
    /// Item names ([`Item::name`]); empty for all.
    pub only: Vec<String>,
    /// `(i, n)`: groups `i, i + n, i + 2n, ...` of the list.
    pub shard: Option<(usize, usize)>,
}

impl Selection {
    /// The chosen items' indices in `items`.
    ///
    /// # Errors
    /// A name that is not an item, or a shard `i/n` with `n = 0` or `i >= n`.
    fn choose(&self, items: &[Item]) -> Result<Vec<usize>> {
        let names: Vec<String> = items.iter().map(Item::name).collect();
        for want in &self.only {
            if !names.contains(want) {
                return Err(invalid(
                    "--only",
                    want,
                    "an item of `posenc sweep --list` (for example nope/seed0)",
                ));
            }
        }
        if let Some((i, n)) = self.shard {
            ensure(
                n >= 1 && i < n,
                "--shard",
                format!("{i}/{n}"),
                "I/N with 0 <= I < N",
            )?;
        }
        // group of each item: a new group starts at every base model
        let mut group = Vec::with_capacity(items.len());
        let mut g = 0usize;
        for (k, item) in items.iter().enumerate() {
            if k > 0 && matches!(item, Item::Base(..)) {
                g += 1;
            }
            group.push(g);
        }
        Ok((0..items.len())
            .filter(|&k| self.only.is_empty() || self.only.contains(&names[k]))
            .filter(|&k| self.shard.is_none_or(|(i, n)| group[k] % n == i))
            .collect())
    }
}

impl SweepConfig {
    /// Every item of the sweep, in the order they run and the results list them: for each
    /// seed, RoPE, the items that use its checkpoint (scalings at inference, fine-tunes), then
    /// the other schemes. A run interrupted after a seed's RoPE model and before its
    /// dependants then loses little even where that checkpoint is not kept (seeds after the
    /// first): resuming retrains it before the items that need it.
    pub fn items(&self) -> Vec<Item> {
        let mut items = Vec::new();
        for &seed in &self.seeds {
            if self.schemes.contains(&Scheme::Rope) {
                items.push(Item::Base(Scheme::Rope, seed));
                items.extend(
                    self.rope_inference
                        .iter()
                        .map(|&k| Item::Inference(k, seed)),
                );
            }
            items.extend(self.finetune.kinds.iter().map(|&k| Item::Finetune(k, seed)));
            items.extend(
                self.schemes
                    .iter()
                    .filter(|&&s| s != Scheme::Rope)
                    .map(|&s| Item::Base(s, seed)),
            );
        }
        items
    }

    /// The checkpoint folder of a model named `name` (a scheme, or `rope-ft-KIND`) trained
    /// with `seed`: under [`SweepConfig::checkpoints`] for the first seed (the shipped ones),
    /// under [`SweepConfig::seed_checkpoints`] as `NAME-seedK` for the others.
    fn checkpoint_dir(&self, name: &str, seed: u64) -> PathBuf {
        if Some(&seed) == self.seeds.first() {
            self.checkpoints.join(name)
        } else {
            self.seed_checkpoints.join(format!("{name}-seed{seed}"))
        }
    }

    /// The folder of the results CSV.
    fn results_dir(&self) -> &Path {
        self.results.parent().unwrap_or(Path::new("."))
    }

    /// A per-item output file: `DIR/STEM.EXT` next to the results CSV.
    fn item_file(&self, dir: &str, item: &Item, ext: &str) -> PathBuf {
        self.results_dir()
            .join(dir)
            .join(format!("{}.{ext}", item.stem()))
    }
}

/// What a finished item records beside its rows: which weights and which evaluation
/// produced them, so that a later run evaluates again only when either changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct ItemRecord {
    /// [`Item::name`].
    item: String,
    /// The digest of the evaluated weights.
    weights_digest: String,
    /// The evaluation settings.
    eval: SweepEval,
    /// The dynamic NTK factor (RoPE scalings at inference).
    dynamic_factor: f64,
    /// Seconds.
    timing: SweepTiming,
}

/// The training curve of a checkpoint from its `state.json`.
fn curve_rows(dir: &Path, info: &CheckpointInfo, variant: &str) -> Result<Vec<CurveRow>> {
    let state = read_state(dir)?;
    let bytes_per_step = info.train.batch * info.model.train_len;
    let mut previous = 0;
    let mut rows = Vec::new();
    for v in &state.valid {
        let losses = state.losses.get(previous..v.step).unwrap_or(&[]);
        let train_loss = losses.iter().sum::<f64>() / losses.len().max(1) as f64;
        rows.push(CurveRow {
            scheme: info.model.scheme,
            variant: variant.to_string(),
            seed: info.train.seed,
            step: v.step,
            bytes: v.step * bytes_per_step,
            train_loss,
            valid_loss: v.loss,
        });
        previous = v.step;
    }
    Ok(rows)
}

/// The rows, windows and curve of one finished item.
struct ItemOutput {
    rows: Vec<ResultRow>,
    windows: Vec<WindowRow>,
    curve: Vec<CurveRow>,
}

/// What the workers share: the queue, whether each seed's RoPE checkpoint is ready, and the
/// first error.
struct Shared {
    queue: Mutex<VecDeque<usize>>,
    rope_ready: (Mutex<BTreeMap<u64, bool>>, Condvar),
    error: Mutex<Option<Error>>,
    /// Serialises the merging of the item files into the combined outputs.
    merge: Mutex<()>,
}

/// Runs the chosen items of the sweep with `jobs` items at a time (each item trains or
/// evaluates one model; items that use a RoPE checkpoint wait for it). Each finished item
/// writes its rows, windows and training curve to its own files next to the results CSV
/// (`items/`, `windows/`, `curves/`), and the results CSV and `curves.csv` are then rebuilt
/// from every item file there, so an interrupted sweep resumes where it stopped and shards run
/// on several machines merge by copying their files into one folder. Returns the combined rows.
///
/// # Errors
/// The first training or evaluation error, with the item.
pub fn sweep(
    config: &SweepConfig,
    selection: &Selection,
    corpus: &Path,
    device: &Device,
    progress: bool,
    jobs: usize,
) -> Result<Vec<ResultRow>> {
    // everything that can fail is checked before the first model trains
    config.validate()?;
    let items = config.items();
    let chosen = selection.choose(&items)?;
    ensure_dir_writable(&config.checkpoints.join(Scheme::Rope.name()))?;
    if config.seeds.len() > 1 {
        ensure_dir_writable(&config.seed_checkpoints)?;
    }
    ensure_writable(&config.results)?;
    for dir in ["items", "windows", "curves", "per_position"] {
        ensure_dir_writable(&config.results_dir().join(dir))?;
    }
    let eval_text = read_split(corpus, &config.eval.split)?;
    let longest = config.eval.lengths.iter().copied().max().unwrap_or(1);
    for &mode in &config.eval.modes {
        let budget = match mode {
            Mode::Nonoverlap => config.eval.max_bytes,
            Mode::Sliding => config.eval.sliding_max_bytes,
        };
        if window_starts(eval_text.len(), longest, longest, budget).is_empty() {
            return Err(invalid(
                "eval.lengths",
                longest,
                format!(
                    "at most {} for the {} split ({} bytes)",
                    budget
                        .map_or(eval_text.len(), |b| b.min(eval_text.len()))
                        .saturating_sub(1),
                    config.eval.split,
                    eval_text.len()
                ),
            ));
        }
    }
    let corpus_digest = digest(&read_split(corpus, "train")?);
    let began = Instant::now();
    // per seed, RoPE first: the items that need its checkpoint can then run beside the others
    let mut order = chosen.clone();
    order.sort_by_key(|&i| {
        (
            items[i].seed(),
            !matches!(items[i], Item::Base(Scheme::Rope, _)),
        )
    });
    // a seed whose RoPE model is not trained by this run is ready (or missing) already
    let ready: BTreeMap<u64, bool> = config
        .seeds
        .iter()
        .filter(|&&seed| {
            !chosen
                .iter()
                .any(|&i| items[i] == Item::Base(Scheme::Rope, seed))
        })
        .map(|&seed| (seed, true))
        .collect();
    let shared = Shared {
        queue: Mutex::new(order.into()),
        rope_ready: (Mutex::new(ready), Condvar::new()),
        error: Mutex::new(None),
        merge: Mutex::new(()),
    };
    let jobs = jobs.clamp(1, chosen.len().max(1));
    let progress = progress && jobs == 1;
    let total = items.len();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let next = lock(&shared.queue).pop_front();
                let Some(i) = next else { break };
                if lock(&shared.error).is_some() {
                    break;
                }
                let item = items[i];
                log_line(&format!("[{}/{total}] {} started", i + 1, item.name()));
                let result = if item.needs_rope() && !wait_for_rope(&shared, item.seed()) {
                    Err(Error::Conflict(
                        "the RoPE checkpoint of its seed failed; its scalings and fine-tunes are skipped"
                            .into(),
                    ))
                } else {
                    run_item(config, item, corpus, &corpus_digest, device, progress)
                };
                if let Item::Base(Scheme::Rope, seed) = item {
                    let (ready, cvar) = &shared.rope_ready;
                    lock(ready).insert(seed, result.is_ok());
                    cvar.notify_all();
                }
                let written = result.and_then(|rows| {
                    print_rows(&item.name(), &rows);
                    let _merging = lock(&shared.merge);
                    merge_outputs(config, &items)
                });
                if let Err(e) = written {
                    log_line(&format!("[{}/{total}] {} failed: {e}", i + 1, item.name()));
                    lock(&shared.error).get_or_insert(e.context(item.name()));
                }
            });
        }
    });
    if let Some(e) = lock(&shared.error).take() {
        return Err(e);
    }
    let rows = merge_outputs(config, &items)?;
    log_line(&format!(
        "sweep done in {:.1} min: {}",
        began.elapsed().as_secs_f64() / 60.0,
        config.results.display()
    ));
    Ok(rows)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Blocks until the RoPE item of `seed` has finished; whether it succeeded.
fn wait_for_rope(shared: &Shared, seed: u64) -> bool {
    let (ready, cvar) = &shared.rope_ready;
    let guard = cvar
        .wait_while(lock(ready), |r| !r.contains_key(&seed))
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    guard.get(&seed).copied().unwrap_or(false)
}

/// Writes one item's files: rows, windows and curve (its record follows them).
fn write_item(config: &SweepConfig, item: &Item, out: &ItemOutput) -> Result<()> {
    write_atomic(
        &config.item_file("windows", item, "csv"),
        &csv_bytes(&out.windows)?,
    )?;
    write_atomic(
        &config.item_file("curves", item, "csv"),
        &csv_bytes(&out.curve)?,
    )?;
    write_csv(&config.item_file("items", item, "csv"), &out.rows)
}

/// Rebuilds the results CSV, `curves.csv` and `sweep.json` from the item files present, in
/// item order; returns the rows. `sweep.json` holds the configuration, the timing of every
/// finished item and their sums: like the tables, a function of the item files alone, so a run
/// that only reuses items writes the same bytes again.
fn merge_outputs(config: &SweepConfig, items: &[Item]) -> Result<Vec<ResultRow>> {
    let mut rows = Vec::new();
    let mut curves: Vec<CurveRow> = Vec::new();
    let mut timings = Vec::new();
    for item in items {
        let Some(record) = read_record(config, item) else {
            continue;
        };
        rows.extend(read_csv::<ResultRow>(
            &config.item_file("items", item, "csv"),
        )?);
        let curve = config.item_file("curves", item, "csv");
        if curve.exists() {
            curves.extend(read_csv::<CurveRow>(&curve)?);
        }
        timings.push(record.timing);
    }
    write_csv(&config.results, &rows)?;
    write_atomic(
        &config.results_dir().join("curves.csv"),
        &csv_bytes(&curves)?,
    )?;
    let (train_seconds, eval_seconds) = timings.iter().fold((0.0, 0.0), |(t, e), x| {
        (t + x.train_seconds, e + x.eval_seconds)
    });
    let summary = serde_json::json!({
        "config": config,
        "items": timings,
        "train_seconds": train_seconds,
        "eval_seconds": eval_seconds,
    });
    let path = config.results.with_file_name("sweep.json");
    write_atomic(&path, to_json(&summary).as_bytes())?;
    Ok(rows)
}

/// The record of a finished item, if its files are all there.
fn read_record(config: &SweepConfig, item: &Item) -> Option<ItemRecord> {
    let record: ItemRecord = read_json(&config.item_file("items", item, "json")).ok()?;
    let complete = ["items", "windows", "curves"]
        .iter()
        .all(|dir| config.item_file(dir, item, "csv").exists());
    (complete && record.item == item.name()).then_some(record)
}

/// Trains (if needed) and evaluates one item, writes its files and returns its rows; an item
/// whose record names the same weights and evaluation is not evaluated again (its rows are
/// read back).
fn run_item(
    config: &SweepConfig,
    item: Item,
    corpus: &Path,
    corpus_digest: &str,
    device: &Device,
    progress: bool,
) -> Result<Vec<ResultRow>> {
    let seed = item.seed();
    let rope_dir = config.checkpoint_dir(Scheme::Rope.name(), seed);
    let train_seed = TrainConfig {
        seed,
        ..config.train.clone()
    };
    let rope_model = ModelConfig {
        scheme: Scheme::Rope,
        ..config.model.clone()
    };
    if item.needs_rope() {
        // normally there from the item before (used whatever `reuse` says: it is this run's);
        // trained here when this item runs alone
        let rope_from = TrainedFrom {
            corpus_digest,
            init: None,
        };
        let usable = read_info(&rope_dir).ok().is_some_and(|info| {
            matches!(
                why_not_reusable(
                    config,
                    &rope_dir,
                    &info,
                    &rope_model,
                    &train_seed,
                    rope_from
                ),
                Ok(None)
            )
        });
        if !usable {
            ensure_trained(
                config,
                &rope_model,
                &train_seed,
                &rope_dir,
                rope_from,
                corpus,
                device,
                progress,
            )
            .map_err(|e| e.context(format!("training rope (seed {seed})")))?;
        }
    }
    let (dir, train_seconds) = match item {
        Item::Base(scheme, _) => {
            let mut model = config.model.clone();
            model.scheme = scheme;
            let dir = config.checkpoint_dir(scheme.name(), seed);
            let t = ensure_trained(
                config,
                &model,
                &train_seed,
                &dir,
                TrainedFrom {
                    corpus_digest,
                    init: None,
                },
                corpus,
                device,
                progress,
            )
            .map_err(|e| e.context(format!("training {scheme} (seed {seed})")))?;
            (dir, t)
        }
        Item::Inference(..) => (rope_dir, 0.0),
        Item::Finetune(kind, _) => {
            let model = config.finetune_model(kind);
            let train_cfg = TrainConfig {
                seed,
                ..config.finetune_train()
            };
            let dir = config.checkpoint_dir(&format!("rope-ft-{}", kind.name()), seed);
            let t = ensure_trained(
                config,
                &model,
                &train_cfg,
                &dir,
                TrainedFrom {
                    corpus_digest,
                    init: Some(&rope_dir),
                },
                corpus,
                device,
                progress,
            )
            .map_err(|e| e.context(format!("fine-tuning {}", item.name())))?;
            (dir, t)
        }
    };
    let weights_digest = file_digest(&dir.join(WEIGHTS_FILE))?;
    if config.reuse {
        if let Some(record) = read_record(config, &item) {
            let same = record.weights_digest == weights_digest
                && record.eval == config.eval
                && record.dynamic_factor == config.dynamic_factor;
            if same && train_seconds == 0.0 {
                log_line(&format!(
                    "  {}: results of these weights reused",
                    item.name()
                ));
                return read_csv(&config.item_file("items", &item, "csv"));
            }
        }
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
    write_atomic(
        &config.item_file("items", &item, "json"),
        to_json(&record).as_bytes(),
    )?;
    Ok(out.rows)
}

/// What a checkpoint is trained from besides its configuration.
#[derive(Clone, Copy)]
struct TrainedFrom<'a> {
    /// The digest of the training text.
    corpus_digest: &'a str,
    /// The checkpoint a fine-tune starts from.
    init: Option<&'a Path>,
}

/// Why the checkpoint `info` cannot stand for a training of `model` with `train_cfg` from
/// `from`, or `None` when it can.
fn why_not_reusable(
    config: &SweepConfig,
    dir: &Path,
    info: &CheckpointInfo,
    model: &ModelConfig,
    train_cfg: &TrainConfig,
    from: TrainedFrom,
) -> Result<Option<String>> {
    if &info.model != model {
        return Ok(Some("another model configuration".into()));
    }
    if &info.train != train_cfg {
        return Ok(Some("another training configuration".into()));
    }
    if info.step != train_cfg.steps {
        return Ok(Some(format!(
            "{} of {} steps done",
            info.step, train_cfg.steps
        )));
    }
    if info.dtype != config.dtype {
        return Ok(Some("another weight precision".into()));
    }
    if info.corpus_digest.as_deref() != Some(from.corpus_digest) {
        return Ok(Some(match &info.corpus_digest {
            None => "no record of the text it was trained on".into(),
            Some(_) => "trained on another text".into(),
        }));
    }
    let weights = file_digest(&dir.join(WEIGHTS_FILE)).ok();
    if weights.is_none()
        || info
            .weights_digest
            .as_ref()
            .is_some_and(|w| Some(w) != weights.as_ref())
    {
        return Ok(Some(format!(
            "its {WEIGHTS_FILE} is missing or not the one its config.json records"
        )));
    }
    if let Some(init) = from.init {
        let base = file_digest(&init.join(WEIGHTS_FILE))?;
        if info.init_digest.as_deref() != Some(base.as_str()) {
            return Ok(Some(format!(
                "fine-tuned from other weights than those now in {}",
                init.display()
            )));
        }
    }
    Ok(None)
}

/// Trains into `dir` unless a finished checkpoint trained from the same everything is there
/// ([`why_not_reusable`]); returns the training seconds (0 when reused).
#[allow(clippy::too_many_arguments)]
fn ensure_trained(
    config: &SweepConfig,
    model: &ModelConfig,
    train_cfg: &TrainConfig,
    dir: &Path,
    from: TrainedFrom,
    corpus: &Path,
    device: &Device,
    progress: bool,
) -> Result<f64> {
    if config.reuse {
        if let Ok(info) = read_info(dir) {
            match why_not_reusable(config, dir, &info, model, train_cfg, from)? {
                None => {
                    log_line(&format!("  reusing {}", dir.display()));
                    return Ok(0.0);
                }
                Some(why) => log_line(&format!("  retraining {}: {why}", dir.display())),
            }
        }
    }
    let t = Instant::now();
    let (info, _) = train(&TrainRun {
        model: model.clone(),
        train: train_cfg.clone(),
        out: dir.to_path_buf(),
        resume: false,
        // the configuration names this folder: its checkpoint is the sweep's to replace
        overwrite: true,
        init: from.init.map(Path::to_path_buf),
        stop_after: None,
        save_every: 0,
        log_every: (train_cfg.steps / 6).max(1),
        progress,
        dtype: config.dtype,
        corpus: corpus.to_path_buf(),
        device: device.clone(),
        kernels: Kernels::default(),
    })?;
    log_line(&format!(
        "  {}: trained {} steps in {:.0} s, final train loss {:.3} nats/byte",
        dir.display(),
        info.step,
        info.train_seconds,
        info.final_train_loss.unwrap_or(f64::NAN)
    ));
    Ok(t.elapsed().as_secs_f64())
}

fn print_rows(name: &str, rows: &[ResultRow]) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_writes_nowhere_under_data() {
        let c = SweepConfig::default();
        assert!(!c.checkpoints.starts_with("data"), "{:?}", c.checkpoints);
        assert!(!c.results.starts_with("data"), "{:?}", c.results);
        c.validate().unwrap();
        // the shipped configuration names data/ itself and is the default apart from that
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/configs/sweep.json");
        let shipped = SweepConfig::read(&path).unwrap();
        assert_eq!(shipped.checkpoints, Path::new("data/checkpoints"));
        assert_eq!(shipped.results, Path::new("data/results/ppl_vs_length.csv"));
        assert_eq!(
            SweepConfig {
                checkpoints: c.checkpoints.clone(),
                results: c.results.clone(),
                ..shipped
            },
            c,
            "data/configs/sweep.json is the default apart from its folders"
        );
    }

    #[test]
    fn mistyped_keys_and_bad_values_are_refused_before_work() {
        for (json, key) in [
            (r#"{"checkpoint": "x"}"#, "checkpoint"),
            (r#"{"result": "x"}"#, "result"),
            (r#"{"train": {"stpes": 3}}"#, "stpes"),
            (r#"{"eval": {"lenghts": [16]}}"#, "lenghts"),
            (r#"{"finetune": {"steps": 2, "lr ": 1}}"#, "lr "),
        ] {
            let e = serde_json::from_str::<SweepConfig>(json).unwrap_err();
            assert!(e.to_string().contains(key), "{json}: {e}");
        }
        let bad = |json: &str| {
            let c: SweepConfig = serde_json::from_str(json).unwrap();
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(r#"{"eval": {"lengths": [0]}}"#).contains("lengths"));
        assert!(bad(r#"{"eval": {"lengths": [200000]}}"#).contains("16384"));
        assert!(bad(r#"{"train": {"batch": 0}}"#).contains("invalid batch = 0"));
        assert!(bad(r#"{"train": {"lr": -1}}"#).contains("invalid lr = -1"));
        assert!(bad(r#"{"eval": {"max_bytes": 100}}"#).contains("max_bytes"));
        assert!(bad(r#"{"finetune": {"factor": 1000}}"#).contains("finetune.factor"));
    }

    #[test]
    fn a_checkpoint_is_reused_only_when_everything_it_was_trained_from_is_the_same() {
        let dir = std::env::temp_dir().join(format!("posenc-reuse-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let base_weights = dir.join(WEIGHTS_FILE);
        std::fs::write(&base_weights, b"base weights").unwrap();
        let own = dir.join("own");
        std::fs::create_dir_all(&own).unwrap();
        std::fs::write(own.join(WEIGHTS_FILE), b"own weights").unwrap();
        let config = SweepConfig::default();
        let model = config.model.clone();
        let train = config.train.clone();
        let mut info = CheckpointInfo::new(model.clone(), train.clone(), 1, config.dtype);
        info.step = train.steps;
        info.corpus_digest = Some(digest(b"corpus"));
        info.init_digest = Some(digest(b"base weights"));
        info.weights_digest = Some(digest(b"own weights"));
        let from = |corpus: &'static str, init: Option<&'static Path>| TrainedFrom {
            corpus_digest: Box::leak(digest(corpus.as_bytes()).into_boxed_str()),
            init,
        };
        let why = |info: &CheckpointInfo, from: TrainedFrom| {
            why_not_reusable(&config, &own, info, &model, &train, from).unwrap()
        };
        assert_eq!(why(&info, from("corpus", None)), None);
        let leaked: &'static Path = Box::leak(dir.clone().into_boxed_path());
        assert_eq!(why(&info, from("corpus", Some(leaked))), None);
        assert!(why(&info, from("another corpus", None))
            .unwrap()
            .contains("another text"));
        std::fs::write(&base_weights, b"retrained base").unwrap();
        assert!(why(&info, from("corpus", Some(leaked)))
            .unwrap()
            .contains("other weights"));
        let mut older = info.clone();
        older.corpus_digest = None;
        assert!(why(&older, from("corpus", None))
            .unwrap()
            .contains("no record"));
        let mut other_save = info.clone();
        other_save.weights_digest = Some(digest(b"other weights"));
        assert!(why(&other_save, from("corpus", None))
            .unwrap()
            .contains("not the one"));
        let mut partial = info.clone();
        partial.step = 5;
        assert!(why(&partial, from("corpus", None))
            .unwrap()
            .contains("5 of"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
