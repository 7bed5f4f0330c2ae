//! `posenc sweep`: a bad configuration, and the sweep's items listed, sharded, merged and
//! resumed.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{fails_with, succeeded};
use crate::support::cli::posenc;
use crate::support::model::corpus;

#[test]
fn a_sweep_with_a_bad_config_fails_before_training() {
    let tmp = corpus();
    let corpus = tmp.path();
    let dir = corpus.join("sweep");
    std::fs::create_dir_all(&dir).unwrap();
    let checkpoints = dir.join("checkpoints");
    let config = |json: &str| -> PathBuf {
        let path = dir.join("config.json");
        std::fs::write(&path, json).unwrap();
        path
    };
    let paths = format!(
        r#""checkpoints": "{}", "results": "{}""#,
        checkpoints.display(),
        dir.join("results/r.csv").display()
    );
    for (json, needle) in [
        (
            format!(r#"{{"stpes": 3, {paths}}}"#),
            "unknown field `stpes`",
        ),
        (
            format!(r#"{{"checkpoint": "x", {paths}}}"#),
            "unknown field `checkpoint`",
        ),
        (
            format!(r#"{{"eval": {{"lengths": [0]}}, {paths}}}"#),
            "invalid lengths = 0",
        ),
        (
            format!(r#"{{"train": {{"batch": 0}}, {paths}}}"#),
            "invalid batch = 0",
        ),
    ] {
        let path = config(&json);
        fails_with(
            &[
                "sweep",
                "--config",
                path.to_str().unwrap(),
                "--corpus",
                corpus.to_str().unwrap(),
            ],
            needle,
        );
        assert!(!checkpoints.exists(), "{json}: trained before failing");
    }
}

/// The sweep's items: `--list` names them; two shards run into one folder merge into the
/// same table as one run of everything (evaluation is deterministic); a second run reuses
/// every finished item's results (same weights, same evaluation); `--only` runs one item and
/// rejects a name that is not one; the training curves of every trained model are merged.
#[test]
fn sweep_items_list_shard_merge_and_resume() {
    let tmp = corpus();
    let corpus = tmp.path();
    let config = |dir: &Path| -> PathBuf {
        let path = dir.join("config.json");
        std::fs::create_dir_all(dir).unwrap();
        let json = format!(
            r#"{{
  "model": {{"layers": 1, "d_model": 16, "heads": 2, "d_ff": 32, "train_len": 16,
            "max_positions": 16, "shaw_max_relative": 4, "t5_num_buckets": 8,
            "t5_max_distance": 16, "deberta_bucket_size": 8, "deberta_max_position": 16,
            "fire_hidden": 4, "fire_threshold": 16.0}},
  "train": {{"batch": 2, "steps": 2, "warmup": 1, "valid_every": 1, "valid_bytes": 64}},
  "schemes": ["nope", "rope"],
  "rope_inference": ["dynamic"],
  "eval": {{"lengths": [16, 32], "max_bytes": 512, "sliding_max_bytes": 256}},
  "finetune": {{"kinds": ["yarn"], "steps": 1, "batch": 1}},
  "seeds": [3, 4],
  "checkpoints": "{0}/checkpoints",
  "seed_checkpoints": "{0}/seed-checkpoints",
  "results": "{0}/results/ppl.csv",
  "dtype": "f32"
}}"#,
            dir.display()
        );
        std::fs::write(&path, json).unwrap();
        path
    };
    let run = |config: &Path, extra: &[&str]| -> Output {
        let mut args = vec![
            "sweep",
            "--config",
            config.to_str().unwrap(),
            "--corpus",
            corpus.to_str().unwrap(),
            "--quiet",
            "--jobs",
            "1",
        ];
        args.extend_from_slice(extra);
        let out = posenc(&args);
        succeeded(&out);
        out
    };
    let whole = corpus.join("whole");
    let whole_config = config(&whole);
    let listed = String::from_utf8(run(&whole_config, &["--list"]).stdout).unwrap();
    let names: Vec<&str> = listed.lines().collect();
    assert_eq!(
        names,
        [
            "rope/seed3",
            "rope/dynamic/seed3",
            "rope-ft-yarn/seed3",
            "nope/seed3",
            "rope/seed4",
            "rope/dynamic/seed4",
            "rope-ft-yarn/seed4",
            "nope/seed4"
        ]
    );
    run(&whole_config, &[]);
    let table = |dir: &Path| std::fs::read_to_string(dir.join("results/ppl.csv")).unwrap();
    let expected = table(&whole);
    // 2 seeds x (nope, rope, dynamic, ft-yarn at two factors) x 2 lengths x 2 modes
    assert_eq!(expected.lines().count(), 1 + 2 * 5 * 2 * 2, "{expected}");
    assert!(expected.lines().any(|l| l.contains(",ft-yarn-matched,")));
    // the first seed's checkpoints where `checkpoints` says, the others beside
    assert!(whole.join("checkpoints/rope-ft-yarn/config.json").exists());
    assert!(whole
        .join("seed-checkpoints/rope-ft-yarn-seed4/config.json")
        .exists());
    let curves = std::fs::read_to_string(whole.join("results/curves.csv")).unwrap();
    // nope and rope 2 points each, the fine-tune 1, per seed
    assert_eq!(curves.lines().count(), 1 + 2 * (2 + 2 + 1), "{curves}");

    let sharded = corpus.join("sharded");
    let sharded_config = config(&sharded);
    run(&sharded_config, &["--shard", "1/2"]);
    assert_ne!(
        table(&sharded),
        expected,
        "half the items are not the table"
    );
    run(&sharded_config, &["--shard", "0/2"]);
    assert_eq!(
        table(&sharded),
        expected,
        "two shards merge into one run's table"
    );

    // a second run reuses every item's results, and writes the same record of the sweep
    let record = |dir: &Path| std::fs::read(dir.join("results/sweep.json")).unwrap();
    let first_record = record(&whole);
    let again = run(&whole_config, &[]);
    let log = String::from_utf8_lossy(&again.stderr);
    assert_eq!(
        log.matches("results of these weights reused").count(),
        8,
        "{log}"
    );
    assert_eq!(table(&whole), expected);
    assert!(
        record(&whole) == first_record,
        "sweep.json depends on the item files alone"
    );
    let summary: serde_json::Value = serde_json::from_slice(&first_record).unwrap();
    let items = summary["items"].as_array().unwrap();
    assert_eq!(items.len(), 8);
    let train_sum: f64 = items
        .iter()
        .map(|t| t["train_seconds"].as_f64().unwrap())
        .sum();
    assert!((summary["train_seconds"].as_f64().unwrap() - train_sum).abs() < 1e-9);

    // one item by name, and a name that is not an item
    let only = corpus.join("only");
    let only_config = config(&only);
    run(&only_config, &["--only", "nope/seed4"]);
    assert_eq!(table(&only).lines().count(), 1 + 2 * 2);
    fails_with(
        &[
            "sweep",
            "--config",
            only_config.to_str().unwrap(),
            "--corpus",
            corpus.to_str().unwrap(),
            "--only",
            "nope/seed9",
        ],
        "invalid --only = nope/seed9",
    );
}

/// `--list` prints what a run with the same flags would run: `--only` and `--shard` applied,
/// and every flag that a run refuses refused.
#[test]
fn list_applies_and_checks_every_selection_flag() {
    let tmp = corpus();
    let dir = tmp.path();
    let config = dir.join("config.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"schemes": ["nope", "rope"], "rope_inference": ["dynamic"],
                 "finetune": {{"kinds": []}}, "seeds": [3, 4],
                 "checkpoints": "{0}/checkpoints", "results": "{0}/results/ppl.csv"}}"#,
            dir.display()
        ),
    )
    .unwrap();
    let list = |extra: &[&str]| -> String {
        let mut args = vec!["sweep", "--config", config.to_str().unwrap(), "--list"];
        args.extend_from_slice(extra);
        let out = posenc(&args);
        succeeded(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        list(&[]).lines().collect::<Vec<_>>(),
        [
            "rope/seed3",
            "rope/dynamic/seed3",
            "nope/seed3",
            "rope/seed4",
            "rope/dynamic/seed4",
            "nope/seed4"
        ]
    );
    // groups: a seed's RoPE with its scalings, every other model alone
    assert_eq!(
        list(&["--shard", "1/2"]).lines().collect::<Vec<_>>(),
        ["nope/seed3", "nope/seed4"]
    );
    // in the order of the sweep, whatever the order given
    assert_eq!(
        list(&["--only", "nope/seed4,rope/seed3"])
            .lines()
            .collect::<Vec<_>>(),
        ["rope/seed3", "nope/seed4"]
    );
    assert_eq!(
        list(&["--only", "nope/seed3", "--shard", "0/2"]),
        "\n",
        "no item of the shard is named"
    );
    let config = config.to_str().unwrap();
    for (extra, needle) in [
        (["--only", "nope/seed9"], "invalid --only = nope/seed9"),
        (["--jobs", "0"], "invalid --jobs = 0"),
        (
            ["--kernels", "reference"],
            "--kernels reference applies to train and eval",
        ),
    ] {
        let mut args = vec!["sweep", "--config", config, "--list"];
        args.extend_from_slice(&extra);
        fails_with(&args, needle);
    }
    assert!(!dir.join("checkpoints").exists() && !dir.join("results").exists());
}
