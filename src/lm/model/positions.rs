//! Trainable position parameters, one structure per scheme: the model holds exactly the
//! parameters of its scheme ([`LayerPositions`] in every attention layer, [`AbsolutePositions`]
//! once per model), each initialised by the scheme's own constructor in
//! [`crate::encodings`], and combined with the position-only objects of a
//! [`PositionContext`] into the [`PositionTerms`] that the attention applies.
//!
//! In `model.safetensors` a parameter is named by its module path, the scheme's variant
//! joined to the field after it (`blocks.0.attn.positions.shaw_keys`,
//! `positions.learned`); see [`crate::lm::checkpoint::ParamPath`].

use burn::module::{Module, Param};
use burn::nn::Linear;
use burn::tensor::{Device, Tensor};
use ndarray::Array2;

use super::attention::PositionTerms;
use super::context::{PositionContext, PositionObjects};
use super::init::{normal, param1, param2};
use crate::encodings::alibi::alibi_slopes;
use crate::encodings::fire::Fire;
use crate::encodings::kerple::{Kerple, KerpleKind};
use crate::encodings::learned::LearnedAbsolute;
use crate::encodings::shaw::ShawRelative;
use crate::encodings::t5::T5Bias;
use crate::encodings::tupe::Tupe;
use crate::encodings::xl::{TransformerXl, XlDirection};
use crate::error::Result;
use crate::lm::config::{ModelConfig, Scheme};

/// Shaw et al.'s relative key and value vectors, shared by the heads.
#[derive(Module, Debug)]
pub struct ShawParams {
    /// $w^K$, `[2k+1, d_head]`.
    pub keys: Param<Tensor<2>>,
    /// $w^V$, `[2k+1, d_head]`.
    pub values: Param<Tensor<2>>,
}

/// Transformer-XL's projection of the sinusoidal distances and its two global biases.
#[derive(Module, Debug)]
pub struct XlParams {
    /// $W_R$ of every head side by side, `[r_dim, d_model]`.
    pub w_r: Param<Tensor<2>>,
    /// $u$ (content bias), `[heads, d_head]`.
    pub u: Param<Tensor<2>>,
    /// $v$ (position bias), `[heads, d_head]`.
    pub v: Param<Tensor<2>>,
}

/// T5's learned bias per bucket and head.
#[derive(Module, Debug)]
pub struct T5Params {
    /// $B$, `[num_buckets, heads]`.
    pub table: Param<Tensor<2>>,
}

/// DeBERTa's relative embeddings, projected by the layer's own $W_q, W_k$.
#[derive(Module, Debug)]
pub struct DebertaParams {
    /// $E^r$, `[2s, d_model]`.
    pub rel: Param<Tensor<2>>,
}

/// TUPE's untied projections of the absolute embeddings ([`AbsolutePositions::Tupe`]) and its
/// relative bucket bias (T5's, whose on-disk name it keeps: `t5_table`).
#[derive(Module, Debug)]
pub struct TupeParams {
    /// $U^Q$ of every head side by side, `[d_model, d_model]`.
    pub u_q: Param<Tensor<2>>,
    /// $U^K$, `[d_model, d_model]`.
    pub u_k: Param<Tensor<2>>,
    /// The bucket bias $B$, `[num_buckets, heads]`.
    pub table: Param<Tensor<2>>,
}

/// Kerple's logarithmic kernel per head.
#[derive(Module, Debug)]
pub struct KerpleParams {
    /// $r_1$, `[heads]`.
    pub r1: Param<Tensor<1>>,
    /// $r_2$, `[heads]`.
    pub r2: Param<Tensor<1>>,
}

/// FIRE's MLP from a normalised distance to a bias per head.
#[derive(Module, Debug)]
pub struct FireParams {
    /// $w_1$, `[hidden]`.
    pub w1: Param<Tensor<1>>,
    /// $b_1$, `[hidden]`.
    pub b1: Param<Tensor<1>>,
    /// $W_2$, `[hidden, heads]`.
    pub w2: Param<Tensor<2>>,
    /// $b_2$, `[heads]`.
    pub b2: Param<Tensor<1>>,
}

/// The trainable position parameters of one attention layer: exactly those of the model's
/// scheme. Schemes without any per layer (NoPE, sinusoidal, learned, RoPE, ALiBi, xPos) have
/// none (`Option::None` in [`super::SelfAttention::positions`]).
#[derive(Module, Debug)]
pub enum LayerPositions {
    /// Shaw et al.
    Shaw(ShawParams),
    /// Transformer-XL.
    Xl(XlParams),
    /// T5.
    T5(T5Params),
    /// DeBERTa.
    Deberta(DebertaParams),
    /// TUPE.
    Tupe(TupeParams),
    /// Kerple.
    Kerple(KerpleParams),
    /// FIRE.
    Fire(FireParams),
}

