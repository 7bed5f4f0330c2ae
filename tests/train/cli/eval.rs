//! `posenc eval` and `posenc export` on a checkpoint that `posenc train` wrote: end to end,
//! their inputs and outputs checked before work, and a closed pipe.

use std::process::Stdio;

use super::{fails_with, succeeded, train_tiny};
use crate::support::cli::{command, posenc};
use crate::support::model::corpus;

#[test]
fn train_eval_and_export_end_to_end() {
    let tmp = corpus();
    let corpus = tmp.path();
    let (corpus_arg, out) = (corpus.to_str().unwrap(), corpus.join("t5"));
    let out_arg = out.to_str().unwrap();
    let trained = train_tiny(
        corpus,
        &["--scheme", "t5", "--steps", "3", "--out", out_arg],
    );
    succeeded(&trained);
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
        .contains("possible values: linear, ntk, dynamic, ntk-by-parts, yarn, llama3"));
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

/// `posenc eval --rerope W [--leak K] [--log-n]`, `--self-extend W --group G`,
/// `--dynamic-yarn`, `--floor-log` and `--ramp` on a RoPE checkpoint: a window beyond every
/// length scores as plain RoPE (the same CSV but for the variant), the variant names the
/// method (`leaky-rerope+log-n`, `yarn+floor-log`); a non-RoPE checkpoint, a window of 0, k
/// below 1, `--leak` without `--rerope`, `--group` without `--self-extend`, two extensions or
/// two temperatures at once and an unknown ramp are errors.
#[test]
fn eval_extends_a_rope_checkpoint_with_rerope_and_log_n() {
    let tmp = corpus();
    let corpus = tmp.path();
    let corpus_arg = corpus.to_str().unwrap();
    let rope = corpus.join("rope");
    let rope_arg = rope.to_str().unwrap();
    succeeded(&train_tiny(
        corpus,
        &["--scheme", "rope", "--steps", "2", "--out", rope_arg],
    ));
    let eval = |extra: &[&str]| {
        let mut args = vec![
            "eval",
            "--checkpoint",
            rope_arg,
            "--lengths",
            "16,32",
            "--max-bytes",
            "1000",
            "--corpus",
            corpus_arg,
            "--quiet",
        ];
        args.extend(extra);
        let out = posenc(&args);
        succeeded(&out);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let plain = eval(&[]);
    let beyond = eval(&["--rerope", "32"]);
    assert_eq!(beyond.replace(",rerope,", ",base,"), plain);
    let extended = eval(&["--self-extend", "32", "--group", "4"]);
    assert_eq!(extended.replace(",self-extend,", ",base,"), plain);
    let leaky = eval(&["--rerope", "8", "--leak", "4", "--log-n"]);
    assert_eq!(leaky.lines().count(), 3);
    assert!(leaky
        .lines()
        .skip(1)
        .all(|l| l.starts_with("rope,leaky-rerope+log-n,")));
    assert_ne!(leaky.replace(",leaky-rerope+log-n,", ",base,"), plain);
    // the variants of dynamic YaRN and floor-log; both change the 32-byte windows
    for (extra, variant) in [
        (&["--dynamic-yarn"][..], "dynamic-yarn"),
        (&["--floor-log", "--floor-log-beta", "0.5"][..], "floor-log"),
        (&["--scaling", "yarn", "--floor-log"][..], "yarn+floor-log"),
    ] {
        let rows = eval(extra);
        assert!(
            rows.lines()
                .skip(1)
                .all(|l| l.starts_with(&format!("rope,{variant},"))),
            "{rows}"
        );
        assert_ne!(rows.replace(&format!(",{variant},"), ",base,"), plain);
    }
    // the sweep's ramp bounds are read (the tiny model's 4 pairs fall in the same bands under
    // both: which pairs each keeps is `SWEEP_RAMP`'s test)
    let sweep_ramp = eval(&["--scaling", "yarn", "--ramp", "sweep"]);
    assert!(sweep_ramp
        .lines()
        .skip(1)
        .all(|l| l.starts_with("rope,yarn,")));
    let at = |extra: &[&str]| {
        let mut args = vec!["eval", "--checkpoint", rope_arg, "--corpus", corpus_arg];
        args.extend(extra);
        args.iter().map(ToString::to_string).collect::<Vec<_>>()
    };
    let fails = |extra: &[&str], needle: &str| {
        let args = at(extra);
        fails_with(&args.iter().map(String::as_str).collect::<Vec<_>>(), needle);
    };
    fails(&["--rerope", "0"], "window");
    fails(&["--rerope", "4", "--leak", "0.5"], "1/k");
    for (extra, needle) in [
        (&["--leak", "4"][..], "--rerope"),
        (
            &["--rerope", "4", "--scaling", "yarn"][..],
            "cannot be used with",
        ),
        (&["--group", "4"][..], "--self-extend"),
        (
            &["--self-extend", "4", "--group", "2", "--rerope", "4"][..],
            "cannot be used with",
        ),
        (
            &["--dynamic-yarn", "--scaling", "yarn"][..],
            "cannot be used with",
        ),
        (&["--floor-log", "--log-n"][..], "cannot be used with"),
        (&["--floor-log-beta", "0.2"][..], "--floor-log"),
        (&["--ramp", "llama"][..], "possible values"),
    ] {
        let args = at(extra);
        let out = posenc(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(!out.status.success());
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(needle),
            "{extra:?}"
        );
    }
    let alibi = corpus.join("alibi");
    let alibi_arg = alibi.to_str().unwrap();
    succeeded(&train_tiny(
        corpus,
        &["--scheme", "alibi", "--steps", "1", "--out", alibi_arg],
    ));
    for extra in [
        &["--rerope", "4"][..],
        &["--log-n"][..],
        &["--floor-log"][..],
        &["--dynamic-yarn"][..],
    ] {
        let mut args = vec!["eval", "--checkpoint", alibi_arg, "--corpus", corpus_arg];
        args.extend(extra);
        fails_with(&args, "only for RoPE");
    }
}

#[test]
fn eval_and_export_check_their_inputs_and_outputs_before_work() {
    let tmp = corpus();
    let corpus = tmp.path();
    let out = corpus.join("t5");
    let (corpus_arg, out_arg) = (corpus.to_str().unwrap(), out.to_str().unwrap());
    succeeded(&train_tiny(
        corpus,
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
            "invalid lengths = 200000: allowed is one or more lengths, each from 1 to 65536",
        ),
        (
            &["eval", "--checkpoint", out_arg, "--lengths", "0"],
            "invalid lengths = 0",
        ),
        // the composed reference at 65,536 bytes: [B, H, L, L] tensors of hundreds of GiB
        (
            &[
                "eval",
                "--checkpoint",
                out_arg,
                "--lengths",
                "65536",
                "--kernels",
                "reference",
                "--quiet",
            ],
            "length 65536 (1 window a pass) needs about",
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
    let tmp = corpus();
    let corpus = tmp.path();
    let out = corpus.join("t5");
    let (corpus_arg, out_arg) = (corpus.to_str().unwrap(), out.to_str().unwrap());
    succeeded(&train_tiny(
        corpus,
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
        let mut child = command()
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
