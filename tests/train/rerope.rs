//! RoPE extended at inference in the language model: ReRoPE, Leaky ReRoPE and Self-Extend
//! (two passes merged at a window inside the tiled attention), dynamic YaRN with a key cache,
//! and the query temperatures (log-$n$, floor-log). The fused
//! attention equals the composed reference and the ndarray [`ReRope::scores`] at lengths that
//! cross the 32-row tiles, for several $w$ and $k$; $w \ge L$ and $k = 1$ are RoPE; log-$n$
//! is RoPE on queries scaled by $\tau_m$; a trained checkpoint evaluated with ReRoPE at
//! $w \ge L$ scores as plain RoPE; ReRoPE and log-$n$ on a model that is not RoPE are errors.

use burn::tensor::{Device, Tensor, TensorData};
use ndarray::{s, Array2, ArrayView2};
use posenc::encodings::rope::{
    apply_rope, ReRope, Rope, RopeConfig, RopeLayout, RopeScaling, ScalingKind, SelfExtend,
};
use posenc::lm::checkpoint::WeightDtype;
use posenc::lm::config::{TemperatureKind, SWEEP_RAMP};
use posenc::lm::eval::{
    evaluate, EvalOptions, Mode, ReRopeWindow, RopeInference, SelfExtendWindow,
};
use posenc::lm::model::schemes::rope;
use posenc::lm::model::{to_vec, Kernels, ModelConfig, Ops, Scheme};
use posenc::lm::train::{load_model, train};

use crate::eval::run_scheme;
use crate::support::model::corpus;
use crate::support::uniform;

/// Queries, keys and values `[B, H, L, D]` of the tiny RoPE model's heads (B = 2, H = 2,
/// D = 8), seeded, as tensors and as values.
fn qkv(l: usize, seed: u64) -> ([Tensor<4>; 3], [Vec<f32>; 3]) {
    let device = Device::flex();
    let values = [0, 1, 2].map(|t| uniform(2 * 2 * l * 8, seed * 3 + t, 1.5));
    let tensors = values
        .clone()
        .map(|v| Tensor::from_data(TensorData::new(v, [2, 2, l, 8]), &device));
    (tensors, values)
}

/// The attention output `[B, H, L, D]` of the tiny RoPE model's terms with `inference` at
/// length `l`, by `ops`.
fn attend(ops: Ops, qkv: &[Tensor<4>; 3], l: usize, inference: &RopeInference) -> Vec<f32> {
    let c = ModelConfig::tiny(Scheme::Rope);
    let device = Device::flex();
    let objects =
        rope::Objects::at_inference(&c, l, RopeScaling::None, inference, &device).unwrap();
    let [q, k, v] = qkv.clone();
    to_vec(ops.attention(q, k, v, rope::terms(&objects), c.score_scale()))
}

/// The same output from the ndarray reference: per (batch, head) the two-pass scores of
/// [`ReRope::scores`] (RoPE's when `rerope` is `None`), scaled, the causal softmax in `f64`,
/// times the values.
fn oracle(values: &[Vec<f32>; 3], l: usize, rerope: Option<ReRopeWindow>) -> Vec<f64> {
    // RoPE itself is Leaky ReRoPE with k = 1
    let plain = plain_rope();
    let r = rerope
        .map_or(ReRope::leaky(plain, 1, 1.0), |w| w.over(plain))
        .unwrap();
    oracle_of(values, l, &|q, k| r.scores(q, k).unwrap())
}

/// The tiny RoPE model's RoPE on ndarray (half layout).
fn plain_rope() -> Rope {
    let c = ModelConfig::tiny(Scheme::Rope);
    Rope::new(
        RopeConfig::new(c.head_dim(), c.rope_base).unwrap(),
        RopeLayout::Half,
    )
}

/// Unscaled scores `[L, L]` of one head's queries and keys.
type ScoresOf<'a> = dyn Fn(ArrayView2<f32>, ArrayView2<f32>) -> Array2<f32> + 'a;

/// The attention output `[B, H, L, D]` of the unscaled scores `scores(q, k)` of each (batch,
/// head): scaled by the model's $1/\sqrt d$, the causal softmax in `f64`, times the values.
fn oracle_of(values: &[Vec<f32>; 3], l: usize, scores: &ScoresOf) -> Vec<f64> {
    let c = ModelConfig::tiny(Scheme::Rope);
    let d = c.head_dim();
    let head = |t: &[f32], bh: usize| {
        Array2::from_shape_vec((l, d), t[bh * l * d..(bh + 1) * l * d].to_vec()).unwrap()
    };
    let mut out = Vec::new();
    for bh in 0..4 {
        let (q, k, v) = (
            head(&values[0], bh),
            head(&values[1], bh),
            head(&values[2], bh),
        );
        let scores = scores(q.view(), k.view());
        for i in 0..l {
            let row: Vec<f64> = scores
                .slice(s![i, ..=i])
                .iter()
                .map(|&x| f64::from(x) * f64::from(c.score_scale()))
                .collect();
            let max = row.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
            let sum: f64 = row.iter().map(|x| (x - max).exp()).sum();
            for col in 0..d {
                out.push(
                    row.iter()
                        .enumerate()
                        .map(|(j, x)| (x - max).exp() / sum * f64::from(v[[j, col]]))
                        .sum(),
                );
            }
        }
    }
    out
}

