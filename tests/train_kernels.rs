//! The fused kernels against the reference composition of burn operations: values and
//! gradients of attention (no bias, per-head bias, per-sequence bias; lengths that are not a
//! multiple of the tile), GELU, LayerNorm, Linear, the logits product and the loss, relative
//! error at most 1e-5; every fused gradient against central finite differences; and 20 training
//! steps of every scheme on both paths, which must follow the same loss curve.
#![cfg(feature = "train")]

mod train_common;

use burn::module::Module;
use burn::nn::LayerNormConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use posenc::lm::model::{to_vec, ModelConfig, Scheme, LAYER_NORM_EPS};
use posenc::lm::ops::{fused, reference, AttentionBias, Kernels};

use posenc::lm::train::{train, TrainConfig, TrainRun};
use train_common::{corpus, tiny};

/// Deterministic values in about [-scale, scale].
fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

fn tensor<const D: usize>(shape: [usize; D], seed: u64, scale: f32, device: &Device) -> Tensor<D> {
    let n = shape.iter().product();
    Tensor::from_data(TensorData::new(values(n, seed, scale), shape), device).require_grad()
}

/// max |a - b| / max |b|: the error relative to the tensor's scale.
fn relative_error(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0f64, |m, &x| m.max(f64::from(x).abs()));
    let diff = a
        .iter()
        .zip(b)
        .fold(0.0f64, |m, (&x, &y)| m.max(f64::from(x - y).abs()));
    diff / scale.max(1e-30)
}

/// Relative error at most 1e-5; where the reference is exactly zero (the gradient of a
/// one-key softmax), an absolute error at most 1e-6.
fn assert_close(what: &str, fused: &[f32], reference: &[f32]) {
    if reference.iter().all(|&x| x == 0.0) {
        let err = fused.iter().fold(0.0f32, |m, &x| m.max(x.abs()));
        println!("{what:<48} reference 0, absolute error {err:.1e}");
        assert!(err <= 1e-6, "{what}: absolute error {err:.2e} > 1e-6");
        return;
    }
    let err = relative_error(fused, reference);
    println!("{what:<48} relative error {err:.1e}");
    assert!(err <= 1e-5, "{what}: relative error {err:.2e} > 1e-5");
}

/// The weighted sum $\sum w \odot y$ as a scalar loss, so every output entry gets its own
/// gradient.
fn weighted_sum<const D: usize>(y: Tensor<D>, seed: u64) -> Tensor<1> {
    let w = Tensor::<D>::from_data(
        TensorData::new(values(y.dims().iter().product(), seed, 1.0), y.dims()),
        &y.device(),
    );
    (y * w).sum()
}

#[derive(Clone, Copy, Debug)]
enum BiasKind {
    None,
    Heads,
    Batch,
}

/// Output and gradients (q, k, v, bias) of attention on one path.
fn attention_case(
    fused: bool,
    [b, h, l, d]: [usize; 4],
    kind: BiasKind,
    device: &Device,
) -> Vec<Vec<f32>> {
    let q = tensor([b, h, l, d], 1, 1.0, device);
    let k = tensor([b, h, l, d], 2, 1.0, device);
    let v = tensor([b, h, l, d], 3, 1.0, device);
    let heads = tensor([h, l, l], 4, 2.0, device);
    let batch = tensor([b, h, l, l], 5, 2.0, device);
    let bias = match kind {
        BiasKind::None => AttentionBias::None,
        BiasKind::Heads => AttentionBias::Heads(heads.clone()),
        BiasKind::Batch => AttentionBias::Batch(batch.clone()),
    };
    let scale = 1.0 / (d as f32).sqrt();
    let f = if fused {
        fused::attention
    } else {
        reference::attention
    };
    let out = f(q.clone(), k.clone(), v.clone(), bias, scale);
    let grads = weighted_sum(out.clone(), 6).backward();
    let mut all = vec![
        to_vec(out),
        to_vec(q.grad(&grads).unwrap()),
        to_vec(k.grad(&grads).unwrap()),
        to_vec(v.grad(&grads).unwrap()),
    ];
    match kind {
        BiasKind::None => {}
        BiasKind::Heads => all.push(to_vec(heads.grad(&grads).unwrap())),
        BiasKind::Batch => all.push(to_vec(batch.grad(&grads).unwrap())),
    }
    all
}

