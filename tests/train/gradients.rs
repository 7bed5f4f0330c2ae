//! Autodiff against finite differences for every scheme's trainable position parameters
//! (and the query projection, through which rotations and absolute tables act), and causal
//! masking: changing a byte never changes the loss at an earlier position.

use burn::tensor::Device;
use posenc::lm::model::{
    int_tensor, to_vec, Kernels, Lm, ModelConfig, Ops, PositionContext, Scheme,
};

use crate::support::model::{map_param, params};
use crate::support::text;

fn batch(c: &ModelConfig) -> (Vec<i64>, Vec<i64>) {
    let t = text(4 * c.train_len + 8, 5);
    posenc::lm::data::train_batch(&t, 2, c.train_len, 3, 0).unwrap()
}

fn loss(lm: &Lm, c: &ModelConfig, ctx: &PositionContext, device: &Device) -> f64 {
    let (x, y) = batch(c);
    let shape = [2, c.train_len];
    let ops = Ops::new(Kernels::Fused, device);
    let l = lm
        .loss(
            c,
            ctx,
            ops,
            int_tensor(x, shape, device),
            int_tensor(y, shape, device),
        )
        .unwrap();
    f64::from(to_vec(l)[0])
}

fn position_params(scheme: Scheme) -> &'static [&'static str] {
    match scheme {
        Scheme::Learned => &["positions.learned"],
        Scheme::Shaw => &[
            "blocks.0.attn.positions.shaw_keys",
            "blocks.0.attn.positions.shaw_values",
        ],
        Scheme::Xl => &[
            "blocks.0.attn.positions.xl_w_r",
            "blocks.0.attn.positions.xl_u",
            "blocks.0.attn.positions.xl_v",
        ],
        Scheme::T5 => &["blocks.0.attn.positions.t5_table"],
        Scheme::Deberta => &["blocks.0.attn.positions.deberta_rel"],
        Scheme::Tupe => &[
            "positions.tupe",
            "blocks.0.attn.positions.tupe_u_q",
            "blocks.0.attn.positions.tupe_u_k",
            "blocks.0.attn.positions.t5_table",
        ],
        Scheme::Kerple => &[
            "blocks.0.attn.positions.kerple_r1",
            "blocks.0.attn.positions.kerple_r2",
        ],
        Scheme::Fire => &[
            "blocks.0.attn.positions.fire_w1",
            "blocks.0.attn.positions.fire_b1",
            "blocks.0.attn.positions.fire_w2",
            "blocks.0.attn.positions.fire_b2",
            "blocks.0.attn.positions.fire_c",
            "blocks.0.attn.positions.fire_threshold_scale",
        ],
        Scheme::Dpb => &[
            "blocks.0.attn.positions.dpb_layers.0.weight",
            "blocks.0.attn.positions.dpb_layers.0.bias",
            "blocks.0.attn.positions.dpb_layers.1.weight",
            "blocks.0.attn.positions.dpb_out_weight",
            "blocks.0.attn.positions.dpb_out_bias",
        ],
        Scheme::Cope => &["blocks.0.attn.positions.cope_pos_emb"],
        Scheme::DdAlibi => &[
            "blocks.0.attn.positions.ddalibi_gate_weight",
            "blocks.0.attn.positions.ddalibi_gate_bias",
        ],
        _ => &[],
    }
}

