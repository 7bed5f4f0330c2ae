//! The `posenc` binary: outputs against the golden fixtures, and one-line errors with a
//! non-zero exit status for bad input.

use std::process::{Command, Output};

use serde_json::Value;

fn posenc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_posenc"))
        .args(args)
        .output()
        .expect("run posenc")
}

fn json_stdout(args: &[&str]) -> Value {
    let out = posenc(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn fixture(name: &str) -> Value {
    let path = format!("{}/tests/golden/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn t5_dump_equals_hugging_face_in_both_directions() {
    let golden = fixture("t5_buckets.json");
    for case in golden["cases"].as_array().unwrap() {
        let nb = case["num_buckets"].to_string();
        let md = case["max_distance"].to_string();
        let mut args = vec![
            "dump",
            "t5-bucket",
            "--num-buckets",
            &nb,
            "--max-distance",
            &md,
            "--min",
            "-300",
            "--max",
            "300",
        ];
        if !case["bidirectional"].as_bool().unwrap() {
            args.push("--causal");
        }
        let out = json_stdout(&args);
        assert_eq!(out["relative_position"], case["relative_position"]);
        assert_eq!(out["bucket"], case["bucket"], "{args:?}");
    }
}

#[test]
fn deberta_dump_equals_hugging_face() {
    let golden = fixture("deberta_buckets.json");
    for case in golden["cases"].as_array().unwrap() {
        let size = case["bucket_size"].to_string();
        let max = case["max_position"].to_string();
        let out = json_stdout(&[
            "dump",
            "deberta-bucket",
            "--bucket-size",
            &size,
            "--max-position",
            &max,
            "--min",
            "-1100",
            "--max",
            "1100",
        ]);
        assert_eq!(out["bucket"], case["bucket"]);
    }
}

#[test]
fn alibi_dump_reads_back_to_the_same_f32_slopes() {
    let golden = fixture("alibi_slopes.json");
    for case in golden["cases"].as_array().unwrap() {
        let heads = case["heads"].to_string();
        let out = json_stdout(&["dump", "alibi-slopes", "--heads", &heads]);
        let ours: Vec<f32> = out["slopes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        let reference: Vec<f32> = case["slopes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap() as f32)
            .collect();
        for (a, b) in ours.iter().zip(&reference) {
            assert!((a - b).abs() <= 1e-6 * b.abs(), "{heads} heads: {a} vs {b}");
        }
    }
}

#[test]
fn rope_dump_matches_the_golden_yarn_and_llama3_cases() {
    let golden = fixture("rope.json");
    let find = |name: &str| {
        golden["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()
            .clone()
    };
    let cases = [
        (
            "yarn_a_f4_defaults",
            vec![
                "--scaling",
                "yarn",
                "--factor",
                "4",
                "--original-max",
                "2048",
                "--max-position",
                "8192",
            ],
        ),
        (
            "llama3_1_f8_d128",
            vec![
                "--dim",
                "128",
                "--base",
                "500000",
                "--scaling",
                "llama3",
                "--factor",
                "8",
            ],
        ),
        (
            "dynamic_f2_seq4096",
            vec!["--scaling", "dynamic", "--factor", "2", "--seq-len", "4096"],
        ),
        ("linear_f4", vec!["--scaling", "linear", "--factor", "4"]),
    ];
    for (name, extra) in cases {
        let case = find(name);
        let mut args = vec!["dump", "rope-freqs"];
        if !extra.contains(&"--dim") {
            args.extend(["--dim", "64"]);
        }
        args.extend(extra.iter().copied());
        let out = json_stdout(&args);
        let ours = out["inv_freq"].as_array().unwrap();
        let reference = case["inv_freq"].as_array().unwrap();
        assert_eq!(ours.len(), reference.len(), "{name}");
        for (a, b) in ours.iter().zip(reference) {
            let (a, b) = (a.as_f64().unwrap() as f32, b.as_f64().unwrap() as f32);
            let ulps = (a.to_bits() as i64 - b.to_bits() as i64).abs();
            assert!(ulps <= 1, "{name}: {a} vs {b}");
        }
        let af = out["attention_factor"].as_f64().unwrap();
        assert!(
            (af - case["attention_factor"].as_f64().unwrap()).abs() < 1e-6,
            "{name}"
        );
    }
}

#[test]
fn sinusoidal_dump_is_the_table() {
    let out = json_stdout(&["dump", "sinusoidal", "--positions", "4", "--dim", "6"]);
    let table = out["table"].as_array().unwrap();
    assert_eq!(table.len(), 4);
    assert_eq!(table[0], serde_json::json!([0.0, 1.0, 0.0, 1.0, 0.0, 1.0]));
    let x = table[2][0].as_f64().unwrap();
    assert!((x - 2f64.sin()).abs() < 1e-7);
}

#[test]
fn csv_output_has_a_header_and_one_row_per_position() {
    let out = posenc(&[
        "dump",
        "t5-bucket",
        "--min",
        "-1",
        "--max",
        "1",
        "--format",
        "csv",
    ]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        "relative_position,bucket\n-1,1\n0,0\n1,17\n"
    );
}

#[test]
fn bad_input_prints_one_line_and_fails() {
    let cases: &[&[&str]] = &[
        &["dump", "t5-bucket", "--num-buckets", "31"],
        &[
            "dump",
            "t5-bucket",
            "--num-buckets",
            "32",
            "--max-distance",
            "8",
        ],
        &["dump", "t5-bucket", "--min", "5", "--max", "1"],
        &["dump", "t5-bucket", "--bogus"],
        &["dump", "t5-bucket", "--num-buckets", "many"],
        &[
            "dump",
            "deberta-bucket",
            "--bucket-size",
            "256",
            "--max-position",
            "100",
        ],
        &["dump", "alibi-slopes", "--heads", "0"],
        &["dump", "rope-freqs", "--dim", "63"],
        &["dump", "rope-freqs", "--dim", "64", "--scaling", "linear"],
        &[
            "dump",
            "rope-freqs",
            "--dim",
            "64",
            "--scaling",
            "yarn",
            "--factor",
            "-1",
        ],
        &[
            "dump",
            "rope-freqs",
            "--dim",
            "64",
            "--scaling",
            "warp",
            "--factor",
            "2",
        ],
        &["dump", "sinusoidal", "--positions", "4", "--dim", "5"],
        &["dump"],
        &[],
    ];
    for args in cases {
        let out = posenc(args);
        assert!(!out.status.success(), "{args:?} should fail");
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}
