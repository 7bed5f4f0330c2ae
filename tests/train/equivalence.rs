//! For every scheme, the burn application ([`posenc::lm::model::attend`]) equals the reference
//! attention on ndarray ([`posenc::attention::attention`]) on random inputs: scores, weights
//! and outputs of every head. The absolute schemes (sinusoidal, learned) are checked where the
//! model applies them: added to the embedded input, before LayerNorm and the projections, in
//! the model's own forward pass. The maximum absolute error per scheme is printed
//! (`cargo test --release --features train --test train equivalence -- --nocapture`).

use burn::tensor::{Device, Tensor};
use ndarray::{s, Array1, Array2};
use posenc::attention::{attention, PositionScheme};
use posenc::encodings::alibi::Alibi;
use posenc::encodings::cope::Cope;
use posenc::encodings::dd_alibi::DataDependentAlibi;
use posenc::encodings::deberta::{DebertaRelative, LogBuckets};
use posenc::encodings::dpb::{DpbLayer, DpbNorm, DynamicPositionBias};
use posenc::encodings::fire::Fire;
use posenc::encodings::kerple::{Kerple, KerpleKind};
use posenc::encodings::learned::LearnedAbsolute;
use posenc::encodings::nope::{is_nope_layer, NoPe};
use posenc::encodings::rope::{
    PairRope, RandomPositions, RandomRope, Rope, RopeConfig, RopeLayout,
};
use posenc::encodings::shaw::ShawRelative;
use posenc::encodings::sinusoidal::{SinusoidalAbsolute, DEFAULT_BASE};
use posenc::encodings::t5::{T5Bias, T5Buckets};
use posenc::encodings::tupe::Tupe;
use posenc::encodings::xl::{TransformerXl, XlDirection};
use posenc::encodings::xpos::XPos;
use posenc::lm::model::{
    int_tensor, AbsolutePositions, AbsoluteRows, LayerPositions, Lm, ModelConfig, Ops,
    PositionContext, Scheme,
};
use posenc::lm::ops::reference::attention_parts;

use crate::support::model::{array2, map_param, tensor2};
use crate::support::{normal, text};

fn vec1(t: Tensor<1>) -> Vec<f32> {
    posenc::lm::model::to_vec(t)
}

/// Head `h` of a `[1, H, L, d]` tensor.
fn head(t: &Tensor<4>, h: usize) -> Array2<f32> {
    let [_, _, l, d] = t.dims();
    array2(t.clone().narrow(1, h, 1).reshape([l, d]))
}

