use super::*;
use proptest::prelude::*;

use crate::encodings::init::seeded_normal as random;

fn plain(dim: usize) -> RopeFrequencies {
    RopeConfig::new(dim, 10_000.0)
        .unwrap()
        .frequencies(None)
        .unwrap()
}

#[test]
fn two_dimensional_rotation_by_m_theta() {
    // d = 2: theta_0 = 1, so position m rotates by m radians
    let freqs = plain(2);
    let y = apply_rope(
        ndarray::array![[1.0f32, 0.0]].view(),
        &[0.5],
        &freqs,
        RopeLayout::Half,
    )
    .unwrap();
    assert!((y[[0, 0]] - 0.5f32.cos()).abs() < 1e-7 && (y[[0, 1]] - 0.5f32.sin()).abs() < 1e-7);
}

#[test]
fn invalid_parameters_are_errors() {
    assert!(RopeConfig::new(7, 10_000.0).is_err());
    assert!(RopeConfig::new(0, 10_000.0).is_err());
    assert!(RopeConfig::new(8, 1.0).is_err());
    for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        for s in [
            RopeScaling::Linear { factor: bad },
            RopeScaling::NtkAware { factor: bad },
            RopeScaling::Dynamic {
                factor: bad,
                original_max: 128,
            },
            RopeScaling::yarn(bad, 128),
            RopeScaling::llama3(bad, 128),
        ] {
            let e = RopeConfig::with_scaling(8, 10_000.0, s).unwrap_err();
            assert!(e.to_string().contains("factor"), "{e}");
        }
    }
    assert!(RopeConfig::with_scaling(
        8,
        1e4,
        RopeScaling::Dynamic {
            factor: 2.0,
            original_max: 0
        }
    )
    .is_err());
    let mut yarn = RopeScaling::yarn(4.0, 128);
    if let RopeScaling::Yarn { beta_fast, .. } = &mut yarn {
        *beta_fast = 0.5;
    }
    assert!(RopeConfig::with_scaling(8, 1e4, yarn).is_err());
    let llama = RopeScaling::Llama3 {
        factor: 8.0,
        original_max: 8192,
        low_freq_factor: 4.0,
        high_freq_factor: 1.0,
    };
    assert!(RopeConfig::with_scaling(8, 1e4, llama).is_err());
    assert!(interleaved_to_half(5).is_err());
    let freqs = plain(8);
    assert!(apply_rope(
        random(2, 6, 0).view(),
        &[0.0, 1.0],
        &freqs,
        RopeLayout::Half
    )
    .is_err());
    assert!(apply_rope(random(2, 8, 0).view(), &[0.0], &freqs, RopeLayout::Half).is_err());
    let (cos, sin) = rope_cos_sin(&[0.0], &freqs);
    assert!(rope_half(random(2, 8, 0).view(), &cos, &sin).is_err());
    assert!(DynamicNtkRope::new(RopeConfig::new(8, 1e4).unwrap()).is_err());
}

#[test]
fn dynamic_ntk_grows_then_resets_for_short_inputs() {
    let config = RopeConfig::with_scaling(
        16,
        10_000.0,
        RopeScaling::Dynamic {
            factor: 2.0,
            original_max: 128,
        },
    )
    .unwrap();
    let mut rope = DynamicNtkRope::new(config).unwrap();
    let original = rope.update(64).unwrap().clone();
    assert_eq!(original, plain(16));
    let long = rope.update(512).unwrap().clone();
    assert_eq!(rope.cached_len(), 512);
    assert!(long.inv_freq[1] < original.inv_freq[1]);
    assert_eq!(long, config.frequencies(Some(512)).unwrap());
    // a length between the original and the cached one keeps the cache
    assert_eq!(rope.update(200).unwrap(), &long);
    // a short input resets
    assert_eq!(rope.update(100).unwrap(), &original);
    assert_eq!(rope.cached_len(), 128);
}

#[test]
fn scalings_change_low_frequencies_more_than_high_ones() {
    let dim = 64;
    let base = plain(dim).inv_freq;
    let ntk = RopeConfig::with_scaling(dim, 1e4, RopeScaling::NtkAware { factor: 4.0 })
        .unwrap()
        .frequencies(None)
        .unwrap()
        .inv_freq;
    // highest frequency untouched; the lowest, theta_{d/2-1} = b^{-(d-2)/d}, divided by exactly
    // s because b' = b s^{d/(d-2)}
    assert_eq!(ntk[0], 1.0);
    let ratio = base[dim / 2 - 1] / ntk[dim / 2 - 1];
    assert!((ratio - 4.0).abs() < 1e-4, "{ratio}");
    let yarn = RopeConfig::with_scaling(dim, 1e4, RopeScaling::yarn(4.0, 128))
        .unwrap()
        .frequencies(None)
        .unwrap();
    assert_eq!(yarn.inv_freq[0], 1.0);
    assert!((base[dim / 2 - 1] / yarn.inv_freq[dim / 2 - 1] - 4.0).abs() < 1e-4);
    assert!((yarn.attention_factor - (0.1 * 4f32.ln() + 1.0)).abs() < 1e-6);
}

proptest! {
    #[test]
    fn score_depends_only_on_the_offset(m in 0u32..2048, n in 0u32..2048, shift in 0u32..2048, seed in 0u64..500, half in any::<bool>()) {
        let layout = if half { RopeLayout::Half } else { RopeLayout::Interleaved };
        let freqs = plain(32);
        let (q, k) = (random(1, 32, seed), random(1, 32, seed + 1));
        let score = |a: f64, b: f64| {
            let qa = apply_rope(q.view(), &[a], &freqs, layout).unwrap();
            let kb = apply_rope(k.view(), &[b], &freqs, layout).unwrap();
            qa.row(0).dot(&kb.row(0))
        };
        let (m, n, s) = (m as f64, n as f64, shift as f64);
        prop_assert!((score(m, n) - score(m + s, n + s)).abs() < 2e-3);
    }

    #[test]
    fn rotation_preserves_norms(p in -5000.0f64..5000.0, seed in 0u64..500) {
        let x = random(1, 16, seed);
        for layout in [RopeLayout::Half, RopeLayout::Interleaved] {
            let y = apply_rope(x.view(), &[p], &plain(16), layout).unwrap();
            let (nx, ny) = (x.row(0).dot(&x.row(0)).sqrt(), y.row(0).dot(&y.row(0)).sqrt());
            prop_assert!((nx - ny).abs() < 1e-4 * nx.max(1.0));
        }
    }

    #[test]
    fn layouts_agree_under_the_permutation(seed in 0u64..500, len in 1usize..10) {
        let dim = 12;
        let freqs = plain(dim);
        let x = random(len, dim, seed);
        let positions: Vec<f64> = (0..len).map(|m| (m * 7) as f64).collect();
        let perm = interleaved_to_half(dim).unwrap();
        let x_half = x.select(ndarray::Axis(1), &perm);
        let a = apply_rope(x_half.view(), &positions, &freqs, RopeLayout::Half).unwrap();
        let b = apply_rope(x.view(), &positions, &freqs, RopeLayout::Interleaved).unwrap().select(ndarray::Axis(1), &perm);
        prop_assert!((&a - &b).mapv(f32::abs).fold(0.0f32, |m, &d| m.max(d)) < 1e-6);
    }
}
