//! The sweep: every scheme trained with the same data order, steps and model size; every
//! checkpoint evaluated at every length; RoPE also with PI / NTK / dynamic NTK / YaRN / Llama3
//! at inference, and fine-tuned at every length factor with PI and with YaRN beside the
//! equal-extra-bytes controls (`plan.rs` names them, `crate::lm::config::SweepFinetune` states
//! the budget rule); some schemes trained again with more bytes (the budget control). Results
//! go to one CSV (rewritten after each model, so a partial sweep leaves partial results), and a
//! finished checkpoint is reused rather than retrained when everything it was trained from is
//! the same: model, training, precision, the training text (its digest) and, for a fine-tune,
//! the weights it started from (their digest).
//!
//! The configuration is checked whole before any training: unknown keys, out-of-range values,
//! lengths no window fits, output folders that cannot be written. Its default folders are under
//! `target/sweep/`: the sweep writes under `data/` only when its configuration says so
//! (`data/configs/sweep.json`, the shipped results).
//!
//! A run locks everything it writes before its first item (`locks.rs`): a second run that
//! would write the same checkpoints or items is refused at once, and shards (disjoint items)
//! run side by side into one folder, their merges of the tables one at a time.
//!
//! The plan (items, `--only`, `--shard`) is in `plan.rs`, what each item costs (`--plan`) in
//! `cost.rs` and what is finished and left in `progress.rs`, where each item writes in
//! `store.rs`, the reuse policy in `reuse.rs`, one item's training and evaluation in `item.rs`,
//! the locks in `locks.rs`, the worker threads in `queue.rs`; this module checks everything
//! and runs them.

mod cost;
mod item;
mod locks;
mod plan;
mod progress;
mod queue;
mod reuse;
mod store;

use std::path::Path;
use std::time::Instant;

use burn::tensor::Device;

use crate::error::{invalid, Result};
use crate::io::{digest, ensure_dir_writable, ensure_writable};
pub use crate::lm::config::{
    FinetuneControl, SweepBudget, SweepConfig, SweepEval, SweepFinetune, SWEEP_RAMP,
};
use crate::lm::data::{read_split, window_starts, TargetRegion};
use crate::lm::eval::{Mode, ResultRow};
use crate::lm::model::Scheme;
use crate::lm::train::log_line;
pub use crate::results::CurveRow;
pub use cost::{plan_text, ItemCost};
use item::{print_rows, run_item};
use locks::SweepLocks;
pub use plan::{Item, Selection};
pub use progress::Progress;
use queue::run_queue;
use store::merge_outputs;
pub use store::SweepTiming;

/// Runs the chosen items of the sweep with `jobs` items at a time (each item trains or
/// evaluates one model; items that use another model's checkpoint wait for it). Each finished item
/// writes its rows, windows and training curve to its own files next to the results CSV
/// (`items/`, `windows/`, `curves/`), and the results CSV and `curves.csv` are then rebuilt
/// from every item file there, so an interrupted sweep resumes where it stopped and shards run
/// on several machines merge by copying their files into one folder. Returns the combined rows.
///
/// # Errors
/// Before any work: a bad configuration or selection, an output that cannot be written, a
/// checkpoint or item that another process writes ([`crate::Error::Conflict`]). Then the first
/// training or evaluation error, with the item.
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
    check_outputs_and_lengths(config, corpus)?;
    let corpus_digest = digest(&read_split(corpus, "train")?);
    // held to the end: another run that would write what this one writes is refused here
    let locks = SweepLocks::take(config, &items, &chosen, &corpus_digest)?;
    let began = Instant::now();
    let jobs = jobs.clamp(1, chosen.len().max(1));
    let progress = progress && jobs == 1;
    run_queue(
        &items,
        &chosen,
        jobs,
        |item| {
            run_item(
                config,
                item,
                corpus,
                &corpus_digest,
                device,
                progress,
                &locks,
            )
        },
        |item, rows| {
            print_rows(&item.name(), &rows);
            merge_outputs(config, &items).map(|_| ())
        },
    )?;
    let rows = merge_outputs(config, &items)?;
    log_line(&format!(
        "sweep done in {:.1} min: {}",
        began.elapsed().as_secs_f64() / 60.0,
        config.results.display()
    ));
    Ok(rows)
}