#[test]
fn position_parameter_gradients_match_finite_differences() {
    let device = Device::flex().autodiff();
    let mut report = Vec::new();
    for scheme in Scheme::ALL {
        // a length across the 32-row tile of the fused attention, past FIRE's threshold (set
        // between two positions: at a query on it the derivative in L is one-sided)
        let c = ModelConfig {
            train_len: 45,
            max_positions: 45,
            fire_threshold: 11.5,
            // the forgetting gate half open (sigma(0.5) = 0.62), not saturated as at 5
            dd_alibi_gate_bias: 0.5,
            ..ModelConfig::tiny(scheme)
        };
        let mut lm = Lm::new(&c, 11, &device).unwrap();
        if scheme == Scheme::Cope {
            // embeddings away from their initial zeros, so that the gates' path carries a
            // gradient to W_q
            lm = map_param(lm, "blocks.0.attn.positions.cope_pos_emb", |v| {
                for (n, e) in v.iter_mut().enumerate() {
                    *e = ((n * 7 % 11) as f32 - 5.0) / 5.0;
                }
            });
        }
        let ctx = PositionContext::new(&c, c.train_len, c.rope_scaling, &device).unwrap();
        let names = params(&lm, None);
        let (x, y) = batch(&c);
        let shape = [2, c.train_len];
        let grads = lm
            .loss(
                &c,
                &ctx,
                Ops::new(Kernels::Fused, &device),
                int_tensor(x, shape, &device),
                int_tensor(y, shape, &device),
            )
            .unwrap()
            .backward();
        let with_grads = params(&lm, Some(&grads));
        let mut targets: Vec<&str> = position_params(scheme).to_vec();
        targets.push("blocks.0.attn.query.weight");
        let mut worst = 0.0f64;
        let mut largest = 0.0f64;
        for target in targets {
            let size = names
                .iter()
                .find(|p| p.name == target)
                .unwrap_or_else(|| panic!("{scheme}: no parameter {target} in {names:?}"))
                .len;
            let grad = with_grads
                .iter()
                .find(|p| p.name == target)
                .and_then(|p| p.grad.as_ref())
                .expect("a gradient");
            // a few entries spread over the tensor
            for index in (0..size).step_by((size / 5).max(1)).take(6) {
                // Kerple's r2 starts at the ALiBi slopes (0.0039 for the second of 2 heads) and is
                // clamped at 1e-3: a step of 1e-2 would cross the clamp's kink
                let eps = if target.ends_with("kerple_r2") {
                    2e-3f32
                } else {
                    1e-2f32
                };
                let plus = map_param(lm.clone(), target, |v| v[index] += eps);
                let minus = map_param(lm.clone(), target, |v| v[index] -= eps);
                let fd = (loss(&plus, &c, &ctx, &device) - loss(&minus, &c, &ctx, &device))
                    / (2.0 * f64::from(eps));
                let ad = f64::from(grad[index]);
                let err = (fd - ad).abs();
                assert!(
                    err <= 2e-3 + 0.05 * ad.abs().max(fd.abs()),
                    "{scheme} {target}[{index}]: autodiff {ad:.6}, finite difference {fd:.6}"
                );
                worst = worst.max(err);
                largest = largest.max(ad.abs());
            }
        }
        report.push(format!(
            "{:<10} max |autodiff - finite difference| {worst:.1e} (largest gradient {largest:.1e})",
            scheme.name()
        ));
    }
    println!("{}", report.join("\n"));
}

#[test]
fn changing_a_byte_never_changes_an_earlier_loss() {
    let device = Device::flex();
    for scheme in Scheme::ALL {
        let c = ModelConfig::tiny(scheme);
        let lm = Lm::new(&c, 3, &device).unwrap();
        let ctx = PositionContext::new(&c, c.train_len, c.rope_scaling, &device).unwrap();
        let l = c.train_len;
        let x: Vec<i64> = text(l, 9).iter().map(|&b| b as i64).collect();
        let y: Vec<i64> = text(l, 10).iter().map(|&b| b as i64).collect();
        let nll = |x: Vec<i64>| {
            to_vec(
                lm.nll(
                    &c,
                    &ctx,
                    Ops::new(Kernels::Fused, &device),
                    int_tensor(x, [1, l], &device),
                    int_tensor(y.clone(), [1, l], &device),
                )
                .unwrap(),
            )
        };
        let base = nll(x.clone());
        for t in [1, l / 2, l - 1] {
            let mut changed = x.clone();
            changed[t] = (changed[t] + 101) % 256;
            let after = nll(changed);
            for p in 0..t {
                assert_eq!(
                    base[p], after[p],
                    "{scheme}: byte {t} changed the loss at {p}"
                );
            }
            assert!(
                (t..l).any(|p| base[p] != after[p]),
                "{scheme}: byte {t} changed nothing"
            );
        }
    }
}