/// $\max_i |a_i - b_i|$ relative to $\max(\max_i |b_i|, 1)$.
fn error(a: &[f32], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(1.0f64, |m, x| m.max(x.abs()));
    a.iter()
        .zip(b)
        .map(|(&x, y)| (f64::from(x) - y).abs())
        .fold(0.0, f64::max)
        / scale
}

fn rerope(window: usize, leak: Option<f64>) -> RopeInference {
    RopeInference {
        rerope: Some(ReRopeWindow { window, leak }),
        ..RopeInference::default()
    }
}

/// The fused two-pass attention equals the composed reference and the ndarray two-pass
/// scores (relative error 1e-5) at lengths 33, 70 and 100 (across the 32-row tiles), windows
/// 1, 5, 32 and 40, ReRoPE and Leaky ReRoPE with k 2 and 7.5.
#[test]
fn the_fused_two_pass_attention_is_the_reference_and_rerope_scores() {
    let device = Device::flex();
    for (l, seed) in [(33, 1), (70, 2), (100, 3)] {
        let (tensors, values) = qkv(l, seed);
        for window in [1, 5, 32, 40] {
            for leak in [None, Some(2.0), Some(7.5)] {
                let inference = rerope(window, leak);
                let fused = attend(Ops::new(Kernels::Fused, &device), &tensors, l, &inference);
                let reference = attend(Ops::reference(), &tensors, l, &inference);
                let want = oracle(&values, l, inference.rerope);
                let what = format!("L {l} w {window} k {leak:?}");
                assert!(error(&fused, &want) < 1e-5, "fused {what}");
                assert!(error(&reference, &want) < 1e-5, "reference {what}");
            }
        }
    }
}

/// A window at or beyond the length is RoPE bit for bit in the fused kernel (the second pass
/// never selected) and within 1e-6 in the reference; Leaky ReRoPE with k = 1 is RoPE within
/// 1e-6 (its second rotation is the first).
#[test]
fn a_window_beyond_the_length_and_k_one_are_rope() {
    let device = Device::flex();
    let l = 70;
    let (tensors, _) = qkv(l, 9);
    for ops in [Ops::new(Kernels::Fused, &device), Ops::reference()] {
        let plain = attend(ops, &tensors, l, &RopeInference::default());
        let plain64: Vec<f64> = plain.iter().map(|&x| f64::from(x)).collect();
        for inference in [rerope(l, None), rerope(l + 50, Some(4.0))] {
            let got = attend(ops, &tensors, l, &inference);
            if ops.kernels() == Kernels::Fused {
                assert_eq!(got, plain, "{inference:?}");
            } else {
                assert!(error(&got, &plain64) < 1e-6, "{inference:?}");
            }
        }
        let k_one = attend(ops, &tensors, l, &rerope(5, Some(1.0)));
        assert!(error(&k_one, &plain64) < 1e-6);
    }
}

/// A query temperature (log-$n$, $\tau_m = \max(1, \ln(m+1) / \ln 12)$, and floor-log,
/// $\tau_m = 1 + 0.3 \ln(1 + \lfloor m / 12 \rfloor)$) equals RoPE on queries scaled by
/// $\tau_m$ beforehand (the rotation is linear), fused and reference, alone and with ReRoPE; at
/// lengths up to the training length 12, $\tau = 1$ and the temperature is RoPE bit for bit.
#[test]
fn a_temperature_scales_each_query_by_its_tau() {
    let device = Device::flex();
    let c = ModelConfig::tiny(Scheme::Rope);
    let l = 70;
    let (tensors, _) = qkv(l, 5);
    for t in [
        TemperatureKind::LogN.at(c.train_len, 0.0).unwrap(),
        TemperatureKind::FloorLog.at(c.train_len, 0.3).unwrap(),
    ] {
        // q_m tau_m, [B, H, L, D]
        let tau: Vec<f32> = (0..l).map(|m| t.scale(m) as f32).collect();
        assert!(tau[l - 1] > 1.2, "{t:?}");
        let tau = Tensor::<1>::from_data(TensorData::new(tau, [l]), &device).reshape([1, 1, l, 1]);
        let scaled = [
            tensors[0].clone() * tau,
            tensors[1].clone(),
            tensors[2].clone(),
        ];
        for ops in [Ops::new(Kernels::Fused, &device), Ops::reference()] {
            for rerope in [
                None,
                Some(ReRopeWindow {
                    window: 16,
                    leak: None,
                }),
            ] {
                let plain = RopeInference {
                    rerope,
                    ..RopeInference::default()
                };
                let want: Vec<f64> = attend(ops, &scaled, l, &plain)
                    .iter()
                    .map(|&x| f64::from(x))
                    .collect();
                let tempered = RopeInference {
                    temperature: Some(t),
                    ..plain
                };
                let got = attend(ops, &tensors, l, &tempered);
                assert!(
                    error(&got, &want) < 1e-6,
                    "{:?} {t:?} {rerope:?}",
                    ops.kernels()
                );
            }
            let (short, _) = qkv(12, 6);
            let tempered = RopeInference {
                temperature: Some(t),
                ..RopeInference::default()
            };
            assert_eq!(
                attend(ops, &short, 12, &tempered),
                attend(ops, &short, 12, &RopeInference::default())
            );
        }
    }
}

