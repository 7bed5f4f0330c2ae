//! Golden tests: our position objects against values produced by the reference Python
//! packages (Hugging Face transformers, torch) with `tests/golden/generate.py`. The fixtures
//! are committed; these tests never run Python.

use posenc::encodings::deberta::{deberta_relative_positions, LogBuckets};
use posenc::encodings::rope::{RopeConfig, RopeScaling, YARN_BETA_FAST, YARN_BETA_SLOW};
use posenc::encodings::xl::rel_shift;
use posenc::prelude::*;
use serde_json::Value;

use crate::support::{fixture, page_says, thousands};

fn ints(v: &Value) -> Vec<i64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_i64().expect("integer"))
        .collect()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number"))
        .collect()
}

/// |a - b| <= rel * |b| (+ a tiny absolute floor): the reference computes in f32 with its own
/// pow/log, so the last bit or two may differ.
fn assert_close(what: &str, ours: f64, reference: f64, rel: f64) {
    let tol = rel * reference.abs() + 1e-30;
    assert!(
        (ours - reference).abs() <= tol,
        "{what}: ours {ours:e}, reference {reference:e}"
    );
}

#[test]
fn t5_buckets_equal_hugging_face() {
    let golden = fixture("t5_buckets.json");
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let nb = case["num_buckets"].as_u64().unwrap() as usize;
        let md = case["max_distance"].as_u64().unwrap() as usize;
        let bidirectional = case["bidirectional"].as_bool().unwrap();
        for (r, b) in ints(&case["relative_position"])
            .into_iter()
            .zip(ints(&case["bucket"]))
        {
            let ours = relative_position_bucket(r, bidirectional, nb, md).unwrap();
            assert_eq!(
                ours as i64, b,
                "T5 ({nb}, {md}, bidirectional={bidirectional}) r={r}"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3606);
    page_says(
        "docs/build.md",
        &format!("{} T5 buckets", thousands(checked)),
    );
    println!("t5: {checked} golden buckets");
}

#[test]
fn deberta_buckets_equal_hugging_face() {
    let golden = fixture("deberta_buckets.json");
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let size = case["bucket_size"].as_u64().unwrap() as usize;
        let max = case["max_position"].as_u64().unwrap() as usize;
        for (r, b) in ints(&case["relative_position"])
            .into_iter()
            .zip(ints(&case["bucket"]))
        {
            assert_eq!(
                make_log_bucket_position(r, size, max).unwrap(),
                b,
                "DeBERTa ({size}, {max}) r={r}"
            );
            checked += 1;
        }
    }
    for m in golden["relative_position_matrices"].as_array().unwrap() {
        let (lq, lk) = (
            m["query_size"].as_u64().unwrap() as usize,
            m["key_size"].as_u64().unwrap() as usize,
        );
        let (size, max) = (
            m["bucket_size"].as_i64().unwrap(),
            m["max_position"].as_i64().unwrap(),
        );
        let buckets =
            (size > 0 && max > 0).then(|| LogBuckets::new(size as usize, max as usize).unwrap());
        let ours = deberta_relative_positions(lq, lk, buckets);
        for (i, row) in m["matrix"].as_array().unwrap().iter().enumerate() {
            for (j, v) in ints(row).into_iter().enumerate() {
                assert_eq!(
                    ours[[i, j]],
                    v,
                    "matrix ({lq}x{lk}, {size}, {max}) at ({i},{j})"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4473);
    page_says(
        "docs/build.md",
        &format!("{} DeBERTa buckets", thousands(checked)),
    );
    println!("deberta: {checked} golden buckets");
}

#[test]
fn alibi_slopes_equal_bloom() {
    let golden = fixture("alibi_slopes.json");
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let heads = case["heads"].as_u64().unwrap() as usize;
        let ours = alibi_slopes(heads).unwrap();
        let reference = floats(&case["slopes"]);
        assert_eq!(ours.len(), reference.len());
        for (h, (&m, &r)) in ours.iter().zip(&reference).enumerate() {
            assert_close(&format!("ALiBi {heads} heads, head {h}"), m as f64, r, 1e-6);
            checked += 1;
        }
    }
    for case in golden["bloom_alibi"].as_array().unwrap() {
        // Bloom adds m_h * key_position; ours is -m_h |i - j|: for the last query of a causal
        // row they differ by the per-row constant m_h * (L - 1).
        let heads = case["heads"].as_u64().unwrap() as usize;
        let keys = ints(&case["key_positions"]);
        let lk = keys.len();
        let ours = alibi_bias(heads, 1, lk).unwrap();
        let slopes = alibi_slopes(heads).unwrap();
        for (h, row) in case["alibi"].as_array().unwrap().iter().enumerate() {
            for (j, bloom) in floats(row).into_iter().enumerate() {
                let shifted = ours[[h, 0, j]] as f64 + slopes[h] as f64 * (lk - 1) as f64;
                assert!(
                    (shifted - bloom).abs() < 1e-5,
                    "Bloom alibi {heads} heads, head {h}, key {j}"
                );
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 236);
    page_says("docs/build.md", &format!("{checked} ALiBi values"));
    println!("alibi: {checked} golden values");
}

fn scaling_from_case(case: &Value) -> RopeScaling {
    let p = &case["params"];
    let max_pos = case["max_position_embeddings"].as_u64().unwrap() as usize;
    let original = p["original_max_position_embeddings"]
        .as_u64()
        .map_or(max_pos, |v| v as usize);
    let f = |key: &str| p[key].as_f64();
    match case["rope_type"].as_str().unwrap() {
        "default" => RopeScaling::None,
        "linear" => RopeScaling::Linear {
            factor: f("factor").unwrap(),
        },
        "dynamic" => RopeScaling::Dynamic {
            factor: f("factor").unwrap(),
            original_max: max_pos,
        },
        "yarn" => RopeScaling::Yarn {
            factor: case["effective_factor"].as_f64().unwrap(),
            original_max: original,
            // HF falls back to the defaults for missing (or zero) betas
            beta_fast: f("beta_fast")
                .filter(|&b| b != 0.0)
                .unwrap_or(YARN_BETA_FAST),
            beta_slow: f("beta_slow")
                .filter(|&b| b != 0.0)
                .unwrap_or(YARN_BETA_SLOW),
            mscale: f("mscale"),
            mscale_all_dim: f("mscale_all_dim"),
            attention_factor: f("attention_factor"),
            truncate: p["truncate"].as_bool().unwrap_or(true),
        },
        "llama3" => RopeScaling::Llama3 {
            factor: f("factor").unwrap(),
            original_max: original,
            low_freq_factor: f("low_freq_factor").unwrap(),
            high_freq_factor: f("high_freq_factor").unwrap(),
        },
        other => panic!("unknown rope_type {other}"),
    }
}

#[test]
fn rope_frequencies_equal_hugging_face() {
    let golden = fixture("rope.json");
    let mut checked = 0;
    let mut worst_ulps = 0u32;
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let dim = case["dim"].as_u64().unwrap() as usize;
        let base = case["base"].as_f64().unwrap();
        let config = RopeConfig::with_scaling(dim, base, scaling_from_case(case)).unwrap();
        let seq_len = case["seq_len"].as_u64().map(|s| s as usize);
        let ours = config.frequencies(seq_len).unwrap();
        let reference = floats(&case["inv_freq"]);
        assert_eq!(ours.inv_freq.len(), reference.len(), "{name}");
        for (i, (&a, &b)) in ours.inv_freq.iter().zip(&reference).enumerate() {
            let ulps = (a.to_bits() as i64 - (b as f32).to_bits() as i64).unsigned_abs() as u32;
            worst_ulps = worst_ulps.max(ulps);
            assert!(
                ulps <= 1,
                "{name} inv_freq[{i}]: ours {a:e}, reference {b:e} ({ulps} ulps)"
            );
            checked += 1;
        }
        assert_close(
            &format!("{name} attention factor"),
            ours.attention_factor as f64,
            case["attention_factor"].as_f64().unwrap(),
            1e-6,
        );
        checked += 1;
    }
    assert_eq!(checked, 772 + 22);
    let configurations = golden["cases"].as_array().unwrap().len();
    page_says(
        "docs/build.md",
        &format!("{checked} RoPE values ({configurations} configurations"),
    );
    println!("rope: {checked} golden values, worst difference {worst_ulps} ulps");
}

#[test]
fn yarn_truncated_and_exact_equal_hugging_face_over_a_grid() {
    // head dims 32..256, original lengths 2048..131072, bases 1e4 and 1e6, truncate both ways
    let golden = fixture("rope_yarn_grid.json");
    let (mut checked, mut exact_cases, mut worst) = (0, 0, 0u64);
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let dim = case["dim"].as_u64().unwrap() as usize;
        let base = case["base"].as_f64().unwrap();
        let scaling = scaling_from_case(case);
        if let RopeScaling::Yarn {
            truncate: false, ..
        } = scaling
        {
            exact_cases += 1;
        }
        let ours = RopeConfig::with_scaling(dim, base, scaling)
            .unwrap()
            .frequencies(None)
            .unwrap();
        for (i, (&a, b)) in ours
            .inv_freq
            .iter()
            .zip(floats(&case["inv_freq"]))
            .enumerate()
        {
            // f32 powers by two libraries: up to 2 ulps inside the ramp (1 elsewhere)
            let ulps = (a.to_bits() as i64 - (b as f32).to_bits() as i64).unsigned_abs();
            assert!(
                ulps <= 2,
                "{name} inv_freq[{i}]: ours {a:e}, reference {b:e}"
            );
            worst = worst.max(ulps);
            checked += 1;
        }
        assert_close(
            name,
            ours.attention_factor as f64,
            case["attention_factor"].as_f64().unwrap(),
            1e-6,
        );
    }
    assert_eq!((checked, exact_cases), (3840, 32));
    page_says(
        "docs/build.md",
        &format!("{} YaRN values", thousands(checked)),
    );
    println!("yarn grid: {checked} golden values, worst difference {worst} ulps");
}

#[test]
fn ntk_by_parts_equals_hugging_face_yarn_with_attention_factor_one() {
    // transformers has no rope_type for it: YaRN with attention_factor 1.0 given explicitly
    let golden = fixture("rope_ntk_by_parts.json");
    let (mut checked, mut worst) = (0, 0u64);
    for case in golden["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let (dim, base) = (
            case["dim"].as_u64().unwrap() as usize,
            case["base"].as_f64().unwrap(),
        );
        let RopeScaling::Yarn {
            factor,
            original_max,
            beta_fast,
            beta_slow,
            attention_factor: Some(one),
            truncate,
            ..
        } = scaling_from_case(case)
        else {
            panic!("{name}: not YaRN with an explicit attention factor");
        };
        assert_eq!(one, 1.0, "{name}");
        let parts = RopeScaling::NtkByParts {
            factor,
            original_max,
            beta_fast,
            beta_slow,
            truncate,
        };
        let ours = RopeConfig::with_scaling(dim, base, parts)
            .unwrap()
            .frequencies(None)
            .unwrap();
        assert_eq!(ours.attention_factor, 1.0, "{name}");
        assert_eq!(case["attention_factor"].as_f64(), Some(1.0), "{name}");
        for (i, (&a, b)) in ours
            .inv_freq
            .iter()
            .zip(floats(&case["inv_freq"]))
            .enumerate()
        {
            // f32 powers by two libraries: 2 ulps allowed as for the YaRN grid (0 measured here)
            let ulps = (a.to_bits() as i64 - (b as f32).to_bits() as i64).unsigned_abs();
            assert!(
                ulps <= 2,
                "{name} inv_freq[{i}]: ours {a:e}, reference {b:e}"
            );
            worst = worst.max(ulps);
            checked += 1;
        }
    }
    assert_eq!(checked, 2784);
    println!("ntk-by-parts: {checked} golden values, worst difference {worst} ulps");
}

#[test]
fn xl_rel_shift_equals_the_reference_code() {
    let golden = fixture("xl_rel_shift.json");
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let rows = |v: &Value| -> Array2<f32> {
            let rows: Vec<Vec<f64>> = v.as_array().unwrap().iter().map(floats).collect();
            Array2::from_shape_fn((rows.len(), rows[0].len()), |(i, j)| rows[i][j] as f32)
        };
        let (x, expected) = (rows(&case["x"]), rows(&case["shifted"]));
        let ours = rel_shift(x.view());
        assert_eq!(ours, expected);
        checked += expected.len();
    }
    assert_eq!(checked, 31);
    page_says(
        "docs/build.md",
        &format!("{checked} Transformer-XL `rel_shift` values"),
    );
    println!("xl: {checked} golden values");
}

