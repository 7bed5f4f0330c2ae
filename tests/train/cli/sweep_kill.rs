//! `posenc sweep` killed in the middle of a training (the end of a sitting): run again, the
//! item continues from the training's snapshot and writes the weights an uninterrupted sweep
//! writes, bit for bit.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use super::succeeded;
use crate::support::cli::{command, posenc};
use crate::support::model::corpus;

/// A one-model sweep into `dir` whose training (2,000 steps of a tiny model) keeps a snapshot
/// every 100 steps.
fn config(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("config.json");
    let json = format!(
        r#"{{
  "model": {{"layers": 1, "d_model": 16, "heads": 2, "d_ff": 32, "train_len": 16,
            "max_positions": 16}},
  "train": {{"batch": 2, "steps": 2000, "warmup": 1, "valid_every": 1000, "valid_bytes": 64}},
  "schemes": ["nope"],
  "eval": {{"lengths": [16, 32], "max_bytes": 256, "sliding_max_bytes": 64}},
  "finetune": {{"kinds": ["yarn"], "factors": [2], "controls": [], "seeds": [0]}},
  "budget_control": {{"seeds": [0]}},
  "seeds": [0],
  "checkpoints": "{0}/checkpoints",
  "results": "{0}/results/ppl.csv",
  "dtype": "f16"
}}"#,
        dir.display()
    );
    std::fs::write(&path, json).unwrap();
    path
}

fn sweep_args<'a>(config: &'a Path, corpus: &'a Path) -> Vec<&'a str> {
    vec![
        "sweep",
        "--config",
        config.to_str().unwrap(),
        "--corpus",
        corpus.to_str().unwrap(),
        "--only",
        "nope/seed0",
        "--quiet",
    ]
}

#[test]
fn a_sweep_killed_mid_training_continues_from_the_snapshot_to_the_same_weights() {
    let tmp = corpus();
    let corpus = tmp.path();
    let killed = corpus.join("killed");
    let killed_config = config(&killed);
    let mut child = command()
        .args(sweep_args(&killed_config, corpus))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // SIGKILL once a snapshot exists, wherever the training is in its next one
    let snapshot = killed.join("checkpoints/.nope.snapshot");
    let began = Instant::now();
    while !snapshot.join("config.json").exists() {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "no snapshot after 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(50));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !killed.join("checkpoints/nope/config.json").exists(),
        "the training finished before the kill"
    );

    let again = posenc(&sweep_args(&killed_config, corpus));
    succeeded(&again);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        said.contains("continuing from its snapshot at step"),
        "{said}"
    );
    assert!(!snapshot.exists(), "the snapshot is left behind");

    let straight = corpus.join("straight");
    succeeded(&posenc(&sweep_args(&config(&straight), corpus)));
    let weights =
        |dir: &Path| std::fs::read(dir.join("checkpoints/nope/model.safetensors")).unwrap();
    assert!(weights(&killed) == weights(&straight), "other weights");
    let table = |dir: &Path| std::fs::read_to_string(dir.join("results/ppl.csv")).unwrap();
    assert_eq!(table(&killed), table(&straight));
}