#[test]
fn fused_attention_matches_reference_values_and_gradients() {
    let device = Device::flex().autodiff();
    let names = ["output", "dq", "dk", "dv", "dbias"];
    // lengths below, at and across the 32-row tile; one head dimension of 8, one of 32
    for dims in [[2, 3, 1, 8], [2, 2, 45, 8], [1, 2, 70, 32], [3, 1, 32, 16]] {
        for kind in [BiasKind::None, BiasKind::Heads, BiasKind::Batch] {
            let fused = attention_case(true, dims, kind, &device);
            let reference = attention_case(false, dims, kind, &device);
            assert_eq!(fused.len(), reference.len());
            for (i, (a, b)) in fused.iter().zip(&reference).enumerate() {
                assert_close(&format!("attention {dims:?} {kind:?} {}", names[i]), a, b);
            }
        }
    }
}

#[test]
fn fused_attention_gradients_match_finite_differences() {
    // f64-free check: central differences in f32 with a step large enough for the rounding,
    // on a few entries of every input
    let device = Device::flex().autodiff();
    let dims = [1, 2, 37, 8];
    let [b, h, l, d] = dims;
    let scale = 1.0 / (d as f32).sqrt();
    let base: Vec<Vec<f32>> = vec![
        values(b * h * l * d, 1, 1.0),
        values(b * h * l * d, 2, 1.0),
        values(b * h * l * d, 3, 1.0),
        values(h * l * l, 4, 2.0),
    ];
    let loss = |inputs: &[Vec<f32>]| -> f64 {
        let t4 = |v: &Vec<f32>| Tensor::<4>::from_data(TensorData::new(v.clone(), dims), &device);
        let bias = Tensor::<3>::from_data(TensorData::new(inputs[3].clone(), [h, l, l]), &device);
        let out = fused::attention(
            t4(&inputs[0]),
            t4(&inputs[1]),
            t4(&inputs[2]),
            AttentionBias::Heads(bias),
            scale,
        );
        f64::from(to_vec(weighted_sum(out, 6))[0])
    };
    let analytic = attention_case(true, dims, BiasKind::Heads, &device);
    let mut worst = 0.0f64;
    for (input, grad) in (0..4).zip(&analytic[1..]) {
        let n = base[input].len();
        for index in (0..n).step_by(n / 7 + 1) {
            let eps = 1e-2f32;
            let mut plus = base.clone();
            plus[input][index] += eps;
            let mut minus = base.clone();
            minus[input][index] -= eps;
            let fd = (loss(&plus) - loss(&minus)) / (2.0 * f64::from(eps));
            let ad = f64::from(grad[index]);
            let err = (fd - ad).abs();
            assert!(
                err <= 2e-3 + 1e-2 * ad.abs(),
                "input {input}[{index}]: fused {ad:.6}, finite difference {fd:.6}"
            );
            worst = worst.max(err);
        }
    }
    println!("fused attention: max |gradient - finite difference| {worst:.1e}");
}

