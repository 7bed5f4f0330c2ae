//! GELU, LayerNorm, Linear, the logits product, RoPE, the xPos pair rotation and the loss,
//! fused against the composed reference and against central finite differences.

use burn::module::Module;
use burn::nn::LayerNormConfig;
use burn::tensor::{Device, Int, Tensor, TensorData};
use posenc::lm::model::{to_vec, LAYER_NORM_EPS};
use posenc::lm::ops::{fused, reference};

use super::{assert_close, check_finite_differences, tensor, weighted_sum, ScaleParams};
use crate::support::uniform;

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
        let cos = Tensor::<2>::from_data(TensorData::new(uniform(9 * 8, 19, 1.0), [9, 8]), &device);
        let sin = Tensor::<2>::from_data(TensorData::new(uniform(9 * 8, 20, 1.0), [9, 8]), &device);
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

#[test]
fn fused_gelu_layer_norm_linear_rope_and_nll_gradients_match_finite_differences() {
    let device = Device::flex().autodiff();
    let input = |v: &[f32], shape: [usize; 3]| {
        Tensor::<3>::from_data(TensorData::new(v.to_vec(), shape), &device).require_grad()
    };
    let scalar = |t: Tensor<1>| f64::from(to_vec(t)[0]);
    // GELU
    let shape = [2, 5, 7];
    let x = uniform(70, 21, 3.0);
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
    let xr = uniform(80, 27, 1.0);
    let cos = Tensor::<2>::from_data(TensorData::new(uniform(20, 28, 1.0), [5, 4]), &device);
    let sin = Tensor::<2>::from_data(TensorData::new(uniform(20, 29, 1.0), [5, 4]), &device);
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
    let logits = uniform(2 * 3 * 256, 25, 4.0);
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
    let x = uniform(b * h * l * d, 69, 1.0);
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
