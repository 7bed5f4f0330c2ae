//! The `posenc` binary (feature `cli`): outputs against the golden fixtures, and one-line
//! errors with a non-zero exit status for bad input.

#[path = "../support/mod.rs"]
pub mod support;

mod pages;

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::cli::{command, posenc};
use support::fixture;

fn json_stdout(args: &[&str]) -> Value {
    let out = posenc(args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
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

/// Fails unless `posenc args` fails within 20 s with one line on stderr, starting with
/// `error: ` and containing `needle`, and nothing on stdout.
fn fails_with_one_line(args: &[&str], needle: &str) {
    let mut child = command()
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run posenc");
    let began = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("{args:?} still running after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert_eq!(out.status.code(), Some(1), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(needle),
        "{args:?}: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{args:?}");
}

#[test]
fn bad_input_prints_one_line_and_fails() {
    let cases: &[(&[&str], &str)] = &[
        (&["dump", "t5-bucket", "--num-buckets", "31"], "num_buckets"),
        (
            &[
                "dump",
                "t5-bucket",
                "--num-buckets",
                "32",
                "--max-distance",
                "8",
            ],
            "max_distance",
        ),
        (&["dump", "t5-bucket", "--min", "5", "--max", "1"], "min"),
        (
            &[
                "dump",
                "deberta-bucket",
                "--bucket-size",
                "256",
                "--max-position",
                "100",
            ],
            "max_position",
        ),
        (&["dump", "alibi-slopes", "--heads", "0"], "heads"),
        (&["dump", "rope-freqs", "--dim", "63"], "dim"),
        (
            &["dump", "rope-freqs", "--dim", "64", "--scaling", "linear"],
            "--factor",
        ),
        (
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
            "factor",
        ),
        (
            &["dump", "sinusoidal", "--positions", "4", "--dim", "5"],
            "dim",
        ),
    ];
    for (args, needle) in cases {
        fails_with_one_line(args, needle);
    }
}

#[test]
fn sizes_past_their_bounds_are_one_line_errors_naming_the_bound() {
    // these overflowed a capacity, aborted an allocation or ran for hours
    fails_with_one_line(
        &["dump", "alibi-slopes", "--heads", "18446744073709551615"],
        "allowed is 1 to 65536",
    );
    fails_with_one_line(
        &["dump", "alibi-slopes", "--heads", "4294967296"],
        "allowed is 1 to 65536",
    );
    fails_with_one_line(
        &["dump", "rope-freqs", "--dim", "4000000000"],
        "from 2 to 65536",
    );
    fails_with_one_line(
        &[
            "dump",
            "t5-bucket",
            "--min=-9223372036854775808",
            "--max=9223372036854775807",
        ],
        "at most 10000000",
    );
    fails_with_one_line(
        &[
            "dump",
            "sinusoidal",
            "--positions",
            "18446744073709551615",
            "--dim",
            "2",
        ],
        "at most 10000000",
    );
}

#[test]
fn the_most_negative_relative_position_gets_the_far_deberta_bucket() {
    // |i64::MIN| overflows an i64; its bucket is the far negative one, as for i64::MIN + 1
    let bucket = |min: &str| {
        let out = json_stdout(&[
            "dump",
            "deberta-bucket",
            &format!("--min={min}"),
            &format!("--max={min}"),
        ]);
        out["bucket"][0].as_i64().unwrap()
    };
    let most = bucket("-9223372036854775808");
    assert!(most < -128, "{most}");
    assert_eq!(most, bucket("-9223372036854775807"));
    assert!(most <= bucket("-1000000"));
}

#[test]
fn argument_errors_keep_the_suggestions_of_the_parser() {
    for (args, needle) in [
        (
            &["dump", "t5-bucket", "--max-distanc", "8"][..],
            "a similar argument exists: '--max-distance'",
        ),
        (
            &["dump", "t5-bucket", "--num-buckets", "many"],
            "invalid value 'many'",
        ),
        (
            &["dump", "rope-freqs", "--dim", "64", "--scaling", "warp"],
            "[possible values: linear, ntk, dynamic, ntk-by-parts, yarn, llama3]",
        ),
    ] {
        let out = posenc(args);
        let stderr = String::from_utf8(out.stderr).unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // a missing command prints the help of its level, as a failure
    for args in [&["dump"][..], &[]] {
        let out = posenc(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("Usage: posenc"));
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    // --help is not an error
    let help = posenc(&["dump", "--help"]);
    assert!(help.status.success());
    assert!(String::from_utf8_lossy(&help.stdout).contains("Usage"));
}

#[test]
fn a_closed_pipe_ends_the_output_quietly() {
    // the reader takes 1000 bytes of several megabytes and closes the pipe (`| head -c 1000`)
    let mut child = command()
        .args(["dump", "sinusoidal", "--positions", "100000", "--dim", "64"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = vec![0u8; 1000];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "{stderr}");
    assert!(head.starts_with(b"{\"table\":[["));
}

/// `posenc report` names its mode, reference and part by flag; a reference or mode the results
/// do not have, or a part that is not one, is a one-line error.
#[test]
fn report_takes_a_mode_and_a_reference() {
    let results = format!("{}/data/results", env!("CARGO_MANIFEST_DIR"));
    let report = |extra: &[&str]| {
        let mut args = vec!["report", "--results", &results];
        args.extend_from_slice(extra);
        posenc(&args)
    };
    let text = |out: std::process::Output| {
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let plain = text(report(&["--reference", "none"]));
    assert!(plain.contains("| model | params | seeds |"), "{plain}");
    assert!(!plain.contains("Each change against"), "{plain}");
    let t5 = text(report(&["--reference", "t5"]));
    assert!(t5.contains("Each change against `t5`'s"), "{t5}");
    let sliding = text(report(&["--mode", "sliding"]));
    assert!(
        sliding.contains("mode `sliding`") && !sliding.contains("se text"),
        "{sliding}"
    );
    let table = text(report(&["--part", "table"]));
    assert!(
        table.contains("| model | params | seeds |") && !table.contains("Each change against"),
        "{table}"
    );
    let details = text(report(&["--part", "details"]));
    assert!(
        details.contains("Each change against `alibi`'s")
            && details.contains("mode `sliding`")
            && !details.contains("mode `nonoverlap`"),
        "{details}"
    );
    for (extra, needle) in [
        (&["--part", "readme"][..], "invalid part = readme"),
        (&["--reference", "bogus"][..], "invalid reference = bogus"),
        (
            &["--mode", "bogus"][..],
            "invalid mode = bogus: allowed is matched, nonoverlap, sliding",
        ),
    ] {
        let out = report(extra);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && stderr.contains(needle),
            "{extra:?}: {stderr}"
        );
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    }
}

/// Every section of the README and of `docs/` between `<!-- begin: posenc report ARGS -->`
/// and `<!-- end: posenc report -->` is that command's output on the shipped results, to the
/// last character (the README's results table, docs/results.md's details): every number and
/// every sentence there follows from `data/results`.
#[test]
fn documents_quote_the_report_of_the_shipped_results() {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut documents = vec![format!("{root}/README.md")];
    for entry in std::fs::read_dir(format!("{root}/docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            documents.push(path.display().to_string());
        }
    }
    let (begin, end) = ("<!-- begin: posenc report ", "<!-- end: posenc report -->");
    let mut quoted = Vec::new();
    for document in &documents {
        let text = std::fs::read_to_string(document).unwrap();
        let mut rest = text.as_str();
        while let Some(at) = rest.find(begin) {
            let line_end = at + rest[at..].find("-->\n").expect("a marker ends its line");
            let args: Vec<String> = std::iter::once("report")
                .chain(rest[at + begin.len()..line_end].split_whitespace())
                .map(|a| match a.starts_with("data/") {
                    true => format!("{root}/{a}"),
                    false => a.to_string(),
                })
                .collect();
            let start = line_end + "-->\n".len();
            let stop = start + rest[start..].find(end).expect("an end marker");
            let out = posenc(&args.iter().map(String::as_str).collect::<Vec<_>>());
            assert!(
                out.status.success(),
                "{document}: posenc {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert_eq!(
                rest[start..stop].trim_end(),
                String::from_utf8(out.stdout).unwrap().trim_end(),
                "{document} differs from `posenc report {}`: paste that command's output between \
                 the markers",
                rest[at + begin.len()..line_end].trim()
            );
            quoted.push(document.clone());
            rest = &rest[stop..];
        }
    }
    for must in ["README.md", "docs/results.md"] {
        assert!(
            quoted.iter().any(|d| d.ends_with(must)),
            "{must} quotes no posenc report: {quoted:?}"
        );
    }
}

/// `tests/golden/configs/NAME.json` (or its v5 form).
fn config_file(name: &str, v5: bool) -> String {
    let sub = if v5 { "v5/" } else { "" };
    format!(
        "{}/tests/golden/configs/{sub}{name}.json",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// `posenc rope --config <file> --json` for a case of `rope_configs.json`.
fn rope_config_json(case: &Value, v5: bool) -> Value {
    let file = config_file(case["name"].as_str().unwrap(), v5);
    let mut args = vec!["rope".to_string(), "--config".into(), file, "--json".into()];
    if let Some(layer) = case["layer_type"].as_str() {
        args.extend(["--layer-type".into(), layer.into()]);
    }
    if let Some(len) = case["seq_len"].as_u64() {
        args.extend(["--seq-len".into(), len.to_string()]);
    }
    json_stdout(&args.iter().map(String::as_str).collect::<Vec<_>>())
}

#[test]
fn rope_config_reads_every_corpus_block_to_the_values_of_transformers() {
    let golden = fixture("rope_configs.json");
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let out = rope_config_json(case, false);
        let close = |ours: f64, reference: f64, what: &str| {
            assert!(
                (ours - reference).abs() <= 1e-5 * reference.abs(),
                "{name} {what}: ours {ours}, transformers {reference}"
            );
        };
        let ours = out["inv_freq"].as_array().unwrap();
        let reference = case["inv_freq"].as_array().unwrap();
        assert_eq!(ours.len(), reference.len(), "{name}");
        for (a, b) in ours.iter().zip(reference) {
            close(a.as_f64().unwrap(), b.as_f64().unwrap(), "inv_freq");
        }
        for key in ["attention_factor", "softmax_multiplier", "logit_multiplier"] {
            close(out[key].as_f64().unwrap(), case[key].as_f64().unwrap(), key);
        }
        assert_eq!(out["rotary_dim"], case["rotary_dim"], "{name}");
        // the v5 form, as transformers writes it, reads the same
        let v5 = rope_config_json(case, true);
        for key in [
            "inv_freq",
            "attention_factor",
            "softmax_multiplier",
            "logit_multiplier",
            "layout",
        ] {
            assert_eq!(out[key], v5[key], "{name} {key}");
        }
    }
}

#[test]
fn rope_config_prints_what_the_configuration_means() {
    let out = posenc(&["rope", "--config", &config_file("deepseek-v3", false)]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for needle in [
        "deepseek_v3, interleaved pairs",
        "rotary_dim 64 (64 of the 192 channels of q.k)",
        "original 4096, extended 163840",
        "cos/sin scale   a = 1.000000",
        "softmax scale   mu = 1.873854",
        "boundary        wavelength L / beta_fast = 128.0",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in\n{text}");
    }
    // one row per pair after the header
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with(char::is_numeric))
            .count(),
        32
    );
}

#[test]
fn rope_config_errors_are_one_line_naming_the_key() {
    let dir = support::temp_dir();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let unknown = write(
        "unknown.json",
        r#"{"model_type": "llama", "head_dim": 64, "max_position_embeddings": 4096,
            "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024, "beta_fastt": 16}}"#,
    );
    fails_with_one_line(
        &["rope", "--config", &unknown],
        "unknown key `rope_scaling.beta_fastt`",
    );
    let top = write(
        "top.json",
        r#"{"head_dim": 64, "max_position_embeddings": 4096, "rope_thetta": 1e4}"#,
    );
    fails_with_one_line(&["rope", "--config", &top], "unknown key `rope_thetta`");
    let disagree = write(
        "disagree.json",
        r#"{"model_type": "gpt_neox", "hidden_size": 768, "num_attention_heads": 12, "rotary_pct": 0.25, "partial_rotary_factor": 0.5}"#,
    );
    fails_with_one_line(&["rope", "--config", &disagree], "rotary_pct");
    fails_with_one_line(
        &["rope", "--config", "/nonexistent/config.json"],
        "config.json",
    );
    let gemma = config_file("gemma-3-4b-it", false);
    fails_with_one_line(
        &["rope", "--config", &gemma, "--layer-type", "chunked"],
        "sliding_attention",
    );
}