#[test]
fn fused_gelu_layer_norm_linear_and_nll_match_reference() {
    let device = Device::flex().autodiff();
    let run = |fused: bool| -> Vec<Vec<f32>> {
        // GELU over a wide range, tails included
        let x = tensor([3, 50, 40], 7, 6.0, &device);
        let y = if fused {
            fused::gelu(x.clone())
        } else {
            reference::gelu(x.clone())
        };
        let g = weighted_sum(y.clone(), 8).backward();
        let mut out = vec![to_vec(y), to_vec(x.grad(&g).unwrap())];
        // LayerNorm with non-trivial gamma and beta
        let ln = LayerNormConfig::new(24).init(&device);
        let ln = ln.map(&mut ScaleParams);
        let x = tensor([2, 33, 24], 9, 3.0, &device);
        let y = if fused {
            fused::layer_norm(
                x.clone(),
                ln.gamma.val(),
                ln.beta.as_ref().unwrap().val(),
                LAYER_NORM_EPS,
            )
        } else {
            reference::layer_norm(&ln, x.clone())
        };
        let g = weighted_sum(y.clone(), 10).backward();
        out.push(to_vec(y));
        out.push(to_vec(x.grad(&g).unwrap()));
        out.push(to_vec(ln.gamma.val().grad(&g).unwrap()));
        out.push(to_vec(ln.beta.as_ref().unwrap().val().grad(&g).unwrap()));
        // Linear with bias, [B, L, n_in] -> [B, L, n_out]
        let lin = burn::nn::LinearConfig::new(24, 40)
            .init(&device)
            .map(&mut ScaleParams);
        let x = tensor([3, 33, 24], 13, 2.0, &device);
        let y = if fused {
            fused::linear(
                x.clone(),
                lin.weight.val(),
                lin.bias.as_ref().unwrap().val(),
            )
        } else {
            reference::linear(&lin, x.clone())
        };
        let g = weighted_sum(y.clone(), 14).backward();
        out.push(to_vec(y));
        out.push(to_vec(x.grad(&g).unwrap()));
        out.push(to_vec(lin.weight.val().grad(&g).unwrap()));
        out.push(to_vec(lin.bias.as_ref().unwrap().val().grad(&g).unwrap()));
        // product without bias through a transposed view, as the tied logits h E^T
        let e = tensor([40, 24], 15, 1.0, &device);
        let h = tensor([2, 17, 24], 16, 1.0, &device);
        let y = if fused {
            fused::product(h.clone(), e.clone().transpose())
        } else {
            reference::product(h.clone(), e.clone().transpose())
        };
        let g = weighted_sum(y.clone(), 17).backward();
        out.push(to_vec(y));
        out.push(to_vec(h.grad(&g).unwrap()));
        out.push(to_vec(e.grad(&g).unwrap()));
        // RoPE (half layout) of a head view, as the model applies it
        let x = tensor([2, 9, 3, 8], 18, 1.0, &device);
        let cos = Tensor::<2>::from_data(TensorData::new(values(9 * 8, 19, 1.0), [9, 8]), &device);
        let sin = Tensor::<2>::from_data(TensorData::new(values(9 * 8, 20, 1.0), [9, 8]), &device);
        let y = if fused {
            fused::rope_half(x.clone().swap_dims(1, 2), &cos, &sin)
        } else {
            reference::rope_half(x.clone().swap_dims(1, 2), &cos, &sin)
        };
        let g = weighted_sum(y.clone(), 21).backward();
        out.push(to_vec(y));
        out.push(to_vec(x.grad(&g).unwrap()));
        // log-softmax + NLL over 256 classes
        let logits = tensor([2, 65, 256], 11, 8.0, &device);
        let targets: Vec<i64> = (0..130).map(|i| (i * 37 % 256) as i64).collect();
        let targets = Tensor::<2, Int>::from_data(TensorData::new(targets, [2, 65]), &device);
        let nll = if fused {
            fused::nll(logits.clone(), targets)
        } else {
            reference::nll(logits.clone(), targets)
        };
        let g = weighted_sum(nll.clone(), 12).backward();
        out.push(to_vec(nll));
        out.push(to_vec(logits.grad(&g).unwrap()));
        out
    };
    let fused = run(true);
    let reference = run(false);
    let names = [
        "gelu",
        "gelu dx",
        "layer norm",
        "layer norm dx",
        "layer norm dgamma",
        "layer norm dbeta",
        "linear",
        "linear dx",
        "linear dweight",
        "linear dbias",
        "product h E^T",
        "product dh",
        "product dE",
        "rope",
        "rope dx",
        "nll",
        "nll dlogits",
    ];
    for ((name, a), b) in names.iter().zip(&fused).zip(&reference) {
        assert_close(name, a, b);
    }
}

/// Sets parameters that hold 1 (LayerNorm's gamma) to 1 + 0.3 sin(i) and all others to
/// 0.1 cos(i) + 0.05 sin(3i) (LayerNorm's beta, Linear's weight and bias, whose random
/// initial values would differ between the two runs), so that every one matters.
struct ScaleParams;

impl burn::module::ModuleMapper for ScaleParams {
    fn map_float<const D: usize>(
        &mut self,
        param: burn::module::Param<Tensor<D>>,
    ) -> burn::module::Param<Tensor<D>> {
        param.map(|t| {
            let dims = t.dims();
            let device = t.device();
            let values: Vec<f32> = to_vec(t)
                .iter()
                .enumerate()
                .map(|(i, &v)| {
                    if v == 1.0 {
                        1.0 + 0.3 * (i as f32).sin()
                    } else {
                        0.1 * (i as f32).cos() + 0.05 * (3.0 * i as f32).sin()
                    }
                })
                .collect();
            Tensor::from_data(TensorData::new(values, dims.to_vec()), &device).require_grad()
        })
    }
}

