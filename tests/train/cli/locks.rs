//! Two writers, one folder: two `posenc train` into one checkpoint folder and two sweeps of one
//! configuration, started at the same moment, train once (the second is refused at once with
//! one line naming the folder and the process that holds it); two shards of one sweep run side
//! by side into one folder and merge into one run's tables; a writer killed with SIGKILL leaves
//! nothing that blocks the next. Each race is run [`ROUNDS`] times.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use super::{step_of, succeeded, sweep_args, sweep_config, tiny_flags};
use crate::support::cli::command;
use crate::support::model::corpus;

/// Times each race is run.
const ROUNDS: usize = 5;

/// One finished `posenc` process of a race.
struct Run {
    pid: u32,
    output: Output,
    seconds: f64,
}

/// Starts `posenc` with each of `args` at the same moment and waits for all of them.
fn race<const N: usize>(args: [Vec<String>; N]) -> [Run; N] {
    let start = Barrier::new(N);
    std::thread::scope(|s| {
        let runs = args.map(|args| {
            let start = &start;
            s.spawn(move || {
                start.wait();
                let began = Instant::now();
                let child = command()
                    .args(&args)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap();
                let pid = child.id();
                let output = child.wait_with_output().unwrap();
                Run {
                    pid,
                    output,
                    seconds: began.elapsed().as_secs_f64(),
                }
            })
        });
        runs.map(|r| r.join().unwrap())
    })
}

/// The run that succeeded and the one that failed, and the index of the first.
fn winner_and_loser([a, b]: [Run; 2]) -> (Run, Run, usize) {
    let stderr = |r: &Run| String::from_utf8_lossy(&r.output.stderr).into_owned();
    match (a.output.status.success(), b.output.status.success()) {
        (true, false) => (a, b, 0),
        (false, true) => (b, a, 1),
        _ => panic!(
            "want one success and one refusal:\n{}\n---\n{}",
            stderr(&a),
            stderr(&b)
        ),
    }
}

/// Checks that `loser` was refused before any work with one line naming `folder` and the pid
/// of `winner`, running `command`.
fn refused(loser: &Run, winner: &Run, folder: &Path, command: &str) {
    let stderr = String::from_utf8_lossy(&loser.output.stderr);
    assert_eq!(loser.output.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    let want = format!(
        "error: {} is in use by another process (pid {}: {command} ",
        folder.display(),
        winner.pid
    );
    assert!(stderr.starts_with(&want), "want {want}...\ngot {stderr}");
    assert!(
        stderr
            .trim_end()
            .ends_with("; wait for it to end, or write elsewhere"),
        "{stderr}"
    );
    assert!(
        loser.seconds < winner.seconds,
        "refused after {:.2} s, the winner took {:.2} s",
        loser.seconds,
        winner.seconds
    );
}

/// The names in `dir`, hidden ones included (a lock file, `.NAME.new`, `.NAME.old`).
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every file under `dir` by its path relative to it, with its bytes.
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap();
                found.insert(path.strip_prefix(dir).unwrap().to_path_buf(), bytes);
            }
        }
    }
    found
}

/// `posenc train` of a tiny alibi model into `out` with `seed` and `steps`.
fn train_args(corpus: &Path, out: &Path, seed: u64, steps: usize) -> Vec<String> {
    let mut args: Vec<String> = ["train", "--scheme", "alibi", "--seed"]
        .iter()
        .map(ToString::to_string)
        .collect();
    args.extend([seed.to_string(), "--steps".into(), steps.to_string()]);
    args.extend(["--out".into(), out.display().to_string()]);
    args.extend(tiny_flags(corpus));
    args
}

#[test]
fn two_trainings_into_one_folder_train_once_and_refuse_the_second_at_once() {
    let tmp = corpus();
    let corpus = tmp.path();
    for round in 0..ROUNDS {
        let dir = corpus.join(format!("round-{round}"));
        let out = dir.join("ckpt");
        // about a second of training: the second process starts long before it ends
        let runs = race([
            train_args(corpus, &out, 1, 1000),
            train_args(corpus, &out, 2, 1000),
        ]);
        let (winner, loser, first) = winner_and_loser(runs);
        refused(&loser, &winner, &out, "posenc train");
        // the winner's checkpoint, whole, and nothing beside it
        let info: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert_eq!(info["train"]["seed"], first + 1, "round {round}");
        assert_eq!(step_of(&out), 1000);
        assert_eq!(names(&dir), ["ckpt"], "round {round}");
        assert_eq!(
            names(&out),
            [
                "config.json",
                "model.safetensors",
                "optimizer.bpk",
                "state.json"
            ]
        );
    }
    // and it reads whole
    let eval = command()
        .args(["eval", "--checkpoint"])
        .arg(corpus.join("round-0/ckpt"))
        .args([
            "--lengths",
            "16",
            "--max-bytes",
            "100",
            "--quiet",
            "--corpus",
        ])
        .arg(corpus)
        .output()
        .unwrap();
    succeeded(&eval);
}