/// Dynamic YaRN as a key cache keeps it: the fused attention and the composed reference equal
/// an ndarray oracle in which every query and key is rotated on its own, at its own position
/// $m$, by YaRN at $s_m = \max(1, (m+1)/12)$ with its attention factor (relative error
/// 1e-5), at lengths 33 and 70; up to the training length it is RoPE bit for bit; with a
/// scaling or ReRoPE it is an error.
#[test]
fn dynamic_yarn_rotates_each_position_with_the_scaling_of_its_own_step() {
    let device = Device::flex();
    let c = ModelConfig::tiny(Scheme::Rope);
    let bounds = SWEEP_RAMP;
    let dynamic = RopeInference {
        dynamic_yarn: Some(bounds),
        ..RopeInference::default()
    };
    // x_m rotated at m with YaRN at s_m (plain RoPE up to L)
    let rotate_each = |x: ArrayView2<f32>| {
        let mut out = x.to_owned();
        for m in 0..x.nrows() {
            let s = (m + 1) as f64 / c.train_len as f64;
            let scaling = if s > 1.0 {
                ScalingKind::Yarn.scaling_with(s, c.train_len, &bounds)
            } else {
                RopeScaling::None
            };
            let freqs = RopeConfig::with_scaling(c.head_dim(), c.rope_base, scaling)
                .unwrap()
                .frequencies(None)
                .unwrap();
            let row = x.slice(s![m..m + 1, ..]);
            let rotated = apply_rope(row, &[m as f64], &freqs, RopeLayout::Half).unwrap();
            out.row_mut(m).assign(&rotated.row(0));
        }
        out
    };
    for (l, seed) in [(33, 21), (70, 22)] {
        let (tensors, values) = qkv(l, seed);
        let want = oracle_of(&values, l, &|q, k| rotate_each(q).dot(&rotate_each(k).t()));
        for ops in [Ops::new(Kernels::Fused, &device), Ops::reference()] {
            let got = attend(ops, &tensors, l, &dynamic);
            assert!(error(&got, &want) < 1e-5, "{:?} L {l}", ops.kernels());
        }
    }
    let (short, _) = qkv(12, 23);
    let fused = Ops::new(Kernels::Fused, &device);
    assert_eq!(
        attend(fused, &short, 12, &dynamic),
        attend(fused, &short, 12, &RopeInference::default())
    );
    let with_rerope = RopeInference {
        rerope: Some(ReRopeWindow {
            window: 4,
            leak: None,
        }),
        ..dynamic
    };
    let yarn = ScalingKind::Yarn.scaling_with(2.0, c.train_len, &bounds);
    for (inference, scaling) in [(with_rerope, RopeScaling::None), (dynamic, yarn)] {
        let err = rope::Objects::at_inference(&c, 16, scaling, &inference, &device)
            .unwrap_err()
            .to_string();
        assert!(err.contains("dynamic YaRN alone"), "{err}");
    }
}

fn self_extend(window: usize, group: usize) -> RopeInference {
    RopeInference {
        self_extend: Some(SelfExtendWindow { window, group }),
        ..RopeInference::default()
    }
}

