//! Every scheme's model, fused against the composed reference at a length past its training
//! length and across the 32-row tile: the loss and the gradient of every parameter (the
//! position terms' compact objects reach their parameters through the fused attention's
//! backward on one path and through the `[.., L, L]` expansions on the other).

use burn::tensor::Device;
use posenc::lm::model::{
    int_tensor, to_vec, Kernels, Lm, ModelConfig, Ops, PositionContext, Scheme,
};

use super::assert_close;
use crate::support::model::params;
use crate::support::text;

#[test]
fn every_scheme_fused_matches_reference_past_the_training_length() {
    let device = Device::flex().autodiff();
    let l = 70;
    for scheme in Scheme::ALL {
        let c = ModelConfig {
            train_len: 40,
            max_positions: 40,
            fire_threshold: 40.0,
            ..ModelConfig::tiny(scheme)
        };
        let lm = Lm::new(&c, 5, &device).unwrap();
        let ctx = PositionContext::new(&c, l, c.rope_scaling, &device).unwrap();
        let bytes = |seed| -> Vec<i64> { text(2 * l, seed).into_iter().map(i64::from).collect() };
        let run = |kernels| {
            let loss = lm
                .loss(
                    &c,
                    &ctx,
                    Ops::new(kernels, &device),
                    int_tensor(bytes(1), [2, l], &device),
                    int_tensor(bytes(2), [2, l], &device),
                )
                .unwrap();
            let grads = loss.clone().backward();
            (to_vec(loss), params(&lm, Some(&grads)))
        };
        let (fused_loss, fused) = run(Kernels::Fused);
        let (reference_loss, reference) = run(Kernels::Reference);
        assert_close(
            &format!("{scheme} L={l} loss"),
            &fused_loss,
            &reference_loss,
        );
        for (f, r) in fused.iter().zip(&reference) {
            let (Some(fg), Some(rg)) = (&f.grad, &r.grad) else {
                panic!("{scheme}: no gradient for {}", f.name)
            };
            // a parameter that shifts every score of a row alike (the key bias; a FIRE unit
            // active at every distance) has no gradient but rounding noise on either path
            let largest = |g: &[f32]| g.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            if largest(rg) < 1e-6 {
                assert!(
                    largest(fg) < 1e-6,
                    "{scheme}: d{} is not negligible",
                    f.name
                );
                continue;
            }
            assert_close(&format!("{scheme} L={l} d{}", f.name), fg, rg);
        }
    }
}
