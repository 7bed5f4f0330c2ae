//! Model-level properties of the RoPE variants: partial RoPE with factor 1, p-RoPE keeping
//! every pair, the RoPE/NoPE hybrid without a NoPE layer and randomized RoPE evaluated at
//! $0..L$ are RoPE exactly (the same logits, bit for bit); the hybrid's NoPE layer gets no
//! rotation; randomized RoPE's training step (a table per sequence) on the fused path against
//! the composed reference, values and gradients, and its gradient against finite differences.

use burn::tensor::Device;
use posenc::encodings::rope::RandomEval;
use posenc::lm::model::{
    int_tensor, to_vec, Kernels, LayerPositions, Lm, ModelConfig, Ops, PositionContext, Scheme,
};
use posenc::lm::ops::Rotation;

use super::assert_close;
use crate::support::model::{map_param, params};
use crate::support::text;

/// A 2-layer model of `scheme` with training length 40, on `device`.
fn config(scheme: Scheme) -> ModelConfig {
    ModelConfig {
        layers: 2,
        train_len: 40,
        max_positions: 40,
        ..ModelConfig::tiny(scheme)
    }
}

/// Logits of `c`'s model (seed 3) on 2 windows of `l` bytes, at the evaluation positions.
fn logits(c: &ModelConfig, l: usize, kernels: Kernels) -> Vec<f32> {
    let device = Device::flex();
    let lm = Lm::new(c, 3, &device).unwrap();
    let ctx = PositionContext::new(c, l, c.rope_scaling, &device).unwrap();
    let bytes: Vec<i64> = text(2 * l, 4).into_iter().map(i64::from).collect();
    let out = lm
        .forward(
            c,
            &ctx,
            Ops::new(kernels, &device),
            int_tensor(bytes, [2, l], &device),
        )
        .unwrap();
    to_vec(out)
}

#[test]
fn limits_of_the_rope_variants_are_rope_exactly() {
    let rope = config(Scheme::Rope);
    let limits = [
        ModelConfig {
            partial_rotary_factor: 1.0,
            ..config(Scheme::PartialRope)
        },
        ModelConfig {
            p_rope_kept: 1.0,
            ..config(Scheme::PRope)
        },
        // 2 layers, a NoPE layer every 3: none
        ModelConfig {
            nope_every: 3,
            ..config(Scheme::RopeNope)
        },
        ModelConfig {
            random_positions_eval: RandomEval::Contiguous,
            ..config(Scheme::RandomRope)
        },
    ];
    for kernels in Kernels::ALL {
        let want = logits(&rope, 70, kernels);
        for c in &limits {
            assert_eq!(logits(c, 70, kernels), want, "{} {kernels}", c.scheme);
        }
    }
    // and the defaults are not
    for scheme in [Scheme::PartialRope, Scheme::PRope, Scheme::RandomRope] {
        let c = config(scheme);
        assert_ne!(
            logits(&c, 70, Kernels::Fused),
            logits(&rope, 70, Kernels::Fused)
        );
    }
}

/// With a NoPE layer every 2, layer 0 rotates and layer 1 hands attention no term at all.
#[test]
fn the_hybrid_nope_layer_has_no_position_term() {
    let device = Device::flex();
    let c = ModelConfig {
        nope_every: 2,
        ..config(Scheme::RopeNope)
    };
    let lm = Lm::new(&c, 3, &device).unwrap();
    let ctx = PositionContext::new(&c, 10, c.rope_scaling, &device).unwrap();
    let rows = lm.positions.rows(&ctx).unwrap();
    let q = burn::tensor::Tensor::<4>::zeros([1, c.heads, 10, c.head_dim()], &device);
    let x = burn::tensor::Tensor::<3>::zeros([1, 10, c.d_model], &device);
    let ops = Ops::reference();
    for (layer, rotates) in [(0, true), (1, false)] {
        let attn = &lm.blocks[layer].attn;
        let LayerPositions::RopeNope(p) = &attn.positions else {
            panic!("hybrid parameters expected")
        };
        assert_eq!(p.layer, layer);
        let terms = attn.terms(&c, &ctx, &rows, ops, (&x, &q, &q)).unwrap();
        assert_eq!(
            matches!(terms.rotation, Some(Rotation::Half { .. })),
            rotates
        );
        assert!(terms.bias.is_none() && terms.query_table.is_none());
    }
    assert_ne!(
        logits(&c, 40, Kernels::Fused),
        logits(&config(Scheme::Rope), 40, Kernels::Fused)
    );
}