/// 20 steps of `c` with the given kernels: the loss of every step.
fn losses(c: &ModelConfig, kernels: Kernels, dir: &std::path::Path) -> Vec<f64> {
    let _ = std::fs::remove_dir_all(dir);
    let run = TrainRun {
        model: c.clone(),
        train: TrainConfig {
            batch: 4,
            steps: 20,
            warmup: 5,
            ..TrainConfig::default()
        },
        out: dir.to_path_buf(),
        resume: false,
        overwrite: false,
        init: None,
        stop_after: None,
        save_every: 0,
        log_every: 0,
        progress: false,
        dtype: posenc::lm::checkpoint::WeightDtype::F32,
        corpus: corpus("kernels"),
        device: Device::flex(),
        kernels,
    };
    let (_, state) = train(&run).unwrap();
    let _ = std::fs::remove_dir_all(dir);
    state.losses
}

#[test]
fn every_scheme_trains_along_the_same_loss_curve_on_both_paths() {
    let tmp = std::env::temp_dir().join(format!("posenc-kernels-{}", std::process::id()));
    let mut report = Vec::new();
    for scheme in Scheme::ALL {
        let c = ModelConfig {
            train_len: 40,
            max_positions: 40,
            fire_threshold: 40.0,
            ..tiny(scheme)
        };
        let fused = losses(&c, Kernels::Fused, &tmp.join("fused"));
        let reference = losses(&c, Kernels::Reference, &tmp.join("reference"));
        assert_eq!(fused.len(), 20);
        let worst = fused
            .iter()
            .zip(&reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f64, f64::max);
        report.push(format!(
            "{:<10} loss {:.4} -> {:.4}, max |fused - reference| over 20 steps {worst:.1e}",
            scheme.name(),
            reference[0],
            reference[19]
        ));
        // the two paths round differently; after 20 AdamW steps the curves agree to 1e-3
        assert!(
            worst <= 1e-3,
            "{scheme}: fused and reference losses differ by {worst:.2e}\nfused {fused:?}\nreference {reference:?}"
        );
    }
    println!("{}", report.join("\n"));
}

/// Central differences of `loss` at a few entries of `x` against the fused gradient `grad`.
fn check_finite_differences(
    what: &str,
    x: &[f32],
    grad: &[f32],
    loss: impl Fn(&[f32]) -> f64,
    eps: f32,
) -> f64 {
    let mut worst = 0.0f64;
    for index in (0..x.len()).step_by(x.len() / 9 + 1) {
        let mut plus = x.to_vec();
        plus[index] += eps;
        let mut minus = x.to_vec();
        minus[index] -= eps;
        let fd = (loss(&plus) - loss(&minus)) / (2.0 * f64::from(eps));
        let ad = f64::from(grad[index]);
        let err = (fd - ad).abs();
        assert!(
            err <= 2e-3 + 1e-2 * ad.abs(),
            "{what}[{index}]: fused {ad:.6}, finite difference {fd:.6}"
        );
        worst = worst.max(err);
    }
    println!("{what:<24} max |gradient - finite difference| {worst:.1e}");
    worst
}