/// Checks, before any work, that every output folder can be written and that a window of the
/// longest length fits the evaluation split in every mode.
///
/// # Errors
/// The first folder that cannot be written, or `eval.lengths` naming the longest that fits.
fn check_outputs_and_lengths(config: &SweepConfig, corpus: &Path) -> Result<()> {
    ensure_dir_writable(&config.checkpoints.join(Scheme::Rope.name()))?;
    if config.seeds.len() > 1 {
        ensure_dir_writable(&config.seed_checkpoints)?;
    }
    ensure_writable(&config.results)?;
    for dir in ["items", "windows", "curves", "per_position"] {
        ensure_dir_writable(&config.results_dir().join(dir))?;
    }
    let eval = &config.eval;
    let eval_text = read_split(corpus, &eval.split)?;
    let longest = eval.lengths.iter().copied().max().unwrap_or(1);
    for &mode in &eval.modes {
        let budget = eval.budget(mode);
        if mode == Mode::Matched {
            TargetRegion::new(eval_text.len(), longest, eval.segment_bytes, budget)
                .map_err(|e| e.context(format!("eval on the {} split", eval.split)))?;
        } else if window_starts(eval_text.len(), longest, longest, budget).is_empty() {
            return Err(invalid(
                "eval.lengths",
                longest,
                format!(
                    "at most {} for the {} split ({} bytes)",
                    budget
                        .map_or(eval_text.len(), |b| b.min(eval_text.len()))
                        .saturating_sub(1),
                    eval.split,
                    eval_text.len()
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_writes_nowhere_under_data() {
        let c = SweepConfig::default();
        assert!(!c.checkpoints.starts_with("data"), "{:?}", c.checkpoints);
        assert!(!c.results.starts_with("data"), "{:?}", c.results);
        assert!(!c.seed_checkpoints.starts_with("data"));
        c.validate().unwrap();
        // the shipped configuration (the sweep of record) writes every checkpoint it keeps
        // and its results under data/sweep/ (committed item by item, the table it replaces
        // untouched until it is whole) and is the default apart from its folders
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/configs/sweep.json");
        let shipped = SweepConfig::read(&path).unwrap();
        assert_eq!(shipped.checkpoints, Path::new("data/sweep/checkpoints"));
        assert_eq!(
            shipped.seed_checkpoints,
            Path::new("data/sweep/seed-checkpoints")
        );
        assert_eq!(
            shipped.results,
            Path::new("data/sweep/results/ppl_vs_length.csv")
        );
        assert_eq!(
            SweepConfig {
                checkpoints: c.checkpoints.clone(),
                seed_checkpoints: c.seed_checkpoints.clone(),
                results: c.results.clone(),
                ..shipped
            },
            c,
            "data/configs/sweep.json is the default apart from its folders"
        );
        // and it is written out whole: every key, as `posenc sweep --print-config` prints it
        let text = std::fs::read_to_string(&path).unwrap();
        let printed = serde_json::to_string_pretty(&SweepConfig::read(&path).unwrap()).unwrap();
        assert_eq!(
            text.trim_end(),
            printed,
            "data/configs/sweep.json is not printed whole"
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
            (r#"{"finetune": {"factor": 2}}"#, "factor"),
            (r#"{"budget_control": {"multiples": 2}}"#, "multiples"),
            (r#"{"rope_bounds": {"beta": 2}}"#, "beta"),
            (r#"{"rerope_windw": 8}"#, "rerope_windw"),
            (r#"{"rope_inference": ["rerope+logn"]}"#, "leaky-rerope"),
        ] {
            let e = serde_json::from_str::<SweepConfig>(json).unwrap_err();
            assert!(e.to_string().contains(key), "{json}: {e}");
        }
        let bad = |json: &str| {
            let c: SweepConfig = serde_json::from_str(json).unwrap();
            c.validate().unwrap_err().to_string()
        };
        assert!(bad(r#"{"eval": {"lengths": [0]}}"#).contains("lengths"));
        assert!(bad(r#"{"eval": {"lengths": [200000]}}"#).contains("65536"));
        assert!(bad(r#"{"train": {"batch": 0}}"#).contains("invalid batch = 0"));
        assert!(bad(r#"{"train": {"lr": -1}}"#).contains("invalid lr = -1"));
        assert!(bad(r#"{"eval": {"max_bytes": 100}}"#).contains("max_bytes"));
        assert!(bad(r#"{"eval": {"matched_max_bytes": 100}}"#).contains("matched_max_bytes"));
        assert!(bad(r#"{"eval": {"segment_bytes": 0}}"#).contains("invalid eval.segment_bytes = 0"));
        assert!(bad(r#"{"eval": {"modes": []}}"#).contains("matched, nonoverlap and sliding"));
        assert!(bad(r#"{"finetune": {"factors": [1000]}}"#).contains("finetune factor"));
        assert!(bad(r#"{"rerope_window": 0}"#).contains("invalid rerope_window = 0"));
        assert!(bad(r#"{"rerope_window": 128}"#).contains("below the training length"));
        assert!(bad(r#"{"rerope_leak": 0.5}"#).contains("invalid rerope_leak = 0.5"));
        assert!(bad(r#"{"rope_inference": ["log-n", "log-n"]}"#).contains("rope_inference"));
        assert!(bad(r#"{"self_extend_group": 0}"#).contains("invalid self_extend_group = 0"));
        assert!(
            bad(r#"{"rope_inference": ["self-extend"], "self_extend_window": 200}"#)
                .contains("invalid self_extend_window = 200")
        );
        // a window the items do not apply is not held to the training length
        let unused: SweepConfig =
            serde_json::from_str(r#"{"rope_inference": ["ntk"], "self_extend_window": 200}"#)
                .unwrap();
        unused.validate().unwrap();
    }
}
