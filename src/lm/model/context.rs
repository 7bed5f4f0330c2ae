//! Position-only objects for one sequence length, built by [`crate::encodings`] as data and
//! moved to the device once per length.

use burn::tensor::{Bool, Device, Int, Tensor, TensorData};
use ndarray::Array2;

use crate::encodings::alibi::alibi_bias;
use crate::encodings::deberta::LogBuckets;
use crate::encodings::fire::fire_feature;
use crate::encodings::rope::{rope_cos_sin, RopeConfig, RopeScaling};
use crate::encodings::shaw::relative_index_matrix;
use crate::encodings::sinusoidal::{
    sinusoidal_embedding, SinusoidalAbsolute, SinusoidalLayout, DEFAULT_BASE,
};
use crate::encodings::t5::T5Buckets;
use crate::encodings::xpos::XPos;
use crate::error::Result;
use crate::lm::config::{ModelConfig, Scheme};
use crate::lm::kernels::Kernels;

/// The position-only objects of one scheme for $L$ positions (queries and keys alike), on
/// the device: exactly those of the model's scheme.
// built once per length and read by reference: the size of the largest variant costs nothing
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone)]
pub enum PositionObjects {
    /// Nothing (NoPE; the learned table is a parameter, [`super::AbsolutePositions`]).
    None,
    /// Sinusoidal table added to the input (interleaved, base 10000), `[L, d_model]`.
    Sinusoidal(Tensor<2>),
    /// RoPE $\cos$ and $\sin$ of $m\theta_i$ times the attention factor, repeated for both
    /// halves, `[L, d_head]` each.
    Rope {
        /// $\cos(m\theta_i)$.
        cos: Tensor<2>,
        /// $\sin(m\theta_i)$.
        sin: Tensor<2>,
    },
    /// xPos $\zeta^{\pm m/B}\cos$ and $\zeta^{\pm m/B}\sin$ ([`XPos::tables`]) for queries
    /// ($+$) and keys ($-$), `[L, d_head/2]` each.
    Xpos {
        /// Query $\zeta^{m/B}\cos(m\theta_i)$.
        q_cos: Tensor<2>,
        /// Query $\zeta^{m/B}\sin(m\theta_i)$.
        q_sin: Tensor<2>,
        /// Key $\zeta^{-n/B}\cos(n\theta_i)$.
        k_cos: Tensor<2>,
        /// Key $\zeta^{-n/B}\sin(n\theta_i)$.
        k_sin: Tensor<2>,
    },
    /// ALiBi bias of every head, `[H, L, L]`.
    Alibi(Tensor<3>),
    /// Shaw's clipped relative index $\text{clip}(j - i, -k, k) + k$, `[L, L]`.
    Shaw {
        /// The index.
        index: Tensor<2, Int>,
    },
    /// Transformer-XL.
    Xl {
        /// Sinusoidal $R_\delta$ for $\delta = L-1, \dots, 0$, `[L, d_model]`.
        r: Tensor<2>,
        /// The shift as a gather index: column $L - 1 - i + j$ of the raw $(q_i + v) \cdot r$
        /// scores holds distance $i - j$ (for $j \le i$; $L - 1$ above the diagonal, which the
        /// causal mask removes), `[L, L]`.
        index: Tensor<2, Int>,
    },
    /// T5 and TUPE's bias: the bucket of $j - i$ (causal, [`T5Buckets::matrix`]), flattened
    /// `[L*L]`.
    T5 {
        /// The buckets.
        buckets: Tensor<1, Int>,
    },
    /// DeBERTa's index $\text{clip}(\text{bucket}(i - j) + s, 0, 2s - 1)$
    /// ([`LogBuckets::index_matrix`]), `[L, L]`.
    Deberta {
        /// The index.
        index: Tensor<2, Int>,
    },
    /// Kerple's $|i - j|$, `[L, L]`.
    Kerple {
        /// The distances.
        distance: Tensor<2>,
    },
    /// FIRE's features $\psi(i - j) / \psi(\max(L_{thr}, i))$, 0 above the diagonal, `[L, L]`.
    Fire {
        /// The features.
        features: Tensor<2>,
    },
}