/// A `[rows][cols]` JSON matrix as `f32`.
fn matrix32(v: &Value) -> Array2<f32> {
    let rows: Vec<Vec<f32>> = v
        .as_array()
        .expect("rows")
        .iter()
        .map(|r| floats(r).into_iter().map(|x| x as f32).collect())
        .collect();
    let cols = rows.first().map_or(0, Vec::len);
    Array2::from_shape_vec((rows.len(), cols), rows.concat()).expect("a rectangular matrix")
}

/// x-transformers' `DataDependentAlibi` (its gate loaded, torch's `[heads, dim]` transposed)
/// on its seeded input: the whole `[H, n, n]` bias $C_i - C_j$, future keys included, to 2e-6
/// (float32 products and running sums in another order).
#[test]
fn dd_alibi_equals_x_transformers() {
    let golden = fixture("dd_alibi.json");
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let gate = DataDependentAlibi::from_parts(
            matrix32(&case["weight"]).reversed_axes(),
            Array1::from(
                floats(&case["bias"])
                    .into_iter()
                    .map(|x| x as f32)
                    .collect::<Vec<_>>(),
            ),
        )
        .unwrap();
        let ours = gate.bias(matrix32(&case["x"]).view()).unwrap();
        let want: Vec<f64> = case["attn_bias"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|h| h.as_array().unwrap().iter().flat_map(floats))
            .collect();
        assert_eq!(ours.len(), want.len());
        for (&a, &b) in ours.iter().zip(&want) {
            assert!(
                (a as f64 - b).abs() < 2e-6,
                "dd_alibi case {}: {a} vs {b}",
                case["seed"]
            );
        }
        checked += want.len();
    }
    assert_eq!(checked, 2 * 36 + 4 * 81 + 3 * 49);
}

