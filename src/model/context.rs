//! Position-only objects for one sequence length, built by [`crate::encodings`] as data and
//! moved to the device once per length.

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use ndarray::Array2;

use super::config::{ModelConfig, Scheme};
use super::kernels::Kernels;
use crate::encodings::alibi::alibi_bias;
use crate::encodings::deberta::{DebertaRelative, LogBuckets};
use crate::encodings::fire::fire_feature;
use crate::encodings::rope::{rope_cos_sin, RopeConfig, RopeScaling};
use crate::encodings::shaw::relative_index_matrix;
use crate::encodings::sinusoidal::{
    sinusoidal_embedding, SinusoidalAbsolute, SinusoidalLayout, DEFAULT_BASE,
};
use crate::encodings::t5::T5Buckets;
use crate::encodings::xpos::XPos;
use crate::error::Result;

/// Everything about positions that does not depend on content or on trained weights, for a
/// sequence of `len` positions $0..L$ (queries and keys alike). Only the fields of the
/// model's scheme are `Some`.
#[derive(Debug, Clone)]
pub struct PositionContext {
    /// $L$.
    pub len: usize,
    /// The kernels a forward pass uses: fused on the Flex CPU backend, the reference elsewhere
    /// ([`PositionContext::with_kernels`] chooses).
    pub kernels: Kernels,
    /// `true` above the diagonal (future keys, masked), `[L, L]`.
    pub causal_mask: Tensor<2, Bool>,
    /// Positions $0..L$ clamped to the absolute tables' last row, `[L]`.
    pub clamped_positions: Tensor<1, Int>,
    /// Sinusoidal table (interleaved, base 10000), `[L, d_model]`.
    pub sinusoidal: Option<Tensor<2>>,
    /// RoPE $\cos$ and $\sin$ of $m\theta_i$ times the attention factor, repeated for both
    /// halves, `[L, d_head]` each.
    pub rope: Option<(Tensor<2>, Tensor<2>)>,
    /// xPos $\zeta^{\pm m/B}\cos$ and $\zeta^{\pm m/B}\sin$ for queries and keys,
    /// `[L, d_head/2]` each: `(q_cos, q_sin, k_cos, k_sin)`.
    pub xpos: Option<[Tensor<2>; 4]>,
    /// ALiBi bias of every head, `[H, L, L]`.
    pub alibi: Option<Tensor<3>>,
    /// Shaw clipped relative index $\text{clip}(j - i, -k, k) + k$, `[L, L]`.
    pub shaw_index: Option<Tensor<2, Int>>,
    /// Transformer-XL sinusoidal $R_\delta$ for $\delta = L-1, \dots, 0$, `[L, d_model]`.
    pub xl_r: Option<Tensor<2>>,
    /// Transformer-XL's shift as a gather index: column $L - 1 - i + j$ of the raw
    /// $(q_i + v) \cdot r$ scores holds distance $i - j$ (for $j \le i$; $L - 1$ above the
    /// diagonal, which the causal mask removes), `[L, L]`.
    pub xl_index: Option<Tensor<2, Int>>,
    /// T5 bucket of $j - i$ (causal), flattened `[L*L]`.
    pub t5_buckets: Option<Tensor<1, Int>>,
    /// DeBERTa index $\text{clip}(\text{bucket}(i - j) + s, 0, 2s - 1)$, `[L, L]`.
    pub deberta_index: Option<Tensor<2, Int>>,
    /// $|i - j|$ (Kerple), `[L, L]`.
    pub distance: Option<Tensor<2>>,
    /// FIRE features $\psi(i - j) / \psi(\max(L_{thr}, i))$, 0 above the diagonal, `[L, L]`.
    pub fire_features: Option<Tensor<2>>,
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

/// `[rows, cols]` index array to an integer tensor.
pub fn index2(a: &Array2<usize>, device: &Device) -> Tensor<2, Int> {
    let a = a.as_standard_layout();
    let values: Vec<i64> = a.iter().map(|&x| x as i64).collect();
    Tensor::from_data(TensorData::new(values, [a.nrows(), a.ncols()]), device)
}

impl PositionContext {
    /// The same context with `kernels` (the fused ones only where the device is Flex).
    #[must_use]
    pub fn with_kernels(mut self, kernels: Kernels) -> Self {
        self.kernels = kernels.for_device(&self.causal_mask.device());
        self
    }