/// A training step of randomized RoPE: each sequence at its own positions (a table per
/// sequence), across the 32-row tile; fused against reference (loss and every gradient), the
/// same step drawn twice alike, another step otherwise; and the query weight's gradient
/// against central differences.
#[test]
fn randomized_rope_training_step_fused_matches_reference() {
    let device = Device::flex().autodiff();
    let c = ModelConfig {
        random_positions_max: 500,
        ..config(Scheme::RandomRope)
    };
    let l = 45;
    let lm = Lm::new(&c, 5, &device).unwrap();
    let base = PositionContext::new(&c, l, c.rope_scaling, &device).unwrap();
    let step = base.for_step(&c, 3, 7, 11).unwrap();
    let bytes = |seed| -> Vec<i64> { text(3 * l, seed).into_iter().map(i64::from).collect() };
    let loss = |lm: &Lm, ctx: &PositionContext, kernels| {
        lm.loss(
            &c,
            ctx,
            Ops::new(kernels, &device),
            int_tensor(bytes(1), [3, l], &device),
            int_tensor(bytes(2), [3, l], &device),
        )
        .unwrap()
    };
    let run = |kernels| {
        let value = loss(&lm, &step, kernels);
        let grads = value.clone().backward();
        (to_vec(value), params(&lm, Some(&grads)))
    };
    let (fused_loss, fused) = run(Kernels::Fused);
    let (reference_loss, reference) = run(Kernels::Reference);
    assert_close("random_rope step loss", &fused_loss, &reference_loss);
    for (f, r) in fused.iter().zip(&reference) {
        let (Some(fg), Some(rg)) = (&f.grad, &r.grad) else {
            panic!("no gradient for {}", f.name)
        };
        if rg.iter().all(|g| g.abs() < 1e-6) {
            continue;
        }
        assert_close(&format!("random_rope step d{}", f.name), fg, rg);
    }
    // the same step draws the same positions; another step and the evaluation others
    let value = |ctx: &PositionContext| to_vec(loss(&lm, ctx, Kernels::Fused))[0];
    let again = base.for_step(&c, 3, 7, 11).unwrap();
    assert_eq!(value(&again), fused_loss[0]);
    assert_ne!(value(&base.for_step(&c, 3, 7, 12).unwrap()), fused_loss[0]);
    assert_ne!(value(&base), fused_loss[0]);
    // a scheme with fixed positions keeps its context
    let rope = config(Scheme::Rope);
    let fixed = PositionContext::new(&rope, l, rope.rope_scaling, &device).unwrap();
    assert!(matches!(
        fixed.for_step(&rope, 3, 7, 11).unwrap(),
        std::borrow::Cow::Borrowed(_)
    ));
    // d loss / d W_q against central differences at a few entries
    let target = "blocks.0.attn.query.weight";
    let grad = fused
        .iter()
        .find(|p| p.name == target)
        .and_then(|p| p.grad.clone())
        .unwrap();
    let mut worst = 0.0f64;
    for index in [0, 37, 101, 200] {
        let eps = 1e-2f32;
        let plus = map_param(lm.clone(), target, |v| v[index] += eps);
        let minus = map_param(lm.clone(), target, |v| v[index] -= eps);
        let fd = (f64::from(value_of(&plus, &c, &step, &device, l))
            - f64::from(value_of(&minus, &c, &step, &device, l)))
            / (2.0 * f64::from(eps));
        let ad = f64::from(grad[index]);
        let err = (fd - ad).abs();
        // as tests/train/gradients.rs: f32 losses, steps of 1e-2
        assert!(
            err <= 2e-3 + 0.05 * ad.abs().max(fd.abs()),
            "{target}[{index}]: autodiff {ad:.6}, finite difference {fd:.6}"
        );
        worst = worst.max(err);
    }
    println!("random_rope step: dW_q against finite differences, max |difference| {worst:.1e}");
}

/// The fused loss of `lm` on the step's fixed bytes.
fn value_of(lm: &Lm, c: &ModelConfig, ctx: &PositionContext, device: &Device, l: usize) -> f32 {
    let bytes = |seed| -> Vec<i64> { text(3 * l, seed).into_iter().map(i64::from).collect() };
    let loss = lm
        .loss(
            c,
            ctx,
            Ops::new(Kernels::Fused, device),
            int_tensor(bytes(1), [3, l], device),
            int_tensor(bytes(2), [3, l], device),
        )
        .unwrap();
    to_vec(loss)[0]
}