#[test]
fn two_sweeps_of_one_configuration_run_once_and_refuse_the_second_at_once() {
    let tmp = corpus();
    let corpus = tmp.path();
    for round in 0..ROUNDS {
        let dir = corpus.join(format!("round-{round}"));
        // two models of 300 steps: the second process starts long before the first ends
        let config = sweep_config(&dir, 300);
        let runs = race([
            sweep_args(&config, corpus, &[]),
            sweep_args(&config, corpus, &[]),
        ]);
        let (winner, loser, _) = winner_and_loser(runs);
        // the first folder it locks (in the order of their paths) is the first checkpoint
        refused(
            &loser,
            &winner,
            &dir.join("checkpoints/nope"),
            "posenc sweep",
        );
        assert_eq!(names(&dir.join("checkpoints")), ["nope", "rope"]);
        let table = std::fs::read_to_string(dir.join("results/ppl.csv")).unwrap();
        // 4 variants (nope, rope, dynamic, linear) x 2 lengths x 2 modes
        assert_eq!(table.lines().count(), 1 + 4 * 2 * 2, "{table}");
        assert!(
            !files(&dir)
                .keys()
                .any(|p| p.to_string_lossy().contains("/.")),
            "{:?}",
            files(&dir).keys()
        );
    }
}

/// Shards of one sweep into one folder run side by side, their items whole and their merged
/// tables those of one run; two runs of other items that read one RoPE checkpoint share it;
/// two workers of one run that both need a missing RoPE checkpoint train it once.
#[test]
fn shards_of_one_sweep_run_side_by_side_into_one_folder_and_merge_into_one_runs_tables() {
    let tmp = corpus();
    let corpus = tmp.path();
    let whole = corpus.join("whole");
    let whole_config = sweep_config(&whole, 20);
    let run = command()
        .args(sweep_args(&whole_config, corpus, &[]))
        .output()
        .unwrap();
    succeeded(&run);
    // the item records hold timings: every other file is compared byte for byte
    let results = |dir: &Path| {
        let mut files = files(&dir.join("results"));
        for (path, bytes) in files.iter_mut() {
            if path.extension().is_some_and(|x| x == "json") {
                bytes.clear();
            }
        }
        files
    };
    let expected = results(&whole);
    assert_eq!(
        expected.keys().filter(|p| p.starts_with("items")).count(),
        2 * 4,
        "{:?}",
        expected.keys()
    );
    for round in 0..ROUNDS {
        let dir = corpus.join(format!("round-{round}"));
        let config = sweep_config(&dir, 20);
        let runs = race([
            sweep_args(&config, corpus, &["--shard", "0/2"]),
            sweep_args(&config, corpus, &["--shard", "1/2"]),
        ]);
        for r in &runs {
            succeeded(&r.output);
        }
        assert_eq!(results(&dir), expected, "round {round}");
    }
    // with RoPE trained, two runs of its scalings read it side by side
    let runs = race([
        sweep_args(&whole_config, corpus, &["--only", "rope/dynamic/seed0"]),
        sweep_args(&whole_config, corpus, &["--only", "rope/linear/seed0"]),
    ]);
    for r in &runs {
        succeeded(&r.output);
    }
    assert_eq!(results(&whole), expected);
    let alone = corpus.join("alone");
    let config = sweep_config(&alone, 20);
    let only = [
        "--only",
        "rope/dynamic/seed0,rope/linear/seed0",
        "--jobs",
        "2",
    ];
    let run = command()
        .args(sweep_args(&config, corpus, &only))
        .output()
        .unwrap();
    succeeded(&run);
    let log = String::from_utf8_lossy(&run.stderr);
    assert_eq!(log.matches("rope: trained 20 steps").count(), 1, "{log}");
    for item in ["rope-dynamic-seed0", "rope-linear-seed0"] {
        let path = PathBuf::from(format!("items/{item}.csv"));
        assert_eq!(results(&alone)[&path], expected[&path]);
    }
}

/// Waits until the lock file `file` names the process `pid`.
fn wait_for_lock(file: &Path, pid: u32) {
    let began = Instant::now();
    let want = format!("pid {pid}: ");
    while !std::fs::read_to_string(file).is_ok_and(|c| c.starts_with(&want)) {
        assert!(
            began.elapsed() < Duration::from_secs(60),
            "{} not taken",
            file.display()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_writer_killed_while_it_holds_its_locks_leaves_nothing_that_blocks_the_next() {
    let tmp = corpus();
    let corpus = tmp.path();
    // a training killed with SIGKILL while it holds the lock of its folder
    let out = corpus.join("ckpt");
    let mut child = command()
        .args(train_args(corpus, &out, 1, 1_000_000))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lock = corpus.join(".ckpt.lock");
    wait_for_lock(&lock, child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(lock.exists(), "a killed holder leaves its lock file");
    let next = command()
        .args(train_args(corpus, &out, 1, 2))
        .output()
        .unwrap();
    succeeded(&next);
    assert_eq!(step_of(&out), 2);
    assert!(!lock.exists(), "the next holder removes it");
    // a sweep killed while it holds the locks of its checkpoints and items
    let dir = corpus.join("sweep");
    let config = sweep_config(&dir, 1_000_000);
    let mut child = command()
        .args(sweep_args(&config, corpus, &[]))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // the last of its locks, in the order of their paths
    wait_for_lock(&dir.join("results/items/.rope-seed0.json.lock"), child.id());
    child.kill().unwrap();
    child.wait().unwrap();
    let config = sweep_config(&dir, 2);
    let next = command()
        .args(sweep_args(&config, corpus, &[]))
        .output()
        .unwrap();
    succeeded(&next);
    // the stale lock files taken and removed (a kill may leave others: a probe file of the
    // check that a folder is writable)
    let stale: Vec<PathBuf> = files(&dir)
        .into_keys()
        .filter(|p| p.extension().is_some_and(|x| x == "lock"))
        .collect();
    assert!(stale.is_empty(), "{stale:?}");
}