/// The reference scheme of head `h`, built from the burn model's parameters and the attention's
/// input `x [L, d_model]` (the forgetting gate's).
fn reference(c: &ModelConfig, lm: &Lm, h: usize, x: &Array2<f32>) -> Box<dyn PositionScheme> {
    let attn = &lm.blocks[0].attn;
    let p = &attn.positions;
    let dh = c.head_dim();
    let cols = s![.., h * dh..(h + 1) * dh];
    let t5 = |table: &Array2<f32>| {
        T5Bias::from_table(
            T5Buckets::new(c.t5_num_buckets, c.t5_max_distance, false).unwrap(),
            table.clone(),
        )
        .unwrap()
    };
    match c.scheme {
        Scheme::Nope => Box::new(NoPe),
        Scheme::Sinusoidal | Scheme::Learned => unreachable!("checked by check_absolute"),
        Scheme::Shaw => {
            let LayerPositions::Shaw(p) = p else {
                panic!("Shaw parameters expected")
            };
            Box::new(
                ShawRelative::from_tables(
                    c.shaw_max_relative,
                    array2(p.keys.val()),
                    array2(p.values.val()),
                )
                .unwrap(),
            )
        }
        Scheme::Xl => {
            let LayerPositions::Xl(p) = p else {
                panic!("XL parameters expected")
            };
            let w_r = array2(p.w_r.val()).slice(cols).to_owned();
            let u = array2(p.u.val()).row(h).to_owned();
            let v = array2(p.v.val()).row(h).to_owned();
            Box::new(TransformerXl::from_parts(w_r, u, v, XlDirection::Causal).unwrap())
        }
        Scheme::T5 => {
            let LayerPositions::T5(p) = p else {
                panic!("T5 parameters expected")
            };
            Box::new(t5(&array2(p.table.val())))
        }
        Scheme::Deberta => {
            let LayerPositions::Deberta(p) = p else {
                panic!("DeBERTa parameters expected")
            };
            // K^r = E^r W_k, Q^r = E^r W_q, [2s, d_model]; head h's columns
            let rel = array2(p.rel.val());
            let pk = linear(&rel, &attn.key);
            let pq = linear(&rel, &attn.query);
            let pick = |t: &Array2<f32>| t.slice(cols).to_owned();
            let buckets = LogBuckets::new(c.deberta_bucket_size, c.deberta_max_position).unwrap();
            Box::new(
                DebertaRelative::from_parts(
                    Some(buckets),
                    c.deberta_bucket_size,
                    pick(&pk),
                    pick(&pq),
                )
                .unwrap(),
            )
        }
        Scheme::Tupe => {
            let (AbsolutePositions::Tupe(positions), LayerPositions::Tupe(p)) = (&lm.positions, p)
            else {
                panic!("TUPE parameters expected")
            };
            let positions = array2(positions.val());
            let u_q = array2(p.u_q.val()).slice(cols).to_owned();
            let u_k = array2(p.u_k.val()).slice(cols).to_owned();
            let bias = t5(&array2(p.table.val()));
            Box::new(Tupe::from_parts(positions, u_q, u_k, Some(bias)).unwrap())
        }
        Scheme::Rope => Box::new(Rope::new(
            RopeConfig::new(dh, c.rope_base).unwrap(),
            RopeLayout::Half,
        )),
        Scheme::Alibi => Box::new(Alibi::new(c.heads).unwrap()),
        Scheme::Xpos => Box::new(XPos::new(dh, DEFAULT_BASE, c.xpos_scale_base).unwrap()),
        Scheme::Kerple => {
            let LayerPositions::Kerple(p) = p else {
                panic!("Kerple parameters expected")
            };
            Box::new(Kerple::new(KerpleKind::Log, vec1(p.r1.val()), vec1(p.r2.val())).unwrap())
        }
        Scheme::Fire => {
            let LayerPositions::Fire(p) = p else {
                panic!("FIRE parameters expected")
            };
            Box::new(
                Fire::from_weights(
                    Array1::from(vec1(p.w1.val())),
                    Array1::from(vec1(p.b1.val())),
                    array2(p.w2.val()),
                    Array1::from(vec1(p.b2.val())),
                    p.transform(c).unwrap(),
                )
                .unwrap(),
            )
        }
        Scheme::Dpb => {
            let LayerPositions::Dpb(p) = p else {
                panic!("DPB parameters expected")
            };
            let layers = p
                .layers
                .iter()
                .map(|l| DpbLayer {
                    weight: array2(l.weight.val()),
                    bias: Array1::from(vec1(l.bias.val())),
                    norm: l.gamma.as_ref().map(|g| DpbNorm {
                        gamma: Array1::from(vec1(g.val())),
                        beta: l.beta.as_ref().map(|b| Array1::from(vec1(b.val()))),
                    }),
                })
                .collect();
            Box::new(
                DynamicPositionBias::from_layers(
                    c.dpb_log_distance,
                    layers,
                    array2(p.out_weight.val()),
                    Array1::from(vec1(p.out_bias.val())),
                )
                .unwrap(),
            )
        }
        Scheme::PartialRope => {
            Box::new(PairRope::partial(dh, c.rope_base, c.partial_rotary_factor).unwrap())
        }
        Scheme::PRope => Box::new(PairRope::p_rope(dh, c.rope_base, c.p_rope_kept).unwrap()),
        Scheme::RopeNope if is_nope_layer(0, c.nope_every) => Box::new(NoPe),
        Scheme::RopeNope => Box::new(Rope::new(
            RopeConfig::new(dh, c.rope_base).unwrap(),
            RopeLayout::Half,
        )),
        Scheme::RandomRope => Box::new(RandomRope {
            config: RopeConfig::new(dh, c.rope_base).unwrap(),
            positions: RandomPositions::new(c.random_positions_max, c.random_positions_eval)
                .unwrap(),
        }),
        Scheme::DdAlibi => {
            let LayerPositions::DdAlibi(p) = p else {
                panic!("dd_alibi parameters expected")
            };
            let gate = DataDependentAlibi::from_parts(
                array2(p.gate_weight.val()),
                Array1::from(vec1(p.gate_bias.val())),
            )
            .unwrap();
            Box::new(gate.applied(x.view()).unwrap())
        }
        Scheme::Cope => {
            let LayerPositions::Cope(p) = p else {
                panic!("CoPE parameters expected")
            };
            Box::new(Cope::from_table(array2(p.pos_emb.val())).unwrap())
        }
    }
}

