//! `posenc train`, `eval`, `sweep` and `export` from the command line: a checkpoint written,
//! evaluated and exported end to end on a small corpus, and one-line errors with a non-zero
//! exit status for bad input; by command: [`train`], [`eval`] (with `export`), [`sweep`] (and
//! one killed mid-training, [`sweep_kill`]); and two writers of one folder at once ([`locks`]).

mod eval;
mod locks;
mod sweep;
mod sweep_kill;
mod train;

use std::path::Path;
use std::process::Output;

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