/// T5's table from [`T5Bias::new`] (causal, $\mathcal N(0, 1)$), scaled to
/// $\mathcal N(0, 0.1^2)$: a mild start.
fn t5_table(c: &ModelConfig, seed: u64, device: &Device) -> Result<Param<Tensor<2>>> {
    let t5 = T5Bias::new(c.t5_num_buckets, c.t5_max_distance, false, c.heads, seed)?;
    Ok(param2(&(t5.table * 0.1), device))
}

impl LayerPositions {
    /// Initial values from the encodings' own constructors, seeded by `seed`; `None` for the
    /// schemes without parameters per layer.
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Option<Self>> {
        let (h, dh, d) = (c.heads, c.head_dim(), c.d_model);
        Ok(Some(match c.scheme {
            Scheme::Shaw => {
                let shaw = ShawRelative::new(c.shaw_max_relative, dh, 0.1, seed)?;
                Self::Shaw(ShawParams {
                    keys: param2(&shaw.keys, device),
                    values: param2(&shaw.values, device),
                })
            }
            Scheme::Xl => {
                // one TransformerXl per head: W_R [r_dim, d_head], u, v [d_head]
                let heads = (0..h)
                    .map(|i| TransformerXl::new(d, dh, XlDirection::Causal, seed + i as u64))
                    .collect::<Result<Vec<_>>>()?;
                let w_r = Array2::from_shape_fn((d, d), |(r, c)| heads[c / dh].w_r[[r, c % dh]]);
                let u = Array2::from_shape_fn((h, dh), |(i, c)| heads[i].u[c]);
                let v = Array2::from_shape_fn((h, dh), |(i, c)| heads[i].v[c]);
                Self::Xl(XlParams {
                    w_r: param2(&w_r, device),
                    u: param2(&u, device),
                    v: param2(&v, device),
                })
            }
            Scheme::T5 => Self::T5(T5Params {
                table: t5_table(c, seed, device)?,
            }),
            Scheme::Tupe => {
                let table = t5_table(c, seed, device)?;
                // U ~ N(0, 1/d_model) per head column block, from Tupe::new
                let tupe = Tupe::new(1, d, d, seed + 1, None)?;
                Self::Tupe(TupeParams {
                    u_q: param2(&tupe.u_q, device),
                    u_k: param2(&tupe.u_k, device),
                    table,
                })
            }
            Scheme::Deberta => Self::Deberta(DebertaParams {
                rel: param2(&normal((2 * c.deberta_bucket_size, d), 1.0, seed), device),
            }),
            Scheme::Kerple => {
                // r1 = 1, r2 = the ALiBi slopes: starts close to ALiBi (-r1 r2 d for small r2 d)
                let kerple = Kerple::new(KerpleKind::Log, vec![1.0; h], alibi_slopes(h)?)?;
                Self::Kerple(KerpleParams {
                    r1: param1(&kerple.r1, device),
                    r2: param1(&kerple.r2, device),
                })
            }
            Scheme::Fire => {
                let fire = Fire::new(h, c.fire_hidden, c.fire_c, c.fire_threshold, seed)?;
                Self::Fire(FireParams {
                    w1: param1(&fire.w1.to_vec(), device),
                    b1: param1(&fire.b1.to_vec(), device),
                    w2: param2(&fire.w2, device),
                    b2: param1(&fire.b2.to_vec(), device),
                })
            }
            Scheme::Nope
            | Scheme::Sinusoidal
            | Scheme::Learned
            | Scheme::Rope
            | Scheme::Alibi
            | Scheme::Xpos => return Ok(None),
        }))
    }
}

/// The T5 bias $B[\text{bucket}(j - i), h]$ of every head, `[H, L, L]`, from the flattened
/// bucket matrix `[L*L]`.
fn bucket_bias(
    table: &Param<Tensor<2>>,
    buckets: &Tensor<1, burn::tensor::Int>,
    l: usize,
) -> Tensor<3> {
    let h = table.dims()[1];
    // B[bucket(j - i), h], [L*L, H] -> [H, L, L]
    table
        .val()
        .select(0, buckets.clone())
        .reshape([l, l, h])
        .permute([2, 0, 1])
}

/// `[n, d_model] -> [H, n, d_head]`.
fn split_heads(t: Tensor<2>, heads: usize) -> Tensor<3> {
    let [n, d] = t.dims();
    t.reshape([n, heads, d / heads]).swap_dims(0, 1)
}

