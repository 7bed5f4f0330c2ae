//! Attention, fused against the composed reference: without a bias, with a bias per head or
//! per sequence, and with Shaw's relative values.

use burn::tensor::{Device, Int, Tensor, TensorData};
use posenc::lm::model::to_vec;
use posenc::lm::ops::{fused, reference, AttentionBias};

use super::{assert_close, check_finite_differences, tensor, weighted_sum};
use crate::support::uniform;

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
        uniform(b * h * l * d, 1, 1.0),
        uniform(b * h * l * d, 2, 1.0),
        uniform(b * h * l * d, 3, 1.0),
        uniform(h * l * l, 4, 2.0),
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
    let x = uniform((2 * clip + 1) * d, 85, 1.0);
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
