//! `posenc train`, `eval`, `sweep` and `export` from the command line: a checkpoint written,
//! evaluated and exported end to end on a small corpus, and one-line errors with a non-zero
//! exit status for bad input.
#![cfg(feature = "train")]

mod train_common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn posenc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_posenc"))
        .args(args)
        .output()
        .expect("run posenc")
}

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

#[test]
fn train_eval_and_export_end_to_end() {
    let corpus = train_common::corpus("cli");
    let (corpus_arg, out) = (corpus.to_str().unwrap(), corpus.join("t5"));
    let out_arg = out.to_str().unwrap();
    let tiny = [
        "--layers",
        "1",
        "--d-model",
        "16",
        "--heads",
        "2",
        "--d-ff",
        "32",
        "--train-len",
        "16",
        "--batch",
        "4",
        "--warmup",
        "1",
        "--log-every",
        "0",
        "--quiet",
        "--corpus",
        corpus_arg,
    ];
    let _ = std::fs::remove_dir_all(&out);
    let mut args = vec!["train", "--scheme", "t5", "--steps", "3", "--out", out_arg];
    args.extend(tiny);
    let trained = posenc(&args);
    assert!(
        trained.status.success(),
        "{}",
        String::from_utf8_lossy(&trained.stderr)
    );
    assert!(String::from_utf8_lossy(&trained.stdout).contains("step 3/3"));
    for file in [
        "config.json",
        "model.safetensors",
        "state.json",
        "optimizer.bpk",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let csv = corpus.join("eval.csv");
    let evaluated = posenc(&[
        "eval",
        "--checkpoint",
        out_arg,
        "--lengths",
        "16,64",
        "--max-bytes",
        "1000",
        "--corpus",
        corpus_arg,
        "--csv",
        csv.to_str().unwrap(),
        "--quiet",
    ]);
    assert!(
        evaluated.status.success(),
        "{}",
        String::from_utf8_lossy(&evaluated.stderr)
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    assert!(text.starts_with("scheme,variant,train_len,eval_len,mode,nats_per_byte,std_error"));
    assert_eq!(text.lines().count(), 3);
    let bias = posenc(&[
        "export",
        "t5-bias",
        "--checkpoint",
        out_arg,
        "--min",
        "-5",
        "--max",
        "0",
    ]);
    let bias = String::from_utf8_lossy(&bias.stdout);
    // header + 1 layer x 2 heads x 6 relative positions
    assert_eq!(bias.lines().count(), 13, "{bias}");
    let maps = posenc(&[
        "export",
        "attention",
        "--checkpoint",
        out_arg,
        "--length",
        "32",
        "--pool",
        "8",
        "--windows",
        "1",
        "--corpus",
        corpus_arg,
    ]);
    // header + 1 layer x 2 heads x 4 x 4 blocks
    assert_eq!(String::from_utf8_lossy(&maps.stdout).lines().count(), 33);

    // errors: one line, non-zero
    let bogus = posenc(&["train", "--scheme", "bogus", "--out", out_arg]);
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("possible values: nope, sinusoidal"));
    fails_with(
        &[
            "train",
            "--scheme",
            "rope",
            "--d-model",
            "10",
            "--heads",
            "4",
            "--out",
            out_arg,
        ],
        "d_model",
    );
    fails_with(
        &["eval", "--checkpoint", "/nonexistent/checkpoint"],
        "/nonexistent/checkpoint",
    );
    fails_with(
        &[
            "eval",
            "--checkpoint",
            out_arg,
            "--scaling",
            "yarn",
            "--corpus",
            corpus_arg,
        ],
        "only for RoPE",
    );
    let bogus = posenc(&["eval", "--checkpoint", out_arg, "--scaling", "bogus"]);
    assert!(String::from_utf8_lossy(&bogus.stderr)
        .contains("possible values: linear, ntk, dynamic, yarn, llama3"));
    fails_with(
        &[
            "export",
            "attention",
            "--checkpoint",
            out_arg,
            "--length",
            "32",
            "--pool",
            "5",
            "--corpus",
            corpus_arg,
        ],
        "--pool",
    );
    fails_with(&["sweep", "--jobs", "0"], "--jobs");
    fails_with(
        &["sweep", "--config", "/nonexistent.json"],
        "/nonexistent.json",
    );
}

#[test]
fn kernels_reference_is_refused_where_a_command_does_not_take_it() {
    fails_with(
        // the smoke configuration, so that a regression cannot start the full sweep
        &[
            "sweep",
            "--config",
            "data/configs/smoke.json",
            "--kernels",
            "reference",
        ],
        "--kernels reference applies to train and eval",
    );
    fails_with(
        &[
            "export",
            "t5-bias",
            "--checkpoint",
            "data/checkpoints/t5",
            "--kernels",
            "reference",
        ],
        "--kernels reference applies to train and eval",
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

#[test]
fn train_never_writes_where_it_was_not_told_to() {
    let corpus = train_common::corpus("cli-out");
    let out = corpus.join("ckpt");
    let out_arg = out.to_str().unwrap();
    // --out is required: no default folder (the shipped data/checkpoints/<scheme> was one)
    let missing = posenc(&["train", "--scheme", "alibi", "--steps", "1"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--out <OUT>"));
    succeeded(&train_tiny(
        &corpus,
        &["--scheme", "alibi", "--steps", "2", "--out", out_arg],
    ));
    let weights = std::fs::read(out.join("model.safetensors")).unwrap();
    // an existing checkpoint is replaced only with --force
    fails_tiny_with(
        &corpus,
        &["--scheme", "alibi", "--steps", "1", "--out", out_arg],
        "already holds a checkpoint (alibi, step 2 of 2); --resume continues it, --force replaces it",
    );
    assert_eq!(
        std::fs::read(out.join("model.safetensors")).unwrap(),
        weights
    );
    succeeded(&train_tiny(
        &corpus,
        &[
            "--scheme", "alibi", "--steps", "1", "--seed", "5", "--out", out_arg, "--force",
        ],
    ));
    assert_eq!(step_of(&out), 1);
    // a folder with other files is never a target, even with --force
    let other = corpus.join("notes");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("todo.txt"), "mine").unwrap();
    fails_tiny_with(
        &corpus,
        &[
            "--scheme",
            "alibi",
            "--steps",
            "1",
            "--force",
            "--out",
            other.to_str().unwrap(),
        ],
        "not a checkpoint's (todo.txt)",
    );
    assert_eq!(
        std::fs::read_to_string(other.join("todo.txt")).unwrap(),
        "mine"
    );
    // an --out that cannot be written fails before the corpus is even read
    let under_a_file = corpus.join("train.txt").join("ckpt");
    fails_with(
        &[
            "train",
            "--scheme",
            "alibi",
            "--out",
            under_a_file.to_str().unwrap(),
            "--corpus",
            "/nonexistent",
        ],
        "train.txt",
    );
}

#[test]
fn bad_training_values_are_refused_before_work_and_nothing_is_written() {
    let corpus = train_common::corpus("cli-values");
    let out = corpus.join("never");
    let out_arg = out.to_str().unwrap();
    for (args, needle) in [
        (
            &["--batch", "0"][..],
            "invalid batch = 0: allowed is 1 to 4096",
        ),
        (&["--lr", "nan"], "invalid lr = NaN"),
        (&["--lr", "-1"], "invalid lr = -1"),
        (&["--lr=-1"], "invalid lr = -1"),
        (
            &["--train-len", "1000000"],
            "invalid train_len = 1000000: allowed is 2 to 16384",
        ),
        (
            &["--heads", "4294967296"],
            "invalid heads = 4294967296: allowed is 1 to 256",
        ),
        (&["--steps", "0"], "invalid steps = 0"),
        (
            &["--scheme", "alibi", "--scaling", "yarn"],
            "invalid --scaling = yarn",
        ),
    ] {
        let mut all = vec!["--out", out_arg];
        if !args.contains(&"--scheme") {
            all.extend(["--scheme", "rope"]);
        }
        all.extend(args);
        fails_tiny_with(&corpus, &all, needle);
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

#[test]
fn resume_refuses_what_contradicts_its_checkpoint() {
    let corpus = train_common::corpus("cli-resume");
    let out = corpus.join("ckpt");
    let out_arg = out.to_str().unwrap();
    succeeded(&train_tiny(
        &corpus,
        &[
            "--scheme",
            "rope",
            "--steps",
            "6",
            "--stop-after",
            "3",
            "--out",
            out_arg,
        ],
    ));
    assert_eq!(step_of(&out), 3);
    let before = std::fs::read(out.join("model.safetensors")).unwrap();
    for (args, needle) in [
        (
            &["--steps", "2"][..],
            "invalid steps = 2: allowed is at least 3",
        ),
        (
            &["--scheme", "alibi"],
            "scheme = \"alibi\" (checkpoint: \"rope\")",
        ),
        (&["--layers", "2"], "layers = 2 (checkpoint: 1)"),
        (&["--lr", "0.01"], "lr = 0.01 (checkpoint: 0.003)"),
        (&["--batch", "8"], "batch = 8 (checkpoint: 4)"),
        (&["--f16"], "dtype = F16 (checkpoint: F32)"),
        (&["--scaling", "yarn"], "rope_scaling"),
    ] {
        let mut all = vec!["--resume", "--out", out_arg];
        all.extend(args);
        fails_tiny_with(&corpus, &all, needle);
        assert_eq!(
            std::fs::read(out.join("model.safetensors")).unwrap(),
            before
        );
        assert_eq!(step_of(&out), 3, "{args:?}");
    }
    // flags equal to the checkpoint's are fine, and a bare --resume takes the rest from it
    succeeded(&train_tiny(
        &corpus,
        &["--resume", "--out", out_arg, "--steps", "5"],
    ));
    assert_eq!(step_of(&out), 5);
    let bare = posenc(&[
        "train",
        "--resume",
        "--out",
        out_arg,
        "--quiet",
        "--corpus",
        corpus.to_str().unwrap(),
    ]);
    succeeded(&bare);
    assert!(String::from_utf8_lossy(&bare.stdout).contains("step 5/5"));
    // --resume with --force or --init is a contradiction of flags
    let both = posenc(&["train", "--resume", "--force", "--out", out_arg]);
    assert_eq!(both.status.code(), Some(2));
}

#[test]
fn a_killed_training_keeps_its_last_periodic_checkpoint_whole_and_resumes() {
    let corpus = train_common::corpus("cli-kill");
    let out = corpus.join("ckpt");
    let mut args: Vec<String> = [
        "train",
        "--scheme",
        "t5",
        "--steps",
        "100000",
        "--save-every",
        "3",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    args.extend(["--out".to_string(), out.display().to_string()]);
    args.extend(tiny_flags(&corpus));
    let mut child = Command::new(env!("CARGO_BIN_EXE_posenc"))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // kill it (SIGKILL) once a periodic checkpoint exists, wherever it is in its next save
    let began = Instant::now();
    while !out.join("config.json").exists() {
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "no checkpoint after 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // whatever the moment, a reader finds a whole checkpoint at a multiple of 3 steps
    let eval = posenc(&[
        "eval",
        "--checkpoint",
        out.to_str().unwrap(),
        "--lengths",
        "16",
        "--max-bytes",
        "100",
        "--quiet",
        "--corpus",
        corpus.to_str().unwrap(),
    ]);
    succeeded(&eval);
    let step = step_of(&out);
    assert!(step >= 3 && step % 3 == 0, "step {step}");
    // and the run continues from it
    let target = (step + 2).to_string();
    succeeded(&train_tiny(
        &corpus,
        &[
            "--resume",
            "--out",
            out.to_str().unwrap(),
            "--steps",
            &target,
        ],
    ));
    assert_eq!(step_of(&out), step + 2);
}

#[test]
fn eval_and_export_check_their_inputs_and_outputs_before_work() {
    let corpus = train_common::corpus("cli-eval");
    let out = corpus.join("t5");
    let (corpus_arg, out_arg) = (corpus.to_str().unwrap(), out.to_str().unwrap());
    succeeded(&train_tiny(
        &corpus,
        &["--scheme", "t5", "--steps", "1", "--out", out_arg],
    ));
    let unwritable = corpus.join("train.txt").join("out.csv");
    let unwritable = unwritable.to_str().unwrap();
    for (args, needle) in [
        (
            &[
                "eval",
                "--checkpoint",
                out_arg,
                "--lengths",
                "200000",
                "--max-bytes",
                "0",
            ][..],
            "invalid lengths = 200000: allowed is one or more lengths, each from 1 to 16384",
        ),
        (
            &["eval", "--checkpoint", out_arg, "--lengths", "0"],
            "invalid lengths = 0",
        ),
        (
            &["eval", "--checkpoint", out_arg, "--csv", unwritable],
            "train.txt",
        ),
        (
            &[
                "eval",
                "--checkpoint",
                out_arg,
                "--per-position",
                unwritable,
            ],
            "train.txt",
        ),
        (
            &[
                "export",
                "t5-bias",
                "--checkpoint",
                out_arg,
                "--min=-100000000000",
            ],
            "at most 10000000 rows",
        ),
        (
            &[
                "export",
                "t5-bias",
                "--checkpoint",
                out_arg,
                "--out",
                unwritable,
            ],
            "train.txt",
        ),
        (
            &[
                "export",
                "attention",
                "--checkpoint",
                out_arg,
                "--length",
                "32",
                "--pool",
                "8",
                "--offset",
                "18446744073709551615",
                "--corpus",
                corpus_arg,
            ],
            "invalid --offset = 18446744073709551615",
        ),
        (
            &[
                "export",
                "attention",
                "--checkpoint",
                out_arg,
                "--length",
                "1000000",
            ],
            "invalid --length = 1000000: allowed is 1 to 16384",
        ),
    ] {
        fails_with(args, needle);
    }
    // -1e11 is not an integer: the parser says so
    let float = posenc(&["export", "t5-bias", "--checkpoint", out_arg, "--min=-1e11"]);
    assert_eq!(float.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&float.stderr).contains("invalid value '-1e11'"));
    // a checkpoint whose config.json has a mistyped key is refused, naming the key
    let bad = corpus.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    for f in ["model.safetensors", "state.json"] {
        std::fs::copy(out.join(f), bad.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(out.join("config.json")).unwrap();
    std::fs::write(
        bad.join("config.json"),
        text.replace("\"rope_scaling\"", "\"rope_scalin\""),
    )
    .unwrap();
    fails_with(
        &[
            "eval",
            "--checkpoint",
            bad.to_str().unwrap(),
            "--corpus",
            corpus_arg,
        ],
        "unknown field `rope_scalin`",
    );
    // matched mode: the same targets at every length; a region that does not fit is refused
    // before the model is loaded, naming the bytes
    let matched = posenc(&[
        "eval",
        "--checkpoint",
        out_arg,
        "--mode",
        "matched",
        "--lengths",
        "16,32",
        "--segment-bytes",
        "100",
        "--quiet",
        "--corpus",
        corpus_arg,
    ]);
    succeeded(&matched);
    let rows = String::from_utf8_lossy(&matched.stdout).into_owned();
    // test split of 3000 bytes: targets 32..2932, 29 segments of 100
    let scored: Vec<&str> = rows
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(9).unwrap())
        .collect();
    assert_eq!(scored, ["2900", "2900"], "{rows}");
    assert!(
        rows.lines().skip(1).all(|l| l.contains(",matched,")),
        "{rows}"
    );
    fails_with(
        &[
            "eval",
            "--checkpoint",
            bad.to_str().unwrap(),
            "--mode",
            "matched",
            "--segment-bytes",
            "5000",
            "--corpus",
            corpus_arg,
        ],
        "invalid matched target region = 3000 bytes available",
    );
    // eval writes no file unless asked: the checkpoint folder stays as it was
    succeeded(&posenc(&[
        "eval",
        "--checkpoint",
        out_arg,
        "--lengths",
        "16",
        "--max-bytes",
        "100",
        "--quiet",
        "--corpus",
        corpus_arg,
    ]));
    let mut files: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(
        files,
        [
            "config.json",
            "model.safetensors",
            "optimizer.bpk",
            "state.json"
        ]
    );
}

#[test]
fn a_closed_pipe_ends_eval_and_export_quietly() {
    let corpus = train_common::corpus("cli-pipe");
    let out = corpus.join("t5");
    let (corpus_arg, out_arg) = (corpus.to_str().unwrap(), out.to_str().unwrap());
    succeeded(&train_tiny(
        &corpus,
        &["--scheme", "t5", "--steps", "1", "--out", out_arg],
    ));
    for args in [
        &[
            "eval",
            "--checkpoint",
            out_arg,
            "--lengths",
            "16,32",
            "--max-bytes",
            "200",
            "--quiet",
            "--corpus",
            corpus_arg,
        ][..],
        &["export", "t5-bias", "--checkpoint", out_arg],
        &[
            "export",
            "attention",
            "--checkpoint",
            out_arg,
            "--length",
            "32",
            "--pool",
            "8",
            "--windows",
            "1",
            "--corpus",
            corpus_arg,
        ],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_posenc"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // the reader is gone before the first byte (`| true`)
        drop(child.stdout.take());
        let done = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&done.stderr);
        assert!(
            done.status.success(),
            "{args:?}: {:?} {stderr}",
            done.status
        );
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}

#[test]
fn a_sweep_with_a_bad_config_fails_before_training() {
    let corpus = train_common::corpus("cli-sweep");
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
    let corpus = train_common::corpus("cli-sweep-items");
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
    let _ = std::fs::remove_dir_all(&corpus);
}

/// Training is reproducible to the bit: the same seed gives the same weights on one thread
/// and on four (each output element is computed in the same order whatever the split of the
/// rows over the threads), so a sweep's shards on different machines and a resumed sweep train
/// the same models.
#[test]
fn training_gives_the_same_weights_on_any_number_of_threads() {
    let corpus = train_common::corpus("cli-threads");
    let mut digests = Vec::new();
    for threads in ["1", "4"] {
        let out_dir = corpus.join(format!("threads-{threads}"));
        let mut args: Vec<String> = [
            "train",
            "--scheme",
            "t5",
            "--steps",
            "4",
            "--out",
            out_dir.to_str().unwrap(),
            // 512 rows per step: the blocks of rows differ between 1 and 4 threads
            "--batch",
            "16",
            "--train-len",
            "32",
        ]
        .iter()
        .map(ToString::to_string)
        .collect();
        let given: Vec<&str> = args.iter().map(String::as_str).collect();
        args.extend(tiny_flags_but(&corpus, &given));
        let out = Command::new(env!("CARGO_BIN_EXE_posenc"))
            .args(&args)
            .env("RAYON_NUM_THREADS", threads)
            .output()
            .expect("run posenc");
        succeeded(&out);
        digests.push(std::fs::read(out_dir.join("model.safetensors")).unwrap());
    }
    assert!(
        digests[0] == digests[1],
        "weights differ between 1 and 4 threads"
    );
    let _ = std::fs::remove_dir_all(&corpus);
}
