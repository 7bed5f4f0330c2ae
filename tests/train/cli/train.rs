//! `posenc train`: where it writes, the values it refuses, `--resume`, a kill during its
//! periodic saves, and the same weights on any number of threads.

use std::process::Stdio;
use std::time::Duration;

use super::{
    fails_tiny_with, fails_with, kill_once_exists, step_of, succeeded, tiny_flags, tiny_flags_but,
    train_tiny,
};
use crate::support::cli::{command, posenc};
use crate::support::model::corpus;

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

#[test]
fn train_never_writes_where_it_was_not_told_to() {
    let tmp = corpus();
    let corpus = tmp.path();
    let out = corpus.join("ckpt");
    let out_arg = out.to_str().unwrap();
    // --out is required: no default folder (the shipped data/checkpoints/<scheme> was one)
    let missing = posenc(&["train", "--scheme", "alibi", "--steps", "1"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("--out <OUT>"));
    succeeded(&train_tiny(
        corpus,
        &["--scheme", "alibi", "--steps", "2", "--out", out_arg],
    ));
    let weights = std::fs::read(out.join("model.safetensors")).unwrap();
    // an existing checkpoint is replaced only with --force
    fails_tiny_with(
        corpus,
        &["--scheme", "alibi", "--steps", "1", "--out", out_arg],
        "already holds a checkpoint (alibi, step 2 of 2); --resume continues it, --force replaces it",
    );
    assert_eq!(
        std::fs::read(out.join("model.safetensors")).unwrap(),
        weights
    );
    succeeded(&train_tiny(
        corpus,
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
        corpus,
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
    let tmp = corpus();
    let corpus = tmp.path();
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
        fails_tiny_with(corpus, &all, needle);
        assert!(!out.exists(), "{args:?} wrote {}", out.display());
    }
}

#[test]
fn resume_refuses_what_contradicts_its_checkpoint() {
    let tmp = corpus();
    let corpus = tmp.path();
    let out = corpus.join("ckpt");
    let out_arg = out.to_str().unwrap();
    succeeded(&train_tiny(
        corpus,
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
        fails_tiny_with(corpus, &all, needle);
        assert_eq!(
            std::fs::read(out.join("model.safetensors")).unwrap(),
            before
        );
        assert_eq!(step_of(&out), 3, "{args:?}");
    }
    // flags equal to the checkpoint's are fine, and a bare --resume takes the rest from it
    succeeded(&train_tiny(
        corpus,
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
    let tmp = corpus();
    let corpus = tmp.path();
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
    args.extend(tiny_flags(corpus));
    let child = command()
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // kill it once a periodic checkpoint exists, wherever it is in its next save
    kill_once_exists(child, &out.join("config.json"), Duration::from_millis(300));
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
    assert!(step >= 3 && step.is_multiple_of(3), "step {step}");
    // and the run continues from it
    let target = (step + 2).to_string();
    succeeded(&train_tiny(
        corpus,
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

/// Training is reproducible to the bit: the same seed gives the same weights on one thread
/// and on four (each output element is computed in the same order whatever the split of the
/// rows over the threads), so a sweep's shards on different machines and a resumed sweep train
/// the same models.
#[test]
fn training_gives_the_same_weights_on_any_number_of_threads() {
    let tmp = corpus();
    let corpus = tmp.path();
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
        args.extend(tiny_flags_but(corpus, &given));
        let out = command()
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
}
