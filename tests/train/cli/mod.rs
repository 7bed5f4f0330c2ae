//! `posenc train`, `eval`, `sweep` and `export` from the command line: a checkpoint written,
//! evaluated and exported end to end on a small corpus, and one-line errors with a non-zero
//! exit status for bad input; by command: [`train`], [`eval`] (with `export`), [`sweep`] (and
//! one killed mid-training, [`sweep_kill`]); and two writers of one folder at once ([`locks`]).

mod eval;
mod locks;
mod sweep;
mod sweep_kill;
mod train;

use std::path::{Path, PathBuf};
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use crate::support::cli::posenc;

/// Fails unless the command failed with one line on stderr that contains `needle`.
fn fails_with(args: &[&str], needle: &str) {
    let out = posenc(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "{args:?}: {stderr}"
    );
}
/// The tiny model and corpus flags of these tests.
fn tiny_flags(corpus: &Path) -> Vec<String> {
    tiny_flags_but(corpus, &[])
}

/// The tiny flags, less those that `args` gives itself.
fn tiny_flags_but(corpus: &Path, args: &[&str]) -> Vec<String> {
    let corpus = corpus.display().to_string();
    let pairs = [
        ("--layers", "1"),
        ("--d-model", "16"),
        ("--heads", "2"),
        ("--d-ff", "32"),
        ("--train-len", "16"),
        ("--batch", "4"),
        ("--warmup", "1"),
        ("--log-every", "0"),
        ("--corpus", corpus.as_str()),
    ];
    let given = |flag: &str| {
        args.iter()
            .any(|a| *a == flag || a.starts_with(&format!("{flag}=")))
    };
    let mut flags = vec!["--quiet".to_string()];
    for (flag, value) in pairs {
        if !given(flag) {
            flags.extend([flag.to_string(), value.to_string()]);
        }
    }
    flags
}

/// `posenc train` with `args` and the tiny flags it does not give.
fn train_tiny(corpus: &Path, args: &[&str]) -> Output {
    let mut all: Vec<String> = vec!["train".into()];
    all.extend(args.iter().map(ToString::to_string));
    all.extend(tiny_flags_but(corpus, args));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    posenc(&all)
}

fn succeeded(out: &Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn fails_tiny_with(corpus: &Path, args: &[&str], needle: &str) {
    let mut all: Vec<String> = vec!["train".into()];
    all.extend(args.iter().map(ToString::to_string));
    all.extend(tiny_flags_but(corpus, args));
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    fails_with(&all, needle);
}

fn step_of(dir: &Path) -> u64 {
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let info: serde_json::Value = serde_json::from_str(&text).unwrap();
    info["step"].as_u64().unwrap()
}

/// A tiny sweep writing under `dir`: RoPE (with two scalings at inference) and NoPE, one seed;
/// `steps` of training each.
fn sweep_config(dir: &Path, steps: usize) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("config.json");
    let json = format!(
        r#"{{
  "model": {{"layers": 1, "d_model": 16, "heads": 2, "d_ff": 32, "train_len": 16,
            "max_positions": 16}},
  "train": {{"batch": 4, "steps": {steps}, "warmup": 1, "valid_every": 100, "valid_bytes": 64}},
  "schemes": ["rope", "nope"],
  "rope_inference": ["dynamic", "linear"],
  "eval": {{"lengths": [16, 32], "max_bytes": 256, "sliding_max_bytes": 128}},
  "finetune": {{"kinds": [], "controls": []}},
  "budget_control": {{"schemes": []}},
  "seeds": [0],
  "checkpoints": "{0}/checkpoints",
  "results": "{0}/results/ppl.csv",
  "dtype": "f32"
}}"#,
        dir.display()
    );
    std::fs::write(&path, json).unwrap();
    path
}

/// `posenc sweep --config CONFIG` on `corpus` with `extra`, one job unless it says.
fn sweep_args(config: &Path, corpus: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = vec!["sweep".into(), "--config".into()];
    args.push(config.display().to_string());
    args.extend(["--corpus".into(), corpus.display().to_string()]);
    args.push("--quiet".into());
    if !extra.contains(&"--jobs") {
        args.extend(["--jobs".into(), "1".into()]);
    }
    args.extend(extra.iter().map(ToString::to_string));
    args
}

/// Kills `child` (SIGKILL) once `path` exists (failing after 120 s without it), `after` later:
/// a kill wherever the command is in what it writes next.
fn kill_once_exists(mut child: Child, path: &Path, after: Duration) {
    let began = Instant::now();
    while !path.exists() {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "no {} after 120 s",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(after);
    child.kill().unwrap();
    child.wait().unwrap();
}
