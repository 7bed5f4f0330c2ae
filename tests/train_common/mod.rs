//! Helpers shared by the `train_*` tests.
#![allow(dead_code)]

use burn::tensor::Tensor;
use ndarray::Array2;
use posenc::lm::model::{ModelConfig, Scheme};

/// A tiny model of `scheme`: 1 layer, width 16, 2 heads of 8, training length 12.
pub fn tiny(scheme: Scheme) -> ModelConfig {
    ModelConfig {
        scheme,
        layers: 1,
        d_model: 16,
        heads: 2,
        d_ff: 32,
        train_len: 12,
        max_positions: 12,
        shaw_max_relative: 3,
        t5_num_buckets: 8,
        t5_max_distance: 10,
        deberta_bucket_size: 6,
        deberta_max_position: 10,
        fire_hidden: 4,
        fire_threshold: 12.0,
        ..ModelConfig::default()
    }
}

/// A tensor back to an ndarray `[rows, cols]`.
pub fn array2(t: Tensor<2>) -> Array2<f32> {
    let [r, c] = t.dims();
    Array2::from_shape_vec((r, c), posenc::lm::model::to_vec(t)).unwrap()
}

/// An ndarray `[rows, cols]` as a tensor.
pub fn tensor2(a: &Array2<f32>, device: &burn::tensor::Device) -> Tensor<2> {
    let a = a.as_standard_layout();
    let data = burn::tensor::TensorData::new(a.iter().copied().collect(), [a.nrows(), a.ncols()]);
    Tensor::from_data(data, device)
}

/// Bytes of a pseudo-random text.
pub fn text(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b"abcdefgh ijklmnop\nqrst"[(x >> 33) as usize % 22]
        })
        .collect()
}

/// A temporary corpus folder with the three splits.
pub fn corpus(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("posenc-test-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("train.txt"), text(20_000, 1)).unwrap();
    std::fs::write(dir.join("valid.txt"), text(3_000, 2)).unwrap();
    std::fs::write(dir.join("test.txt"), text(3_000, 3)).unwrap();
    dir
}