#[test]
fn fused_gelu_layer_norm_linear_rope_and_nll_gradients_match_finite_differences() {
    let device = Device::flex().autodiff();
    let input = |v: &[f32], shape: [usize; 3]| {
        Tensor::<3>::from_data(TensorData::new(v.to_vec(), shape), &device).require_grad()
    };
    let scalar = |t: Tensor<1>| f64::from(to_vec(t)[0]);
    // GELU
    let shape = [2, 5, 7];
    let x = values(70, 21, 3.0);
    let g = {
        let t = input(&x, shape);
        let grads = weighted_sum(fused::gelu(t.clone()), 22).backward();
        to_vec(t.grad(&grads).unwrap())
    };
    check_finite_differences(
        "gelu",
        &x,
        &g,
        |v| scalar(weighted_sum(fused::gelu(input(v, shape)), 22)),
        1e-2,
    );
    // LayerNorm
    let ln = LayerNormConfig::new(7).init(&device).map(&mut ScaleParams);
    let g = {
        let t = input(&x, shape);
        let y = fused::layer_norm(
            t.clone(),
            ln.gamma.val(),
            ln.beta.as_ref().unwrap().val(),
            LAYER_NORM_EPS,
        );
        to_vec(t.grad(&weighted_sum(y, 23).backward()).unwrap())
    };
    check_finite_differences(
        "layer norm",
        &x,
        &g,
        |v| {
            let y = fused::layer_norm(
                input(v, shape),
                ln.gamma.val(),
                ln.beta.as_ref().unwrap().val(),
                LAYER_NORM_EPS,
            );
            scalar(weighted_sum(y, 23))
        },
        1e-2,
    );
    // Linear
    let lin = burn::nn::LinearConfig::new(7, 4)
        .init(&device)
        .map(&mut ScaleParams);
    let g = {
        let t = input(&x, shape);
        let y = fused::linear(
            t.clone(),
            lin.weight.val(),
            lin.bias.as_ref().unwrap().val(),
        );
        to_vec(t.grad(&weighted_sum(y, 24).backward()).unwrap())
    };
    check_finite_differences(
        "linear",
        &x,
        &g,
        |v| {
            scalar(weighted_sum(
                fused::linear(
                    input(v, shape),
                    lin.weight.val(),
                    lin.bias.as_ref().unwrap().val(),
                ),
                24,
            ))
        },
        1e-2,
    );
    // RoPE (its input a [B, H, L, D] tensor)
    let rshape = [2, 2, 5, 4];
    let xr = values(80, 27, 1.0);
    let cos = Tensor::<2>::from_data(TensorData::new(values(20, 28, 1.0), [5, 4]), &device);
    let sin = Tensor::<2>::from_data(TensorData::new(values(20, 29, 1.0), [5, 4]), &device);
    let rope_input = |v: &[f32]| {
        Tensor::<4>::from_data(TensorData::new(v.to_vec(), rshape), &device).require_grad()
    };
    let g = {
        let t = rope_input(&xr);
        let y = fused::rope_half(t.clone(), &cos, &sin);
        to_vec(t.grad(&weighted_sum(y, 30).backward()).unwrap())
    };
    check_finite_differences(
        "rope",
        &xr,
        &g,
        |v| {
            scalar(weighted_sum(
                fused::rope_half(rope_input(v), &cos, &sin),
                30,
            ))
        },
        1e-2,
    );
    // log-softmax + NLL
    let vshape = [2, 3, 256];
    let logits = values(2 * 3 * 256, 25, 4.0);
    let targets = || {
        Tensor::<2, Int>::from_data(
            TensorData::new(vec![1i64, 7, 255, 0, 128, 64], [2, 3]),
            &device,
        )
    };
    let g = {
        let t = input(&logits, vshape);
        let y = fused::nll(t.clone(), targets());
        to_vec(t.grad(&weighted_sum(y, 26).backward()).unwrap())
    };
    check_finite_differences(
        "nll",
        &logits,
        &g,
        |v| scalar(weighted_sum(fused::nll(input(v, vshape), targets()), 26)),
        1e-2,
    );
}

/// The fused relative gather (rows and transposed) against burn's `gather` of the broadcast
/// index: values and gradients, an index with repeated and unused columns, `R` above and
/// below `L`; then central differences of the fused gradient.
#[test]
fn fused_relative_gather_matches_reference_and_finite_differences() {
    let device = Device::flex().autodiff();
    for (l, r) in [(5, 3), (9, 16), (33, 33)] {
        let idx: Vec<i64> = (0..l * l)
            .map(|e| ((e / l) * 7 + (e % l) * 3) as i64 % r as i64)
            .collect();
        let index = Tensor::<2, Int>::from_data(TensorData::new(idx, [l, l]), &device);
        for transposed in [false, true] {
            let run = |fused: bool| {
                let a = tensor([2, 3, l, r], 41, 1.0, &device);
                let y = if fused {
                    fused::relative_gather(a.clone(), &index, transposed)
                } else {
                    reference::relative_gather(a.clone(), &index, transposed)
                };
                let grads = weighted_sum(y.clone(), 42).backward();
                (to_vec(y), to_vec(a.grad(&grads).unwrap()))
            };
            let (yf, gf) = run(true);
            let (yr, gr) = run(false);
            let what = format!("relative gather L={l} R={r} transposed={transposed}");
            assert_close(&format!("{what} values"), &yf, &yr);
            assert_close(&format!("{what} da"), &gf, &gr);
        }
    }
    // finite differences of the fused gradient (a linear map: exact up to rounding)
    let (l, r) = (6, 4);
    let idx: Vec<i64> = (0..l * l)
        .map(|e| ((e % l + 2 * (e / l)) % r) as i64)
        .collect();
    let index = Tensor::<2, Int>::from_data(TensorData::new(idx, [l, l]), &device);
    let x = values(2 * l * r, 43, 1.0);
    let input = |v: &[f32]| {
        Tensor::<4>::from_data(TensorData::new(v.to_vec(), [1, 2, l, r]), &device).require_grad()
    };
    for transposed in [false, true] {
        let g = {
            let t = input(&x);
            let y = fused::relative_gather(t.clone(), &index, transposed);
            to_vec(t.grad(&weighted_sum(y, 44).backward()).unwrap())
        };
        check_finite_differences(
            &format!("relative gather{}", if transposed { " (T)" } else { "" }),
            &x,
            &g,
            |v| {
                let y = fused::relative_gather(input(v), &index, transposed);
                f64::from(to_vec(weighted_sum(y, 44))[0])
            },
            1e-2,
        );
    }
}

