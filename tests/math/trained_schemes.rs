//! The trained schemes of the byte LM that have a reference package, against its values
//! (`tests/golden/generate.py`): dynamic position bias (x-transformers), partial rotary
//! (transformers' GPT-NeoX, x-transformers' `rotary_emb_dim`), p-RoPE (transformers'
//! `"proportional"` RoPE) and the NoPE layers of the RoPE/NoPE hybrids (Llama 4, Cohere 2);
//! and the limits where partial RoPE and p-RoPE are RoPE or NoPE, and where data-dependent
//! ALiBi is ALiBi and CoPE counts relative positions (property tests).

use ndarray::{Array1, Array2};
use posenc::encodings::alibi::Alibi;
use posenc::encodings::cope::Cope;
use posenc::encodings::dd_alibi::{log_sigmoid, DataDependentAlibi};
use posenc::encodings::dpb::{DpbLayer, DpbNorm, DynamicPositionBias};
use posenc::encodings::nope::is_nope_layer;
use posenc::encodings::rope::{
    apply_rope_partial, p_rope_inv_freq, p_rope_pairs, partial_inv_freq, PairRope, RopeConfig,
    RopeLayout,
};
use posenc::prelude::{attention, PositionScheme};
use proptest::prelude::*;
use serde_json::Value;

use crate::support::{fixture, normal};

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("array")
        .iter()
        .map(|x| x.as_f64().expect("number") as f32)
        .collect()
}

/// A `[rows][cols]` JSON matrix.
fn matrix(v: &Value) -> Array2<f32> {
    let rows: Vec<Vec<f32>> = v.as_array().expect("rows").iter().map(floats).collect();
    let cols = rows.first().map_or(0, Vec::len);
    Array2::from_shape_vec((rows.len(), cols), rows.concat()).expect("a rectangular matrix")
}

/// The largest |a - b| over two slices of equal length.
fn max_error(a: impl IntoIterator<Item = f32>, b: impl IntoIterator<Item = f32>) -> f32 {
    a.into_iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// x-transformers' `DynamicPositionBias` (its weights loaded, torch's `[out, in]` transposed):
/// the whole `[H, n, n]` bias, future keys included, with and without log distance and norm,
/// depths 1 to 3, to 2e-6 (float32 products summed in another order).
#[test]
fn dpb_equals_x_transformers() {
    let golden = fixture("dpb.json");
    let mut checked = 0;
    for case in golden["cases"].as_array().unwrap() {
        let layers: Vec<DpbLayer> = case["layers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| DpbLayer {
                weight: matrix(&l["weight"]).reversed_axes(),
                bias: Array1::from(floats(&l["bias"])),
                norm: l.get("gamma").map(|g| DpbNorm {
                    gamma: Array1::from(floats(g)),
                    beta: l.get("beta").map(|b| Array1::from(floats(b))),
                }),
            })
            .collect();
        let dpb = DynamicPositionBias::from_layers(
            case["log_distance"].as_bool().unwrap(),
            layers,
            matrix(&case["out_weight"]).reversed_axes(),
            Array1::from(floats(&case["out_bias"])),
        )
        .unwrap();
        let n = case["n"].as_u64().unwrap() as usize;
        let ours = dpb.bias_matrix(n).unwrap();
        let want: Vec<f32> = case["bias"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|h| h.as_array().unwrap().iter().flat_map(floats))
            .collect();
        assert_eq!(ours.len(), want.len());
        let err = max_error(ours.iter().copied(), want.iter().copied());
        assert!(err < 2e-6, "dpb case {case}: error {err:e}");
        // the compact vector over causal distances is the same function
        let beta = dpb.distance_bias(n).unwrap();
        for h in 0..dpb.heads() {
            for d in 0..n {
                assert_eq!(beta[[h, d]], ours[[h, n - 1, n - 1 - d]]);
            }
        }
        checked += want.len();
    }
    assert_eq!(checked, 4 * 400 + 4 * 81 + 2 * 49 + 3 * 144 + 25);
}