/// The scheme's position terms for one layer: its parameters (`layer`, and TUPE's absolute
/// embeddings for positions $0..L$ in `tupe_p`) combined with the context's objects. `query`
/// and `key` are the layer's projections (DeBERTa projects its relative embeddings with
/// them). A layer and a context of different schemes (which [`super::Lm`] never pairs) give
/// [`PositionTerms::None`].
pub fn position_terms(
    layer: Option<&LayerPositions>,
    c: &ModelConfig,
    ctx: &PositionContext,
    query: &Linear,
    key: &Linear,
    tupe_p: Option<Tensor<2>>,
) -> PositionTerms {
    let h = c.heads;
    let l = ctx.len;
    match (layer, &ctx.objects) {
        (Some(LayerPositions::Shaw(p)), PositionObjects::Shaw { .. }) => PositionTerms::Shaw {
            keys: p.keys.val(),
            values: p.values.val(),
        },
        (Some(LayerPositions::Xl(p)), PositionObjects::Xl { r, .. }) => PositionTerms::Xl {
            // r_delta = R_delta W_R for distances L-1..0, [H, L, dh]
            r: split_heads(r.clone().matmul(p.w_r.val()), h),
            u: p.u.val(),
            v: p.v.val(),
        },
        (Some(LayerPositions::Deberta(p)), PositionObjects::Deberta { .. }) => {
            // K^r = E^r W_k, Q^r = E^r W_q, [H, 2s, dh]
            PositionTerms::Deberta {
                pos_key: split_heads(key.forward(p.rel.val()), h),
                pos_query: split_heads(query.forward(p.rel.val()), h),
            }
        }
        (Some(LayerPositions::T5(p)), PositionObjects::T5 { buckets }) => {
            PositionTerms::Bias(bucket_bias(&p.table, buckets, l))
        }
        (Some(LayerPositions::Tupe(p)), PositionObjects::T5 { buckets }) => match tupe_p {
            // p U^Q, p U^K, [H, L, dh]
            Some(pos) => PositionTerms::Tupe {
                pos_query: split_heads(pos.clone().matmul(p.u_q.val()), h),
                pos_key: split_heads(pos.matmul(p.u_k.val()), h),
                bias: bucket_bias(&p.table, buckets, l),
            },
            None => PositionTerms::Bias(bucket_bias(&p.table, buckets, l)),
        },
        (Some(LayerPositions::Kerple(p)), PositionObjects::Kerple { distance }) => {
            // -r1 ln(1 + r2 |i - j|), r1, r2 kept > 0, [H, L, L]
            let r1 = p.r1.val().clamp_min(1e-3).reshape([h, 1, 1]);
            let r2 = p.r2.val().clamp_min(1e-3).reshape([h, 1, 1]);
            PositionTerms::Bias(
                (distance.clone().unsqueeze::<3>() * r2)
                    .log1p()
                    .mul(r1)
                    .neg(),
            )
        }
        (Some(LayerPositions::Fire(p)), PositionObjects::Fire { features }) => {
            let hidden = p.w1.dims()[0];
            // ReLU(x w1 + b1) W2 + b2 for each feature x, [L*L, H] -> [H, L, L]
            let x = features.clone().reshape([l * l, 1]);
            let hid = burn::tensor::activation::relu(
                x.matmul(p.w1.val().reshape([1, hidden])) + p.b1.val().unsqueeze::<2>(),
            );
            let out = hid.matmul(p.w2.val()) + p.b2.val().unsqueeze::<2>();
            PositionTerms::Bias(out.reshape([l, l, h]).permute([2, 0, 1]))
        }
        (None, PositionObjects::Alibi(bias)) => PositionTerms::Bias(bias.clone()),
        _ => PositionTerms::None,
    }
}

/// Model-level position parameters: an absolute table shared by all layers.
#[derive(Module, Debug)]
pub enum AbsolutePositions {
    /// The learned table added to the input, `[max_positions, d_model]`.
    Learned(Param<Tensor<2>>),
    /// TUPE's absolute embeddings $p$, `[max_positions, d_model]` (never added to the input).
    Tupe(Param<Tensor<2>>),
}

impl AbsolutePositions {
    /// Initial values from the encodings' constructors, seeded by `seed`; `None` for the
    /// schemes without a model-level table.
    ///
    /// # Errors
    /// When the encodings reject the configuration.
    pub fn init(c: &ModelConfig, seed: u64, device: &Device) -> Result<Option<Self>> {
        let d = c.d_model;
        Ok(match c.scheme {
            Scheme::Learned => {
                let table = LearnedAbsolute::new(c.max_positions, d, seed + 7, 0.02)?;
                Some(Self::Learned(param2(&table.table, device)))
            }
            Scheme::Tupe => {
                let tupe = Tupe::new(c.max_positions, d, d, seed + 7, None)?;
                Some(Self::Tupe(param2(&tupe.positions, device)))
            }
            _ => None,
        })
    }
}