/// Everything about positions that does not depend on content or on trained weights, for a
/// sequence of `len` positions $0..L$.
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
    /// The scheme's objects.
    pub objects: PositionObjects,
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
        let objects = match c.scheme {
            Scheme::Nope | Scheme::Learned => PositionObjects::None,
            Scheme::Sinusoidal => {
                let table = SinusoidalAbsolute::new(c.d_model)?.table(len)?;
                PositionObjects::Sinusoidal(tensor2(&table, device))
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
                PositionObjects::Rope {
                    cos: both(&cos),
                    sin: both(&sin),
                }
            }
            Scheme::Xpos => {
                let xpos = XPos::new(dh, DEFAULT_BASE, c.xpos_scale_base)?;
                let (qp, kp) = XPos::centred_positions(len, len);
                let (q_cos, q_sin) = xpos.tables(&qp, false)?;
                let (k_cos, k_sin) = xpos.tables(&kp, true)?;
                PositionObjects::Xpos {
                    q_cos: tensor2(&q_cos, device),
                    q_sin: tensor2(&q_sin, device),
                    k_cos: tensor2(&k_cos, device),
                    k_sin: tensor2(&k_sin, device),
                }
            }
            Scheme::Alibi => {
                let bias = alibi_bias(h, len, len)?;
                let bias = bias.as_standard_layout();
                PositionObjects::Alibi(Tensor::from_data(
                    TensorData::new(bias.iter().copied().collect::<Vec<_>>(), [h, len, len]),
                    device,
                ))
            }
            Scheme::Shaw => PositionObjects::Shaw {
                index: index2(
                    &relative_index_matrix(len, len, c.shaw_max_relative)?,
                    device,
                ),
            },
            Scheme::Xl => {
                let distances: Vec<f64> = (0..len).rev().map(|d| d as f64).collect();
                let r = sinusoidal_embedding(
                    &distances,
                    c.d_model,
                    DEFAULT_BASE,
                    SinusoidalLayout::Concatenated,
                )?;
                let shift = Array2::from_shape_fn((len, len), |(i, j)| {
                    (len - 1 + j).saturating_sub(i).min(len - 1)
                });
                PositionObjects::Xl {
                    r: tensor2(&r, device),
                    index: index2(&shift, device),
                }
            }
            Scheme::T5 | Scheme::Tupe => {
                let buckets = T5Buckets::new(c.t5_num_buckets, c.t5_max_distance, false)?;
                // bucket(key - query), [L, L] -> [L*L]
                let flat: Vec<i64> = buckets
                    .matrix(len, len)?
                    .iter()
                    .map(|&b| b as i64)
                    .collect();
                PositionObjects::T5 {
                    buckets: Tensor::from_data(TensorData::new(flat, [len * len]), device),
                }
            }
            Scheme::Deberta => {
                let buckets = LogBuckets::new(c.deberta_bucket_size, c.deberta_max_position)?;
                PositionObjects::Deberta {
                    index: index2(&buckets.index_matrix(len, len)?, device),
                }
            }
            Scheme::Kerple => {
                let d = Array2::from_shape_fn((len, len), |(i, j)| i.abs_diff(j) as f32);
                PositionObjects::Kerple {
                    distance: tensor2(&d, device),
                }
            }
            Scheme::Fire => {
                let f = Array2::from_shape_fn((len, len), |(i, j)| {
                    if j > i {
                        0.0
                    } else {
                        fire_feature(i, j, c.fire_c, c.fire_threshold)
                    }
                });
                PositionObjects::Fire {
                    features: tensor2(&f, device),
                }
            }
        };
        Ok(Self {
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
            objects,
        })
    }

    /// Whether the objects depend on the length itself (dynamic NTK), so that a length-$L$
    /// prefix of a longer window is not scored as a window of length $L$.
    pub fn is_dynamic(c: &ModelConfig, rope_scaling: &RopeScaling) -> bool {
        c.scheme == Scheme::Rope && rope_scaling.is_dynamic()
    }
}