    /// The objects for `len` positions. `rope_scaling` replaces plain RoPE's frequencies at
    /// inference (PI, NTK, dynamic NTK, YaRN, Llama3; dynamic NTK looks at `len`).
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn new(
        c: &ModelConfig,
        len: usize,
        rope_scaling: RopeScaling,
        device: &Device,
    ) -> Result<Self> {
        let (h, dh) = (c.heads, c.head_dim());
        let positions: Vec<f64> = (0..len).map(|p| p as f64).collect();
        let mut ctx = Self {
            len,
            kernels: Kernels::Fused.for_device(device),
            // true where j > i
            causal_mask: Tensor::<2, Bool>::tril_mask([len, len], 0, device),
            clamped_positions: Tensor::from_data(
                TensorData::new(
                    (0..len)
                        .map(|p| p.min(c.max_positions - 1) as i64)
                        .collect::<Vec<_>>(),
                    [len],
                ),
                device,
            ),
            sinusoidal: None,
            rope: None,
            xpos: None,
            alibi: None,
            shaw_index: None,
            xl_r: None,
            xl_index: None,
            t5_buckets: None,
            deberta_index: None,
            distance: None,
            fire_features: None,
        };
        match c.scheme {
            Scheme::Sinusoidal => {
                let table = SinusoidalAbsolute::new(c.d_model)?.table(len)?;
                ctx.sinusoidal = Some(tensor2(&table, device));
            }
            Scheme::Rope => {
                let config = RopeConfig::with_scaling(dh, c.rope_base, rope_scaling)?;
                let freqs = config.frequencies(Some(len))?;
                let (cos, sin) = rope_cos_sin(&positions, &freqs);
                // [L, d/2] -> [L, d] (both halves of the half layout)
                let both = |t: &Array2<f32>| {
                    let t = tensor2(t, device);
                    Tensor::cat(vec![t.clone(), t], 1)
                };
                ctx.rope = Some((both(&cos), both(&sin)));
            }
            Scheme::Xpos => {
                let xpos = XPos::new(dh, DEFAULT_BASE, c.xpos_scale_base)?;
                let (qp, kp) = XPos::centred_positions(len, len);
                // XPos::apply on rows (1, 0, 1, 0, ...) gives (s cos, s sin) per pair
                let ones =
                    Array2::from_shape_fn((len, dh), |(_, c)| if c % 2 == 0 { 1.0 } else { 0.0 });
                let q = xpos.apply(ones.view(), &qp, false)?;
                let k = xpos.apply(ones.view(), &kp, true)?;
                let even = |a: &Array2<f32>, off: usize| {
                    tensor2(
                        &Array2::from_shape_fn((len, dh / 2), |(r, i)| a[[r, 2 * i + off]]),
                        device,
                    )
                };
                ctx.xpos = Some([even(&q, 0), even(&q, 1), even(&k, 0), even(&k, 1)]);
            }
            Scheme::Alibi => {
                let bias = alibi_bias(h, len, len)?;
                let bias = bias.as_standard_layout();
                ctx.alibi = Some(Tensor::from_data(
                    TensorData::new(bias.iter().copied().collect::<Vec<_>>(), [h, len, len]),
                    device,
                ));
            }
            Scheme::Shaw => {
                let index = relative_index_matrix(len, len, c.shaw_max_relative)?;
                ctx.shaw_index = Some(index2(&index, device));
            }
            Scheme::Xl => {
                let distances: Vec<f64> = (0..len).rev().map(|d| d as f64).collect();
                let r = sinusoidal_embedding(
                    &distances,
                    c.d_model,
                    DEFAULT_BASE,
                    SinusoidalLayout::Concatenated,
                )?;
                ctx.xl_r = Some(tensor2(&r, device));
                let shift = Array2::from_shape_fn((len, len), |(i, j)| {
                    (len - 1 + j).saturating_sub(i).min(len - 1)
                });
                ctx.xl_index = Some(index2(&shift, device));
            }
            Scheme::T5 | Scheme::Tupe => {
                let buckets = T5Buckets::new(c.t5_num_buckets, c.t5_max_distance, false)?;
                // bucket(key - query), [L*L]
                let flat: Vec<i64> = (0..len * len)
                    .map(|e| buckets.bucket((e % len) as i64 - (e / len) as i64) as i64)
                    .collect();
                ctx.t5_buckets = Some(Tensor::from_data(
                    TensorData::new(flat, [len * len]),
                    device,
                ));
            }
            Scheme::Deberta => {
                let buckets = LogBuckets::new(c.deberta_bucket_size, c.deberta_max_position)?;
                let s = c.deberta_bucket_size;
                // the index depends on the buckets only: empty tables of the right shape
                let zeros = Array2::zeros((2 * s, 1));
                let rel = DebertaRelative::from_parts(Some(buckets), s, zeros.clone(), zeros)?;
                ctx.deberta_index = Some(index2(&rel.index_matrix(len, len), device));
            }
            Scheme::Kerple => {
                let d = Array2::from_shape_fn((len, len), |(i, j)| i.abs_diff(j) as f32);
                ctx.distance = Some(tensor2(&d, device));
            }
            Scheme::Fire => {
                let f = Array2::from_shape_fn((len, len), |(i, j)| {
                    if j > i {
                        0.0
                    } else {
                        fire_feature(i, j, c.fire_c, c.fire_threshold)
                    }
                });
                ctx.fire_features = Some(tensor2(&f, device));
            }
            Scheme::Nope | Scheme::Learned => {}
        }
        Ok(ctx)
    }

    /// Whether the objects depend on the length itself (dynamic NTK), so that a length-$L$
    /// prefix of a longer window is not scored as a window of length $L$.
    pub fn is_dynamic(c: &ModelConfig, rope_scaling: &RopeScaling) -> bool {
        c.scheme == Scheme::Rope && rope_scaling.is_dynamic()
    }
}
