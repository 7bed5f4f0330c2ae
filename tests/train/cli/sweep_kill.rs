//! `posenc sweep` killed in the middle of a training (the end of a sitting): run again, the
//! item continues from the training's snapshot and writes the weights an uninterrupted sweep
//! writes, bit for bit.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use super::{kill_once_exists, succeeded, sweep_args, sweep_config};
use crate::support::cli::{command, posenc};
use crate::support::model::corpus;

#[test]
fn a_sweep_killed_mid_training_continues_from_the_snapshot_to_the_same_weights() {
    let tmp = corpus();
    let corpus = tmp.path();
    // NoPE alone, 2,000 steps: a snapshot every 100
    let only = ["--only", "nope/seed0"];
    let killed = corpus.join("killed");
    let killed_config = sweep_config(&killed, 2000);
    let child = command()
        .args(sweep_args(&killed_config, corpus, &only))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let snapshot = killed.join("checkpoints/.nope.snapshot");
    kill_once_exists(
        child,
        &snapshot.join("config.json"),
        Duration::from_millis(50),
    );
    assert!(
        !killed.join("checkpoints/nope/config.json").exists(),
        "the training finished before the kill"
    );

    let again = command()
        .args(sweep_args(&killed_config, corpus, &only))
        .output()
        .unwrap();
    succeeded(&again);
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(
        said.contains("continuing from its snapshot at step"),
        "{said}"
    );
    assert!(!snapshot.exists(), "the snapshot is left behind");

    let straight = corpus.join("straight");
    let straight_config = sweep_config(&straight, 2000);
    let args = sweep_args(&straight_config, corpus, &only);
    succeeded(&posenc(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    ));
    let weights =
        |dir: &Path| std::fs::read(dir.join("checkpoints/nope/model.safetensors")).unwrap();
    assert!(weights(&killed) == weights(&straight), "other weights");
    let table = |dir: &Path| std::fs::read_to_string(dir.join("results/ppl.csv")).unwrap();
    assert_eq!(table(&killed), table(&straight));
}
