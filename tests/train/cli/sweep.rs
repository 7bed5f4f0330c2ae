//! `posenc sweep`: a bad configuration, and the sweep's items listed, sharded, merged and
//! resumed.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::{fails_with, succeeded};
use crate::support::cli::posenc;
use crate::support::model::corpus;
use crate::support::page_says;

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
  "finetune": {{"kinds": ["yarn"], "factors": [2],
                "controls": [{{"scheme": "nope", "factors": [2]}}],
                "steps": 2, "batch": 2, "valid_every": 1, "seeds": [3, 4]}},
  "budget_control": {{"schemes": ["nope"], "seeds": [4]}},
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
            "nope/seed3",
            "nope-ft-x2/seed3",
            "rope/seed3",
            "rope/dynamic/seed3",
            "rope-ft-yarn-x2/seed3",
            "nope/seed4",
            "nope-ft-x2/seed4",
            "rope/seed4",
            "rope/dynamic/seed4",
            "rope-ft-yarn-x2/seed4",
            "nope-budget-x2/seed4"
        ]
    );
    // --plan: the items with their cost (steps x sequences x bytes), and the totals
    let plan = run(
        &whole_config,
        &[
            "--plan",
            "--only",
            "rope/dynamic/seed3,rope-ft-yarn-x2/seed4",
        ],
    );
    let plan = String::from_utf8(plan.stdout).unwrap();
    let lines: Vec<&str> = plan.lines().collect();
    assert_eq!(lines.len(), 5, "{plan}");
    assert!(
        lines[1].starts_with("rope/dynamic/seed3") && lines[1].contains(" - "),
        "{plan}"
    );
    assert!(
        lines[2].starts_with("rope-ft-yarn-x2/seed4") && lines[2].contains("2 x 1 x 32"),
        "{plan}"
    );
    assert!(lines[3].starts_with("total: 2 items"), "{plan}");
    assert!(
        lines[4].starts_with("finished: 0 of 2 items") && lines[4].contains("not estimated"),
        "{plan}"
    );
    assert!(!whole.join("results").exists(), "--plan writes nothing");
    run(&whole_config, &[]);
    // --plan now marks every item finished
    let plan = String::from_utf8(run(&whole_config, &["--plan"]).stdout).unwrap();
    assert_eq!(
        plan.lines().filter(|l| l.ends_with(" yes")).count(),
        11,
        "{plan}"
    );
    assert!(
        plan.trim_end()
            .ends_with("finished: 11 of 11 items (their rows are in the results table); left: 0"),
        "{plan}"
    );
    let table = |dir: &Path| std::fs::read_to_string(dir.join("results/ppl.csv")).unwrap();
    let expected = table(&whole);
    // 11 items x 2 lengths x 2 modes
    assert_eq!(expected.lines().count(), 1 + 11 * 2 * 2, "{expected}");
    // the fine-tunes: scored at 16 and 32 with the scaling of their factor 2 (the control
    // without one), trained at 32
    let rows = |variant: &str| -> Vec<Vec<String>> {
        expected
            .lines()
            .filter(|l| l.split(',').nth(1) == Some(variant))
            .map(|l| l.split(',').map(String::from).collect())
            .collect()
    };
    let header: Vec<&str> = expected.lines().next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|&h| h == name).unwrap();
    for (variant, factor) in [("ft-yarn-x2", "2.0"), ("ft-x2", ""), ("budget-x2", "")] {
        let rows = rows(variant);
        let n = if variant.starts_with("ft") {
            2 * 2 * 2
        } else {
            2 * 2
        };
        assert_eq!(rows.len(), n, "{variant}");
        assert!(
            rows.iter().all(|r| r[column("scaling_factor")] == factor),
            "{variant}"
        );
        let want_len = if variant.starts_with("ft") {
            "32"
        } else {
            "16"
        };
        assert!(
            rows.iter().all(|r| r[column("train_len")] == want_len),
            "{variant}"
        );
    }
    // a fine-tune's targets are its base model's: the same matched segments at 32
    let windows = |stem: &str| {
        std::fs::read_to_string(whole.join(format!("results/windows/{stem}.csv")))
            .unwrap()
            .lines()
            .filter(|l| l.contains(",matched,32,"))
            .map(|l| l.split(',').nth(5).unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(windows("rope-ft-yarn-x2-seed3"), windows("rope-seed3"));
    assert!(!windows("rope-seed3").is_empty());
    // the first seed's checkpoints where `checkpoints` says, the others beside
    assert!(whole
        .join("checkpoints/rope-ft-yarn-x2/config.json")
        .exists());
    assert!(whole
        .join("seed-checkpoints/rope-ft-yarn-x2-seed4/config.json")
        .exists());
    assert!(whole
        .join("seed-checkpoints/nope-budget-x2-seed4/config.json")
        .exists());
    let curves = std::fs::read_to_string(whole.join("results/curves.csv")).unwrap();
    // every trained model 2 points per seed (the budget control 4)
    assert_eq!(curves.lines().count(), 1 + 2 * 2 * 4 + 4, "{curves}");

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
        11,
        "{log}"
    );
    assert_eq!(table(&whole), expected);
    assert!(
        record(&whole) == first_record,
        "sweep.json depends on the item files alone"
    );
    let summary: serde_json::Value = serde_json::from_slice(&first_record).unwrap();
    let items = summary["items"].as_array().unwrap();
    assert_eq!(items.len(), 11);
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
    // --left: the other ten, which two shards formed together split between them
    let listed = |config: &Path, extra: &[&str]| -> Vec<String> {
        let mut args = vec!["--list", "--left"];
        args.extend_from_slice(extra);
        let out = String::from_utf8(run(config, &args).stdout).unwrap();
        out.lines()
            .filter(|l| !l.is_empty())
            .map(String::from)
            .collect()
    };
    let left = listed(&only_config, &[]);
    let others: Vec<&str> = names
        .iter()
        .copied()
        .filter(|n| *n != "nope/seed4")
        .collect();
    assert_eq!(left, others);
    let shards = [
        listed(&only_config, &["--shard", "0/2"]),
        listed(&only_config, &["--shard", "1/2"]),
    ];
    assert!(shards.iter().all(|s| !s.is_empty()), "{shards:?}");
    let mut both: Vec<String> = shards.concat();
    both.sort();
    let mut want: Vec<String> = others.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(both, want, "{shards:?}");
    let whole_left = listed(&whole_config, &[]);
    assert!(
        whole_left.is_empty(),
        "the whole sweep has {whole_left:?} left"
    );
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
                 "finetune": {{"kinds": [], "controls": []}},
                 "budget_control": {{"schemes": []}}, "seeds": [3, 4],
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
            "nope/seed3",
            "rope/seed3",
            "rope/dynamic/seed3",
            "nope/seed4",
            "rope/seed4",
            "rope/dynamic/seed4"
        ]
    );
    // groups: a seed's RoPE with its scalings, every other model alone
    assert_eq!(
        list(&["--shard", "1/2"]).lines().collect::<Vec<_>>(),
        [
            "rope/seed3",
            "rope/dynamic/seed3",
            "rope/seed4",
            "rope/dynamic/seed4"
        ]
    );
    // in the order of the sweep, whatever the order given
    assert_eq!(
        list(&["--only", "nope/seed4,rope/seed3"])
            .lines()
            .collect::<Vec<_>>(),
        ["rope/seed3", "nope/seed4"]
    );
    assert_eq!(
        list(&["--only", "nope/seed3", "--shard", "1/2"]),
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

/// The sweep of record's page names its number of items, `posenc sweep --plan` its cost: the
/// count is what `--list` prints for the shipped configuration.
#[test]
fn the_sweep_page_counts_the_items_of_the_shipped_configuration() {
    let config = format!("{}/data/configs/sweep.json", env!("CARGO_MANIFEST_DIR"));
    let out = posenc(&["sweep", "--config", &config, "--list"]);
    succeeded(&out);
    let items = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .count();
    page_says("docs/sweep.md", &format!("# the {items} items, in order"));
}
