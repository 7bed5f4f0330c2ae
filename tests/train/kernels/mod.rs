//! The fused kernels against the reference composition of burn operations: values and
//! gradients of attention with every position term (a bias per distance, a piecewise-linear
//! bias, tables in the query's and the key's row, relative keys per distance, untied terms,
//! relative values; lengths that are not a multiple of the tile) and Transformer-XL's shift in
//! [`attention`], of GELU, LayerNorm, Linear, the logits product, RoPE, the xPos pair rotation
//! and the loss in [`ops`], relative error at most 1e-5; every fused gradient against central
//! finite differences; every scheme's model on both paths past its training length
//! ([`schemes`]); the limits and the training step of the RoPE variants ([`positions`]); and
//! 20 training steps of every scheme on both paths, which must follow the
//! same loss curve ([`training`]).

mod attention;
mod ops;
mod positions;
mod schemes;
mod training;

use burn::tensor::{Device, Tensor, TensorData};
use posenc::lm::model::to_vec;

use crate::support::uniform;

/// A `shape` tensor of [`uniform`] values that records its gradient.
fn tensor<const D: usize>(shape: [usize; D], seed: u64, scale: f32, device: &Device) -> Tensor<D> {
    let n = shape.iter().product();
    Tensor::from_data(TensorData::new(uniform(n, seed, scale), shape), device).require_grad()
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
        TensorData::new(uniform(y.dims().iter().product(), seed, 1.0), y.dims()),
        &y.device(),
    );
    (y * w).sum()
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

/// Central differences of `loss` at a few entries of `x` against the fused gradient `grad`.
fn check_finite_differences(
    what: &str,
    x: &[f32],
    grad: &[f32],
    loss: impl Fn(&[f32]) -> f64,
    eps: f32,
) -> f64 {
    let indices: Vec<usize> = (0..x.len()).step_by(x.len() / 9 + 1).collect();
    check_finite_differences_at(what, x, grad, loss, eps, &indices)
}

/// [`check_finite_differences`] at the entries `indices`.
fn check_finite_differences_at(
    what: &str,
    x: &[f32],
    grad: &[f32],
    loss: impl Fn(&[f32]) -> f64,
    eps: f32,
    indices: &[usize],
) -> f64 {
    let mut worst = 0.0f64;
    for &index in indices {
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