/// A `[heads][rows][cols]` JSON array as one `[rows, cols]` matrix per head.
fn heads32(v: &Value) -> Vec<Array2<f32>> {
    v.as_array().expect("heads").iter().map(matrix32).collect()
}

/// x-transformers' `CoPE` as its `Attend` applies it (logits $q k^\top / \sqrt{d_h}$, future
/// keys masked before the gates), on seeded queries, keys and embeddings: the term of every
/// pair a query sees, counts below and above `max_pos - 1`, to 1e-5 (sums of sigmoids in
/// another order).
#[test]
fn cope_equals_x_transformers() {
    let golden = fixture("cope.json");
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let cope = Cope::from_table(matrix32(&case["pos_emb"])).unwrap();
        let (qs, ks, want) = (
            heads32(&case["q"]),
            heads32(&case["k"]),
            heads32(&case["term"]),
        );
        for ((q, k), want) in qs.iter().zip(&ks).zip(&want) {
            let c = 1.0 / (q.ncols() as f32).sqrt();
            let scores = q.dot(&k.t()) * c;
            let ours = cope.term(q.view(), scores.view()).unwrap();
            for ((i, j), &b) in want.indexed_iter() {
                if j <= i {
                    let a = ours[[i, j]];
                    assert!(
                        (a - b).abs() <= 1e-5 * (1.0 + b.abs()),
                        "cope case {} ({i}, {j}): {a} vs {b}",
                        case["seed"]
                    );
                    checked += 1;
                }
            }
            // through the reference attention: the same term, scaled back by c
            let term = cope.score_term(0, q.view(), k.view()).unwrap().unwrap() * c;
            assert!((term[[q.nrows() - 1, 0]] - ours[[q.nrows() - 1, 0]]).abs() < 1e-5);
        }
    }
    assert_eq!(checked, 2 * 21 + 3 * 78 + 45);
}
