//! The fused relative gather against burn's `gather` of the broadcast index, and
//! Transformer-XL's shift index against `rel_shift`.

use burn::tensor::{Device, Int, Tensor, TensorData};
use posenc::lm::model::{to_vec, ModelConfig, Scheme};
use posenc::lm::ops::{fused, reference};

use super::{assert_close, check_finite_differences, tensor, weighted_sum};
use crate::support::uniform;

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
    let x = uniform(2 * l * r, 43, 1.0);
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