/// Self-Extend through the same two-pass kernel: the fused attention equals the composed
/// reference and the ndarray [`SelfExtend::scores`] (relative error 1e-5) at lengths 33, 70
/// and 100 with (w, G) = (4, 2), (8, 4), (32, 3), (40, 8); G = 1 is RoPE (1e-6), a window
/// beyond the length RoPE bit for bit (fused); ReRoPE with Self-Extend is an error.
#[test]
fn self_extend_is_the_same_two_passes_with_grouped_positions() {
    let device = Device::flex();
    let fused = Ops::new(Kernels::Fused, &device);
    for (l, seed) in [(33, 11), (70, 12), (100, 13)] {
        let (tensors, values) = qkv(l, seed);
        for (window, group) in [(4, 2), (8, 4), (32, 3), (40, 8)] {
            let inference = self_extend(window, group);
            let extend = SelfExtend::new(plain_rope(), window, group).unwrap();
            let want = oracle_of(&values, l, &|q, k| extend.scores(q, k).unwrap());
            let what = format!("L {l} w {window} G {group}");
            let got = attend(fused, &tensors, l, &inference);
            assert!(error(&got, &want) < 1e-5, "fused {what}");
            let reference = attend(Ops::reference(), &tensors, l, &inference);
            assert!(error(&reference, &want) < 1e-5, "reference {what}");
        }
        let plain = attend(fused, &tensors, l, &RopeInference::default());
        let plain64: Vec<f64> = plain.iter().map(|&x| f64::from(x)).collect();
        assert!(error(&attend(fused, &tensors, l, &self_extend(3, 1)), &plain64) < 1e-6);
        assert_eq!(attend(fused, &tensors, l, &self_extend(l, 4)), plain);
    }
    let both = RopeInference {
        rerope: Some(ReRopeWindow {
            window: 4,
            leak: None,
        }),
        ..self_extend(4, 2)
    };
    let c = ModelConfig::tiny(Scheme::Rope);
    let err = rope::Objects::at_inference(&c, 16, RopeScaling::None, &both, &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("not both"), "{err}");
}

/// A trained tiny RoPE checkpoint evaluated with ReRoPE at $w \ge L$ (and Leaky ReRoPE and
/// Self-Extend beyond the longest length) scores every length as plain RoPE, bit for bit; a
/// window inside the lengths changes the longer ones only; ReRoPE or log-$n$ on ALiBi, a
/// window of 0, $k < 1$ and a group of 0 are errors naming the option.
#[test]
fn a_trained_checkpoint_with_rerope_beyond_every_length_scores_as_rope() {
    let tmp = corpus();
    let dir = tmp.path();
    let device = Device::flex();
    train(&run_scheme(
        Scheme::Rope,
        dir,
        "rope",
        false,
        None,
        WeightDtype::F32,
    ))
    .unwrap();
    let (lm, info) = load_model(&dir.join("rope"), &device).unwrap();
    let lengths = vec![12, 24, 48];
    let opts = |rope: RopeInference| EvalOptions {
        lengths: lengths.clone(),
        mode: Mode::Matched,
        max_bytes: Some(600),
        segment_bytes: 64,
        split: "valid".into(),
        scaling: None,
        rope,
        force_separate: false,
        per_position: None,
        progress: false,
        corpus: dir.to_path_buf(),
        kernels: Kernels::Fused,
    };
    let losses = |rope: RopeInference| -> Vec<f64> {
        evaluate(&lm, &info, "x", &opts(rope), &device)
            .unwrap()
            .iter()
            .map(|r| r.nats_per_byte)
            .collect()
    };
    let plain = losses(RopeInference::default());
    assert_eq!(losses(rerope(48, None)), plain);
    assert_eq!(losses(rerope(100, Some(8.0))), plain);
    assert_eq!(losses(self_extend(48, 4)), plain);
    // w = 12: length 12 (pairs at most 11 apart) unchanged, the longer ones not
    let windowed = losses(rerope(12, None));
    assert_eq!(windowed[0], plain[0]);
    assert!(windowed[1..].iter().zip(&plain[1..]).all(|(a, b)| a != b));
    // errors before any window is scored
    let alibi = ModelConfig::tiny(Scheme::Alibi);
    let alibi_lm = posenc::lm::model::Lm::new(&alibi, 0, &device).unwrap();
    let alibi_info =
        posenc::lm::train::CheckpointInfo::new(alibi, info.train.clone(), 0, WeightDtype::F32);
    for bad in [
        rerope(4, None),
        RopeInference {
            temperature: TemperatureKind::LogN.at(12, 0.0),
            ..RopeInference::default()
        },
        RopeInference {
            dynamic_yarn: Some(SWEEP_RAMP),
            ..RopeInference::default()
        },
    ] {
        let err = evaluate(&alibi_lm, &alibi_info, "x", &opts(bad), &device)
            .unwrap_err()
            .to_string();
        assert!(err.contains("only for RoPE"), "{err}");
    }
    for (bad, says) in [
        (rerope(0, None), "window"),
        (rerope(4, Some(0.5)), "1/k"),
        (self_extend(4, 0), "group"),
    ] {
        let err = evaluate(&lm, &info, "x", &opts(bad), &device)
            .unwrap_err()
            .to_string();
        assert!(err.contains(says), "{err}");
    }
}