/// LayerNorm of every row, $\gamma (x - \mu) / \sqrt{\sigma^2 + \epsilon} + \beta$.
fn layer_norm(x: &Array2<f32>, ln: &burn::nn::LayerNorm) -> Array2<f32> {
    let gamma = Array1::from(vec1(ln.gamma.val()));
    let beta = Array1::from(vec1(ln.beta.as_ref().unwrap().val()));
    let mut out = x.clone();
    for mut row in out.rows_mut() {
        let mean = row.mean().unwrap();
        let var = row.mapv(|v| (v - mean).powi(2)).mean().unwrap();
        let inv = 1.0 / (var + posenc::lm::model::LAYER_NORM_EPS).sqrt();
        let normed = (&row - mean) * inv * &gamma + &beta;
        row.assign(&normed);
    }
    out
}

/// $x W + b$ of a burn `Linear` (weight `[d_in, d_out]`) on ndarray.
fn linear(x: &Array2<f32>, lin: &burn::nn::Linear) -> Array2<f32> {
    let w = array2(lin.weight.val());
    let b = Array1::from(vec1(lin.bias.as_ref().unwrap().val()));
    x.dot(&w) + &b
}

/// Absolute schemes, where the model applies them: the model's own forward pass on random
/// bytes (attention weights of layer 0, and the block's attention output) against the
/// reference composed on ndarray: $x_i = \sqrt{d} E[\text{byte}_i]$, the scheme's
/// `transform_qk` adds $p_i$ to it, then LayerNorm, $W_q, W_k, W_v$, position-free attention
/// per head ([`NoPe`]: the positions are in the input already) and $W_o$. A model that added
/// the table anywhere else (to q and k after the projections, or not at all) fails.
fn check_absolute(scheme: Scheme, seed: u64) -> f32 {
    let device = Device::flex();
    let c = ModelConfig::tiny(scheme);
    let (h, dh, l, d) = (c.heads, c.head_dim(), c.train_len, c.d_model);
    let lm = Lm::new(&c, seed, &device).unwrap();
    let ctx = PositionContext::new(&c, l, c.rope_scaling, &device).unwrap();
    let bytes: Vec<i64> = text(l, seed + 11).into_iter().map(i64::from).collect();
    // the model: its forward pass, attention weights of the first layer, [1, H, L, L]
    let ops = Ops::new(Default::default(), &device);
    let (_, probs) = lm
        .forward_traced(
            &c,
            &ctx,
            ops,
            int_tensor(bytes.clone(), [1, l], &device),
            true,
        )
        .unwrap();
    // the reference: sqrt(d) E[byte], [L, d]
    let e = array2(lm.embedding.val());
    let x = Array2::from_shape_fn((l, d), |(i, j)| {
        e[[bytes[i] as usize, j]] * (d as f32).sqrt()
    });
    let absolute: Box<dyn PositionScheme> = match scheme {
        Scheme::Sinusoidal => Box::new(SinusoidalAbsolute::new(d).unwrap()),
        _ => Box::new({
            let AbsolutePositions::Learned(table) = &lm.positions else {
                panic!("a learned table expected")
            };
            LearnedAbsolute::from_table(array2(table.val())).unwrap()
        }),
    };
    // x + p, [L, d]: the scheme's own application, on the input
    let (with_positions, _) = absolute.transform_qk(x.view(), x.view()).unwrap();
    let block = &lm.blocks[0];
    let normed = layer_norm(&with_positions, &block.ln_attn);
    let (q, k, v) = (
        linear(&normed, &block.attn.query),
        linear(&normed, &block.attn.key),
        linear(&normed, &block.attn.value),
    );
    let mut heads_out = Array2::<f32>::zeros((l, d));
    let mut worst = 0.0f32;
    for hh in 0..h {
        let cols = s![.., hh * dh..(hh + 1) * dh];
        let r = attention(q.slice(cols), k.slice(cols), v.slice(cols), &NoPe, hh, true).unwrap();
        worst = worst.max(max_abs_diff(&head(&probs[0], hh), &r.probs));
        heads_out.slice_mut(cols).assign(&r.output);
    }
    // the block's attention output from the same normalised input, [L, d]
    let rows = lm.positions.rows(&ctx).unwrap();
    let normed_input = tensor2(&normed, &device).reshape([1, l, d]);
    let (out, _) = block
        .attn
        .forward_parts(&c, &ctx, &rows, ops, normed_input)
        .unwrap();
    let reference_out = linear(&heads_out, &block.attn.out);
    worst.max(max_abs_diff(&array2(out.reshape([l, d])), &reference_out))
}