/// Transformer-XL's shift done as the fused kernels do it, a gather at column $L - 1 - i + j$
/// (the context's `xl_index`), equals the paper's pad-reshape-slice `rel_shift` on and below
/// the diagonal, the part the causal mask keeps.
#[test]
fn xl_shift_index_gathers_what_rel_shift_shifts() {
    use posenc::encodings::rope::RopeScaling;
    use posenc::lm::model::schemes::xl;
    use posenc::lm::model::PositionContext;
    use posenc::lm::ops::reference::rel_shift;
    let device = Device::flex().autodiff();
    for l in [1, 7, 40] {
        let c = ModelConfig {
            scheme: Scheme::Xl,
            ..ModelConfig::default()
        };
        let ctx = PositionContext::new(&c, l, RopeScaling::None, &device).unwrap();
        let xl::Objects { index, .. } = ctx.objects::<xl::Objects>().unwrap();
        let raw = tensor([2, 3, l, l], 51, 1.0, &device);
        let gathered = to_vec(fused::relative_gather(raw.clone(), index, false));
        let shifted = to_vec(rel_shift(raw));
        for bh in 0..6 {
            for i in 0..l {
                for j in 0..=i {
                    let at = bh * l * l + i * l + j;
                    assert_eq!(gathered[at], shifted[at], "L={l} head {bh} ({i}, {j})");
                }
            }
        }
    }
}

/// The fused interleaved rotation (xPos) against the composed rotation and permutation:
/// values and gradients, separate tables for queries and keys; then central differences; and
/// the permutation leaves every product $q' \cdot k'$ as the unpermuted rotation gives it.
#[test]
fn fused_pair_rotation_matches_reference_and_keeps_products() {
    use posenc::lm::ops::reference::rotate_interleaved;
    let device = Device::flex().autodiff();
    let (b, h, l, d) = (2, 3, 7, 8);
    let c = tensor([l, d / 2], 61, 1.0, &device);
    let s = tensor([l, d / 2], 62, 1.0, &device);
    let run = |fused: bool| {
        let x = tensor([b, h, l, d], 63, 1.0, &device);
        let y = if fused {
            fused::rotate_pairs(x.clone(), &c, &s)
        } else {
            reference::rotate_pairs(x.clone(), &c, &s)
        };
        let grads = weighted_sum(y.clone(), 64).backward();
        (to_vec(y), to_vec(x.grad(&grads).unwrap()))
    };
    let (yf, gf) = run(true);
    let (yr, gr) = run(false);
    assert_close("pair rotation values", &yf, &yr);
    assert_close("pair rotation dx", &gf, &gr);
    // q' . k' of the permuted rotations equals that of the plain interleaved ones
    let q = tensor([b, h, l, d], 65, 1.0, &device);
    let k = tensor([b, h, l, d], 66, 1.0, &device);
    let (kc, ks) = (
        tensor([l, d / 2], 67, 1.0, &device),
        tensor([l, d / 2], 68, 1.0, &device),
    );
    let permuted = fused::rotate_pairs(q.clone(), &c, &s)
        .matmul(fused::rotate_pairs(k.clone(), &kc, &ks).swap_dims(2, 3));
    let plain =
        rotate_interleaved(q, &c, &s).matmul(rotate_interleaved(k, &kc, &ks).swap_dims(2, 3));
    assert_close("pair rotation q'.k'", &to_vec(permuted), &to_vec(plain));
    // finite differences
    let x = values(b * h * l * d, 69, 1.0);
    let input = |v: &[f32]| {
        Tensor::<4>::from_data(TensorData::new(v.to_vec(), [b, h, l, d]), &device).require_grad()
    };
    let g = {
        let t = input(&x);
        let y = fused::rotate_pairs(t.clone(), &c, &s);
        to_vec(t.grad(&weighted_sum(y, 70).backward()).unwrap())
    };
    check_finite_differences(
        "pair rotation",
        &x,
        &g,
        |v| f64::from(to_vec(weighted_sum(fused::rotate_pairs(input(v), &c, &s), 70))[0]),
        1e-2,
    );
}

