//! Where a sweep writes: the checkpoint folder of each model, and beside the results CSV one
//! set of files per finished item (`items/NAME.csv` and its record `items/NAME.json`,
//! `windows/NAME.csv`, `curves/NAME.csv`, `per_position/`). The results CSV, `curves.csv` and
//! `sweep.json` are rebuilt from the item files present ([`merge_outputs`], one merge at a
//! time), so a resumed or sharded sweep merges by copying item files into one folder.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::Item;
use crate::encodings::rope::RampBounds;
use crate::encodings::temperature::Temperature;
use crate::error::Result;
use crate::io::csv::{csv_bytes, read_csv};
use crate::io::{read_json, write_atomic, write_json, FolderLock};
use crate::lm::checkpoint::read_state;
use crate::lm::config::{SweepConfig, SweepEval};
use crate::lm::eval::{write_csv, ReRopeWindow, ResultRow, SelfExtendWindow, WindowRow};
use crate::lm::model::Scheme;
use crate::lm::train::CheckpointInfo;
use crate::results::CurveRow;

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

impl SweepConfig {
    /// The checkpoint folder of a model named `name` ([`Item::model`]) trained with `seed`:
    /// under [`SweepConfig::checkpoints`] for the first seed (the shipped ones), under
    /// [`SweepConfig::seed_checkpoints`] as `NAME-seedK` for the others.
    pub(super) fn checkpoint_dir(&self, name: &str, seed: u64) -> PathBuf {
        if Some(&seed) == self.seeds.first() {
            self.checkpoints.join(name)
        } else {
            self.seed_checkpoints.join(format!("{name}-seed{seed}"))
        }
    }

    /// The from-scratch checkpoint of `scheme` and `seed`, which the scalings at inference
    /// evaluate (RoPE's) and the fine-tunes start from.
    pub(super) fn base_dir(&self, scheme: Scheme, seed: u64) -> PathBuf {
        self.checkpoint_dir(scheme.name(), seed)
    }

    /// The checkpoint folder `item` evaluates: the one it trains, or for a scaling at
    /// inference its seed's RoPE checkpoint.
    pub(super) fn item_dir(&self, item: &Item) -> PathBuf {
        self.checkpoint_dir(&item.model(), item.seed())
    }

    /// The folder of the results CSV.
    pub(super) fn results_dir(&self) -> &Path {
        self.results.parent().unwrap_or(Path::new("."))
    }

    /// A per-item output file: `DIR/STEM.EXT` next to the results CSV.
    pub(super) fn item_file(&self, dir: &str, item: &Item, ext: &str) -> PathBuf {
        self.results_dir()
            .join(dir)
            .join(format!("{}.{ext}", item.stem()))
    }
}

/// What a finished item records beside its rows: which weights and which evaluation
/// produced them, so that a later run evaluates again only when either changed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ItemRecord {
    /// [`Item::name`].
    pub(super) item: String,
    /// The digest of the evaluated weights.
    pub(super) weights_digest: String,
    /// The evaluation settings.
    pub(super) eval: SweepEval,
    /// The dynamic NTK factor (RoPE scalings at inference).
    pub(super) dynamic_factor: f64,
    /// YaRN's and Llama 3's bounds (RoPE scalings at inference); the references' in records
    /// written before the sweep chose its own.
    #[serde(default)]
    pub(super) rope_bounds: RampBounds,
    /// ReRoPE's window and $k$, for the items that apply them (absent from the others'
    /// records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) rerope: Option<ReRopeWindow>,
    /// Self-Extend's window and group, likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) self_extend: Option<SelfExtendWindow>,
    /// The queries' temperature (log-$n$, floor-log), likewise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) temperature: Option<Temperature>,
    /// Seconds.
    pub(super) timing: SweepTiming,
}

/// The training curve of a checkpoint from its `state.json`.
pub(super) fn curve_rows(
    dir: &Path,
    info: &CheckpointInfo,
    variant: &str,
) -> Result<Vec<CurveRow>> {
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
pub(super) struct ItemOutput {
    pub(super) rows: Vec<ResultRow>,
    pub(super) windows: Vec<WindowRow>,
    pub(super) curve: Vec<CurveRow>,
}

/// Writes one item's files: rows, windows and curve (its record follows them).
pub(super) fn write_item(config: &SweepConfig, item: &Item, out: &ItemOutput) -> Result<()> {
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
/// item order, leaving out items recorded with another evaluation (stale, to be evaluated
/// again); returns the rows. `sweep.json` holds the configuration, the timing of every
/// finished item and their sums: like the tables, a function of the item files alone, so a run
/// that only reuses items writes the same bytes again. One merge at a time, of this process or
/// another (shards of one sweep into one folder): each holds the lock on the results CSV
/// (`.NAME.lock` beside it) from its first read to its last write, and waits for it.
pub(super) fn merge_outputs(config: &SweepConfig, items: &[Item]) -> Result<Vec<ResultRow>> {
    let _merging = FolderLock::wait_exclusive(&config.results)?;
    let mut rows = Vec::new();
    let mut curves: Vec<CurveRow> = Vec::new();
    let mut timings = Vec::new();
    for item in items {
        let Some(record) = finished_record(config, item) else {
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
    write_json(&config.results.with_file_name("sweep.json"), &summary)?;
    Ok(rows)
}

impl ItemRecord {
    /// Whether the record's rows are an evaluation of `item` as `config` evaluates it: the
    /// same evaluation, dynamic NTK factor, RoPE bounds, ReRoPE and Self-Extend windows (the
    /// weights are checked apart).
    pub(super) fn evaluates_as(&self, config: &SweepConfig, item: &Item) -> bool {
        self.eval == config.eval
            && self.dynamic_factor == config.dynamic_factor
            && self.rope_bounds == config.rope_bounds
            && self.rerope == config.item_rope(item).rerope
            && self.self_extend == config.item_rope(item).self_extend
            && self.temperature == config.item_rope(item).temperature
    }
}

/// The record of a finished item, if its files are all there.
pub(super) fn read_record(config: &SweepConfig, item: &Item) -> Option<ItemRecord> {
    let record: ItemRecord = read_json(&config.item_file("items", item, "json")).ok()?;
    let complete = ["items", "windows", "curves"]
        .iter()
        .all(|dir| config.item_file(dir, item, "csv").exists());
    (complete && record.item == item.name()).then_some(record)
}

/// The record of `item` when its rows are in the table: complete ([`read_record`]) and
/// evaluated as `config` evaluates it ([`ItemRecord::evaluates_as`]).
pub(super) fn finished_record(config: &SweepConfig, item: &Item) -> Option<ItemRecord> {
    read_record(config, item).filter(|r| r.evaluates_as(config, item))
}