fn max_abs_diff(a: &Array2<f32>, b: &Array2<f32>) -> f32 {
    assert_eq!(a.dim(), b.dim());
    a.iter()
        .zip(b)
        .map(|(&x, &y)| {
            if x.is_infinite() || y.is_infinite() {
                assert_eq!(x, y, "masked entries differ");
                0.0
            } else {
                (x - y).abs()
            }
        })
        .fold(0.0, f32::max)
}

/// Max abs error over scores, weights and outputs of every head, for one scheme.
fn check(scheme: Scheme, seed: u64) -> f32 {
    if matches!(scheme, Scheme::Sinusoidal | Scheme::Learned) {
        return check_absolute(scheme, seed);
    }
    let device = Device::flex();
    let c = ModelConfig::tiny(scheme);
    let (h, dh, l) = (c.heads, c.head_dim(), c.train_len);
    let mut lm = Lm::new(&c, seed, &device).unwrap();
    if scheme == Scheme::Fire {
        // c and L as learned, away from their initial values: c = -0.23 (used as 0.23) and
        // L = 0.37 x 12 = 4.44, queries on both sides of it
        lm = map_param(lm, "blocks.0.attn.positions.fire_c", |v| v[0] = -0.23);
        lm = map_param(lm, "blocks.0.attn.positions.fire_threshold_scale", |v| {
            v[0] = 0.37
        });
    }
    if scheme == Scheme::Cope {
        // embeddings away from their initial zeros, which would hide the term
        lm = map_param(lm, "blocks.0.attn.positions.cope_pos_emb", |v| {
            let e = normal(1, v.len(), seed + 5);
            v.copy_from_slice(e.as_slice().unwrap());
        });
    }
    let ctx = PositionContext::new(&c, l, c.rope_scaling, &device).unwrap();
    // q, k, v: three [H L, dh] draws of one generator
    let drawn = normal(3 * h * l, dh, seed);
    let qkv: Vec<Array2<f32>> = (0..3)
        .map(|i| drawn.slice(s![i * h * l..(i + 1) * h * l, ..]).to_owned())
        .collect();
    let to4 = |a: &Array2<f32>| tensor2(a, &device).reshape([1, h, l, dh]);
    let (q, k, v) = (to4(&qkv[0]), to4(&qkv[1]), to4(&qkv[2]));
    // the attention's input, [L, d_model] (read by the forgetting gate), spread so that its
    // gates differ from token to token
    let x = normal(l, c.d_model, seed + 7) * 3.0;
    let ops = Ops::new(Default::default(), &device);
    let rows: AbsoluteRows = lm.positions.rows(&ctx).unwrap();
    let x_tensor = tensor2(&x, &device).reshape([1, l, c.d_model]);
    let terms = lm.blocks[0]
        .attn
        .terms(&c, &ctx, &rows, ops, (&x_tensor, &q, &k))
        .unwrap();
    let parts = attention_parts(q, k, v, terms, c.score_scale());
    let mut worst = 0.0f32;
    for hh in 0..h {
        let rows = s![hh * l..(hh + 1) * l, ..];
        let (qh, kh, vh) = (qkv[0].slice(rows), qkv[1].slice(rows), qkv[2].slice(rows));
        let scheme_ref = reference(&c, &lm, hh, &x);
        let r = attention(qh, kh, vh, scheme_ref.as_ref(), hh, true).unwrap();
        worst = worst
            .max(max_abs_diff(&head(&parts.scores, hh), &r.scores))
            .max(max_abs_diff(&head(&parts.probs, hh), &r.probs))
            .max(max_abs_diff(&head(&parts.output, hh), &r.output));
    }
    worst
}

#[test]
fn burn_attention_equals_the_reference_for_every_scheme() {
    let mut report = Vec::new();
    for scheme in Scheme::ALL {
        let err = (0..3).map(|seed| check(scheme, seed)).fold(0.0, f32::max);
        report.push(format!("{:<10} max abs error {err:.2e}", scheme.name()));
        assert!(
            err < 1e-4,
            "{scheme}: burn vs reference max abs error {err}"
        );
    }
    println!(
        "burn attention vs reference (scores, weights, outputs; 3 seeds):\n{}",
        report.join("\n")
    );
}