/// Partial rotary as GPT-NeoX (transformers) and x-transformers compute it: the inverse
/// frequencies of the rotary width, and the rotated rows, channels past it copied.
#[test]
fn partial_rotary_equals_transformers_and_x_transformers() {
    let golden = fixture("rope_partial.json");
    let cases = golden["cases"].as_array().unwrap();
    for case in cases {
        let head_dim = case["head_dim"].as_u64().unwrap() as usize;
        let base = case["base"].as_f64().unwrap();
        let want_freq = floats(&case["inv_freq"]);
        let rotary = 2 * want_freq.len();
        let layout = match case["layout"].as_str().unwrap() {
            "half" => {
                // the model's vector over all pairs starts with the same frequencies
                let factor = case["partial_rotary_factor"].as_f64().unwrap();
                let ours = partial_inv_freq(head_dim, base, factor).unwrap();
                assert!(ours[rotary / 2..].iter().all(|&t| t == 0.0));
                assert!(max_error(ours[..rotary / 2].to_vec(), want_freq.clone()) < 1e-7);
                RopeLayout::Half
            }
            _ => RopeLayout::Interleaved,
        };
        let freqs = RopeConfig::new(rotary, base)
            .unwrap()
            .frequencies(None)
            .unwrap();
        for (a, b) in freqs.inv_freq.iter().zip(&want_freq) {
            assert!((a - b).abs() <= 1e-6 * b.abs(), "{case}: {a} vs {b}");
        }
        let x = matrix(&case["x"]);
        let positions: Vec<f64> = (0..x.nrows()).map(|p| p as f64).collect();
        let ours = apply_rope_partial(x.view(), &positions, &freqs, layout).unwrap();
        let want = matrix(&case["rotated"]);
        let err = max_error(ours.iter().copied(), want.iter().copied());
        assert!(err < 2e-6, "{}: error {err:e}", case["reference"]);
        // the channels past the rotary width are the input's
        assert_eq!(
            ours.slice(ndarray::s![.., rotary..]),
            x.slice(ndarray::s![.., rotary..])
        );
    }
    assert_eq!(cases.len(), 7);
}

/// p-RoPE's frequencies as transformers' `"proportional"` RoPE: RoPE's own for the fastest
/// $\lfloor p d / 2 \rfloor$ pairs, then exact zeros; $p = 1$ is RoPE, $p = 0$ NoPE.
#[test]
fn p_rope_equals_transformers_proportional() {
    let golden = fixture("rope_proportional.json");
    for case in golden["cases"].as_array().unwrap() {
        let dim = case["dim"].as_u64().unwrap() as usize;
        let base = case["base"].as_f64().unwrap();
        let p = case["params"]["partial_rotary_factor"].as_f64().unwrap();
        let ours = p_rope_inv_freq(dim, base, p).unwrap();
        let want = floats(&case["inv_freq"]);
        assert_eq!(ours.len(), want.len());
        for (i, (a, b)) in ours.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6 * b.abs(),
                "{}: pair {i}: {a} vs {b}",
                case["name"]
            );
        }
        assert_eq!(case["attention_factor"].as_f64().unwrap(), 1.0);
    }
}

/// The NoPE layers of a hybrid with a NoPE layer every $n$: Llama 4's `no_rope_layers` and
/// Cohere 2's `layer_types`, for several depths and $n$.
#[test]
fn nope_layers_equal_llama4_and_cohere2() {
    let golden = fixture("rope_nope_layers.json");
    for case in golden["cases"].as_array().unwrap() {
        let layers = case["layers"].as_u64().unwrap() as usize;
        let every = case["every"].as_u64().unwrap() as usize;
        let ours: Vec<u64> = (0..layers)
            .filter(|&l| is_nope_layer(l, every))
            .map(|l| l as u64)
            .collect();
        for key in ["llama4_nope", "cohere2_nope"] {
            let want: Vec<u64> = case[key]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_u64().unwrap())
                .collect();
            assert_eq!(ours, want, "{key}: {layers} layers, every {every}");
        }
    }
}

