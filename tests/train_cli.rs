//! `posenc train`, `eval`, `sweep` and `export` from the command line: a checkpoint written,
//! evaluated and exported end to end on a small corpus, and one-line errors with a non-zero
//! exit status for bad input.
#![cfg(feature = "train")]

mod train_common;

use std::process::{Command, Output};

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
    fails_with(&["train", "--scheme", "bogus"], "nope, sinusoidal");
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
    fails_with(
        &["eval", "--checkpoint", out_arg, "--scaling", "bogus"],
        "linear, ntk, dynamic, yarn or llama3",
    );
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