/// Attention with Shaw's relative values, fused against the composed reference (softmax,
/// scatter of the weights per table row, two products): output and the gradients of q, k, v,
/// the bias and the table, at lengths across the 32-row tile and with Shaw's clipped index
/// (many keys per table row); then central differences of the table's and the bias's gradients.
#[test]
fn fused_attention_with_relative_values_matches_reference() {
    use posenc::encodings::shaw::relative_index_matrix;
    let device = Device::flex().autodiff();
    let names = ["output", "dq", "dk", "dv", "dbias", "dtable"];
    for ([b, h, l, d], clip) in [([2, 2, 5, 8], 2), ([1, 3, 45, 16], 4), ([2, 1, 70, 8], 32)] {
        let idx: Vec<i64> = relative_index_matrix(l, l, clip)
            .unwrap()
            .iter()
            .map(|&c| c as i64)
            .collect();
        let index = Tensor::<2, Int>::from_data(TensorData::new(idx, [l, l]), &device);
        let rows = 2 * clip + 1;
        let run = |fused: bool| {
            let q = tensor([b, h, l, d], 71, 1.0, &device);
            let k = tensor([b, h, l, d], 72, 1.0, &device);
            let v = tensor([b, h, l, d], 73, 1.0, &device);
            let bias = tensor([b, h, l, l], 74, 2.0, &device);
            let table = tensor([rows, d], 75, 1.0, &device);
            let scale = 1.0 / (d as f32).sqrt();
            let out = if fused {
                fused::attention_relative_values(
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    bias.clone(),
                    table.clone(),
                    &index,
                    scale,
                )
            } else {
                reference::attention_relative_values(
                    q.clone(),
                    k.clone(),
                    v.clone(),
                    bias.clone(),
                    table.clone(),
                    &index,
                    scale,
                )
            };
            let grads = weighted_sum(out.clone(), 76).backward();
            vec![
                to_vec(out),
                to_vec(q.grad(&grads).unwrap()),
                to_vec(k.grad(&grads).unwrap()),
                to_vec(v.grad(&grads).unwrap()),
                to_vec(bias.grad(&grads).unwrap()),
                to_vec(table.grad(&grads).unwrap()),
            ]
        };
        let fused = run(true);
        let reference = run(false);
        for (i, (a, r)) in fused.iter().zip(&reference).enumerate() {
            assert_close(
                &format!("relative values [{b},{h},{l},{d}] {}", names[i]),
                a,
                r,
            );
        }
    }
    // finite differences of the table's gradient
    let (b, h, l, d, clip) = (1, 2, 9, 4, 3);
    let idx: Vec<i64> = relative_index_matrix(l, l, clip)
        .unwrap()
        .iter()
        .map(|&c| c as i64)
        .collect();
    let index = Tensor::<2, Int>::from_data(TensorData::new(idx, [l, l]), &device);
    let q = tensor([b, h, l, d], 81, 1.0, &device);
    let k = tensor([b, h, l, d], 82, 1.0, &device);
    let v = tensor([b, h, l, d], 83, 1.0, &device);
    let bias = tensor([b, h, l, l], 84, 1.0, &device);
    let x = values((2 * clip + 1) * d, 85, 1.0);
    let loss = |t: Tensor<2>| {
        let out = fused::attention_relative_values(
            q.clone(),
            k.clone(),
            v.clone(),
            bias.clone(),
            t,
            &index,
            0.5,
        );
        weighted_sum(out, 86)
    };
    let table = |v: &[f32]| {
        Tensor::<2>::from_data(TensorData::new(v.to_vec(), [2 * clip + 1, d]), &device)
            .require_grad()
    };
    let g = {
        let t = table(&x);
        to_vec(t.grad(&loss(t.clone()).backward()).unwrap())
    };
    check_finite_differences(
        "relative values table",
        &x,
        &g,
        |v| f64::from(to_vec(loss(table(v)))[0]),
        1e-2,
    );
}