proptest! {
    /// Partial RoPE with factor 1 and p-RoPE keeping every pair are RoPE's frequencies bit for
    /// bit; p-RoPE keeping none rotates nothing (NoPE): the scores through the reference
    /// attention are then the unrotated $q \cdot k$.
    #[test]
    fn partial_and_p_rope_limits(half in 1usize..=64, base in 2.0f64..1e6, seed in 0u64..1000) {
        let d = 2 * half;
        let rope = RopeConfig::new(d, base).unwrap().frequencies(None).unwrap().inv_freq;
        prop_assert_eq!(&partial_inv_freq(d, base, 1.0).unwrap(), &rope);
        prop_assert_eq!(&p_rope_inv_freq(d, base, 1.0).unwrap(), &rope);
        let none = PairRope::p_rope(d, base, 0.0).unwrap();
        prop_assert!(none.inv_freq.iter().all(|&t| t == 0.0));
        let (q, k) = (normal(6, d, seed), normal(6, d, seed + 1));
        let (qr, kr) = none.transform_qk(q.view(), k.view()).unwrap();
        prop_assert_eq!((qr, kr), (q, k));
        // p-RoPE keeps a prefix of RoPE's pairs, as many as floor(p d / 2)
        let p = (seed % 11) as f64 / 10.0;
        let kept = p_rope_inv_freq(d, base, p).unwrap();
        let n = p_rope_pairs(d, p).unwrap();
        prop_assert_eq!(&kept[..n], &rope[..n]);
        prop_assert!(kept[n..].iter().all(|&t| t == 0.0));
    }

    /// Data-dependent ALiBi with a gate that ignores its input ($w = 0$) gives every token the
    /// log gate $f_h = \ln\sigma(b_h)$, and its bias is ALiBi's with slopes $m_h = -f_h$ on
    /// every pair a causal query sees, through the reference attention too.
    #[test]
    fn dd_alibi_with_constant_gates_is_alibi(
        gate_bias in proptest::collection::vec(-6.0f32..8.0, 1..5),
        d in 1usize..10,
        l in 1usize..14,
        seed in 0u64..1000,
    ) {
        let heads = gate_bias.len();
        let gate = DataDependentAlibi::from_parts(
            Array2::zeros((d, heads)),
            Array1::from(gate_bias.clone()),
        )
        .unwrap();
        let x = normal(l, d, seed);
        let slopes: Vec<f32> = gate_bias.iter().map(|&b| -log_sigmoid(b)).collect();
        let alibi = Alibi::from_slopes(slopes).unwrap();
        let bias = gate.bias(x.view()).unwrap();
        let applied = gate.applied(x.view()).unwrap();
        let (q, k, v) = (normal(l, 4, seed + 1), normal(l, 4, seed + 2), normal(l, 4, seed + 3));
        for h in 0..heads {
            let want = alibi.bias(h, l, l).unwrap();
            for i in 0..l {
                for j in 0..=i {
                    let tol = 1e-5 * (1.0 + want[[i, j]].abs());
                    prop_assert!((bias[[h, i, j]] - want[[i, j]]).abs() <= tol,
                        "head {} ({}, {}): {} vs {}", h, i, j, bias[[h, i, j]], want[[i, j]]);
                }
            }
            let ours = attention(q.view(), k.view(), v.view(), &applied, h, true).unwrap();
            let theirs = attention(q.view(), k.view(), v.view(), &alibi, h, true).unwrap();
            for (a, b) in ours.probs.iter().zip(theirs.probs.iter()) {
                prop_assert!((a - b).abs() < 1e-5);
            }
        }
    }

    /// CoPE with every gate at 1 (logits of 50: $\sigma = 1$ in `f32`) counts the keys from
    /// $j$ to $i$, both ends included: $p_{ij} = \min(i - j + 1, P - 1)$, an integer, so the
    /// term is exactly $q_i \cdot e_{p_{ij}}$, a relative position embedding.
    #[test]
    fn cope_with_every_gate_open_is_a_relative_embedding(
        p in 1usize..12,
        d in 1usize..8,
        l in 1usize..16,
        seed in 0u64..1000,
    ) {
        let e = normal(p, d, seed);
        let cope = Cope::from_table(e.clone()).unwrap();
        let q = normal(l, d, seed + 1);
        let z = cope.term(q.view(), Array2::from_elem((l, l), 50.0).view()).unwrap();
        for i in 0..l {
            for j in 0..=i {
                let n = (i - j + 1).min(p - 1);
                let want = q.row(i).dot(&e.row(n));
                prop_assert!((z[[i, j]] - want).abs() <= 1e-5 * (1.0 + want.abs()));
            }
        }
    }
}
