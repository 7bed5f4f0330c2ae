//! Seeded initialisation: every weight is drawn on the host with a `StdRng`, so a seed fixes
//! the model whatever the device.

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{Device, Tensor, TensorData};
use ndarray::Array2;
use ndarray_rand::rand::rngs::StdRng;
use ndarray_rand::rand_distr::{Distribution, Uniform};
use ndarray_rand::RandomExt;

use crate::encodings::init::Seeded;
use crate::error::Result;

/// $\mathcal N(0, \sigma^2)$ entries from the encodings' initialiser seeded by `seed`.
///
/// # Errors
/// A standard deviation that is not finite or is negative.
pub fn normal(shape: (usize, usize), std: f32, seed: u64) -> Result<Array2<f32>> {
    Seeded::new(seed).normal(shape, std)
}

/// A trainable `[rows, cols]` parameter.
pub fn param2(a: &Array2<f32>, device: &Device) -> Param<Tensor<2>> {
    Param::from_tensor(tensor2(a, device))
}

/// A trainable vector parameter.
pub fn param1(v: &[f32], device: &Device) -> Param<Tensor<1>> {
    Param::from_tensor(Tensor::from_data(
        TensorData::new(v.to_vec(), [v.len()]),
        device,
    ))
}

/// A linear layer `[d_in, d_out]` with bias, both $\mathcal U(-1/\sqrt{d_{in}}, 1/\sqrt{d_{in}})$
/// (PyTorch's `nn.Linear` default).
pub fn linear(d_in: usize, d_out: usize, rng: &mut StdRng, device: &Device) -> Linear {
    let bound = 1.0 / (d_in as f32).sqrt();
    let u = Uniform::new_inclusive(-bound, bound).expect("bound > 0");
    let w = Array2::random_using((d_in, d_out), u, rng);
    let b: Vec<f32> = (0..d_out).map(|_| u.sample(rng)).collect();
    Linear {
        weight: param2(&w, device),
        bias: Some(param1(&b, device)),
    }
}

/// `[rows, cols]` f32 array to a tensor.
pub fn tensor2(a: &Array2<f32>, device: &Device) -> Tensor<2> {
    let a = a.as_standard_layout();
    Tensor::from_data(
        TensorData::new(
            a.iter().copied().collect::<Vec<_>>(),
            [a.nrows(), a.ncols()],
        ),
        device,
    )
}
