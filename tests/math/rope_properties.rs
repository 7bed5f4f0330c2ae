//! Properties of the RoPE scalings as tests: static scalings compose shifts and keep scores
//! relative out to a million positions (against an f64 computation), dynamic NTK is a function
//! of the length alone, YaRN with factor 1 is RoPE, its ramp is monotone, the layouts are one
//! permutation apart, partial rotary leaves the other channels untouched, Llama 3 has three
//! bands.

use posenc::encodings::rope::{
    apply_rope, apply_rope_partial, interleaved_to_half, LongRope, RopeConfig, RopeFrequencies,
    RopeLayout, RopeScaling,
};
use posenc::prelude::*;
use proptest::prelude::*;

use crate::support::normal;

const D: usize = 32;

/// Every static scaling (and LongRoPE) of a d = 32 head trained at L = 4096.
fn static_frequencies() -> Vec<(&'static str, RopeFrequencies)> {
    let config = |s| {
        RopeConfig::with_scaling(D, 1e4, s)
            .unwrap()
            .frequencies(None)
            .unwrap()
    };
    let long = LongRope {
        short_factor: (0..D / 2).map(|i| 1.0 + i as f64 / 16.0).collect(),
        long_factor: (0..D / 2).map(|i| 1.0 + i as f64).collect(),
        factor: 8.0,
        original_max: 4096,
        attention_factor: None,
    };
    vec![
        ("none", config(RopeScaling::None)),
        ("linear", config(RopeScaling::Linear { factor: 4.0 })),
        ("ntk", config(RopeScaling::NtkAware { factor: 4.0 })),
        ("yarn", config(RopeScaling::yarn(8.0, 4096))),
        ("llama3", config(RopeScaling::llama3(8.0, 4096))),
        ("longrope", long.frequencies(D, 1e4, Some(5000)).unwrap()),
    ]
}

fn layout(half: bool) -> RopeLayout {
    if half {
        RopeLayout::Half
    } else {
        RopeLayout::Interleaved
    }
}

fn max_abs(a: &Array2<f32>, b: &Array2<f32>) -> f32 {
    (a - b).mapv(f32::abs).fold(0.0, |m, &x| m.max(x))
}

/// q at m, k at n in f64: $q^\top R_{(n-m)\theta} k = \sum_i a^2 [(q_1 k_1 + q_2 k_2)\cos\phi_i +
/// (q_2 k_1 - q_1 k_2)\sin\phi_i]$, $\phi_i = (n - m)\theta_i$, over pairs $(x_{2i}, x_{2i+1})$.
fn score_f64(q: &[f32], k: &[f32], m: f64, n: f64, f: &RopeFrequencies) -> f64 {
    let a2 = f64::from(f.attention_factor).powi(2);
    f.inv_freq
        .iter()
        .enumerate()
        .map(|(i, &theta)| {
            let (q1, q2, k1, k2) = (
                f64::from(q[2 * i]),
                f64::from(q[2 * i + 1]),
                f64::from(k[2 * i]),
                f64::from(k[2 * i + 1]),
            );
            let angle = (n - m) * f64::from(theta);
            a2 * ((q1 * k1 + q2 * k2) * angle.cos() + (q2 * k1 - q1 * k2) * angle.sin())
        })
        .sum()
}

proptest! {
    #[test]
    fn static_scalings_compose_shifts(a in 0.0f64..1e6, b in 0.0f64..1e6, seed in 0u64..1000, half in any::<bool>()) {
        // R(a) R(b) = R(a + b), with the attention factor set aside (it is not a rotation)
        let x = normal(1, D, seed);
        for (name, f) in static_frequencies() {
            let f = RopeFrequencies { attention_factor: 1.0, ..f };
            let two = apply_rope(apply_rope(x.view(), &[a], &f, layout(half)).unwrap().view(), &[b], &f, layout(half)).unwrap();
            let one = apply_rope(x.view(), &[a + b], &f, layout(half)).unwrap();
            prop_assert!(max_abs(&two, &one) < 2e-5 * (D as f32), "{}: {}", name, max_abs(&two, &one));
        }
    }

    #[test]
    fn scores_stay_relative_to_a_million_positions(m in 0.0f64..1e6, n in 0.0f64..1e6, seed in 0u64..1000) {
        let (q, k) = (normal(1, D, seed), normal(1, D, seed + 7));
        let norm = (q.row(0).dot(&q.row(0)) * k.row(0).dot(&k.row(0))).sqrt() as f64;
        for (name, f) in static_frequencies() {
            let qm = apply_rope(q.view(), &[m], &f, RopeLayout::Interleaved).unwrap();
            let kn = apply_rope(k.view(), &[n], &f, RopeLayout::Interleaved).unwrap();
            let ours = f64::from(qm.row(0).dot(&kn.row(0)));
            let exact = score_f64(q.as_slice().unwrap(), k.as_slice().unwrap(), m, n, &f);
            prop_assert!((ours - exact).abs() < 1e-5 * norm * 4.0, "{}: ours {}, f64 {}", name, ours, exact);
        }
    }

    #[test]
    fn interleaved_is_unpermute_after_rotate_half_after_permute(seed in 0u64..1000, half_width in 1usize..24, which in 0usize..6) {
        let d = 2 * half_width;
        let scaling = [
            RopeScaling::None,
            RopeScaling::Linear { factor: 3.0 },
            RopeScaling::NtkAware { factor: 3.0 },
            RopeScaling::yarn(16.0, 512),
            RopeScaling::llama3(8.0, 512),
            RopeScaling::Dynamic { factor: 2.0, original_max: 64 },
        ][which];
        let f = RopeConfig::with_scaling(d, 1e4, scaling).unwrap().frequencies(Some(200)).unwrap();
        let x = normal(5, d, seed);
        let positions = [0.0, 1.0, 63.0, 199.0, 12_345.0];
        let perm = interleaved_to_half(d).unwrap();
        let mut unpermute = vec![0; d];
        for (k, &p) in perm.iter().enumerate() {
            unpermute[p] = k;
        }
        let via_half = apply_rope(x.select(Axis(1), &perm).view(), &positions, &f, RopeLayout::Half)
            .unwrap()
            .select(Axis(1), &unpermute);
        let direct = apply_rope(x.view(), &positions, &f, RopeLayout::Interleaved).unwrap();
        // the same products in the same order: equal to the bit
        prop_assert_eq!(via_half, direct);
    }

    #[test]
    fn partial_rotary_leaves_the_other_channels_bit_identical(seed in 0u64..1000, rotary_pairs in 1usize..16, extra in 0usize..20, half in any::<bool>()) {
        let d = 2 * rotary_pairs + extra;
        let f = RopeConfig::new(2 * rotary_pairs, 1e4).unwrap().frequencies(None).unwrap();
        let x = normal(4, d, seed);
        let positions = [0.0, 5.0, 77.0, 4096.0];
        let y = apply_rope_partial(x.view(), &positions, &f, layout(half)).unwrap();
        let r = 2 * rotary_pairs;
        prop_assert_eq!(y.slice(s![.., r..]), x.slice(s![.., r..]));
        let rotated = apply_rope(x.slice(s![.., ..r]), &positions, &f, layout(half)).unwrap();
        prop_assert_eq!(y.slice(s![.., ..r]), rotated.view());
    }

    #[test]
    fn yarn_with_factor_one_is_rope_with_scale_one(half_width in 1usize..128, exp in 2u32..18, base in prop::sample::select(vec![1e4, 5e5, 1e6]), truncate in any::<bool>()) {
        let d = 2 * half_width;
        let mut s = RopeScaling::yarn(1.0, 1 << exp);
        if let RopeScaling::Yarn { truncate: t, .. } = &mut s {
            *t = truncate;
        }
        let yarn = RopeConfig::with_scaling(d, base, s).unwrap().frequencies(None).unwrap();
        let plain = RopeConfig::new(d, base).unwrap().frequencies(None).unwrap();
        prop_assert_eq!(yarn.attention_factor, 1.0);
        for (a, b) in yarn.inv_freq.iter().zip(&plain.inv_freq) {
            prop_assert!((a.to_bits() as i64 - b.to_bits() as i64).abs() <= 1, "{} vs {}", a, b);
        }
    }

    #[test]
    fn yarns_ramp_is_monotone(half_width in 2usize..128, exp in 8u32..18, factor in 1.5f64..64.0, truncate in any::<bool>()) {
        // theta'_i / theta_i falls from 1 (kept) to 1/s (interpolated) and never rises
        let d = 2 * half_width;
        let mut s = RopeScaling::yarn(factor, 1 << exp);
        if let RopeScaling::Yarn { truncate: t, .. } = &mut s {
            *t = truncate;
        }
        let yarn = RopeConfig::with_scaling(d, 1e4, s).unwrap().frequencies(None).unwrap();
        let plain = RopeConfig::new(d, 1e4).unwrap().frequencies(None).unwrap();
        let ratio: Vec<f64> = yarn.inv_freq.iter().zip(&plain.inv_freq).map(|(a, b)| f64::from(*a) / f64::from(*b)).collect();
        for w in ratio.windows(2) {
            prop_assert!(w[1] <= w[0] * (1.0 + 1e-6), "{:?}", ratio);
        }
        prop_assert!(ratio.iter().all(|&r| r <= 1.0 + 1e-6 && r >= 1.0 / factor * (1.0 - 1e-6)));
    }
}

#[test]
fn dynamic_ntk_is_a_function_of_the_length_alone() {
    let (l, s) = (2048, 4.0);
    let dynamic = RopeConfig::with_scaling(
        D,
        1e4,
        RopeScaling::Dynamic {
            factor: s,
            original_max: l,
        },
    )
    .unwrap();
    let plain = RopeConfig::new(D, 1e4).unwrap().frequencies(None).unwrap();
    // at or below the original length it is RoPE
    for len in [None, Some(1), Some(l)] {
        assert_eq!(dynamic.frequencies(len).unwrap(), plain);
    }
    // above, it is NTK-aware with alpha = s len / L - (s - 1), written out in f64
    for len in [3000usize, 2 * l, 8 * l] {
        let alpha = s * len as f64 / l as f64 - (s - 1.0);
        let b = 1e4 * alpha.powf(D as f64 / (D as f64 - 2.0));
        let f = dynamic.frequencies(Some(len)).unwrap();
        for (i, &t) in f.inv_freq.iter().enumerate() {
            let exact = b.powf(-2.0 * i as f64 / D as f64);
            assert!(
                (f64::from(t) / exact - 1.0).abs() < 1e-6,
                "len {len}, pair {i}"
            );
        }
    }
    // with factor 1 (the YaRN paper's dynamic scaling), c times the original length is NTK with factor c
    let paper = RopeConfig::with_scaling(
        D,
        1e4,
        RopeScaling::Dynamic {
            factor: 1.0,
            original_max: l,
        },
    )
    .unwrap();
    for c in [2usize, 8, 32] {
        let ntk =
            RopeConfig::with_scaling(D, 1e4, RopeScaling::NtkAware { factor: c as f64 }).unwrap();
        assert_eq!(
            paper.frequencies(Some(c * l)).unwrap(),
            ntk.frequencies(None).unwrap()
        );
    }
    // a long input then a short one gives what the short one alone gives: the scheme keeps no state
    let rope = Rope::new(dynamic, RopeLayout::Half);
    let (q, k) = (normal(8, D, 1), normal(8, D, 2));
    let alone = attention(q.view(), k.view(), k.view(), &rope, 0, true)
        .unwrap()
        .probs;
    let long = normal(3 * l, D, 3);
    attention(long.view(), long.view(), long.view(), &rope, 0, true).unwrap();
    let after = attention(q.view(), k.view(), k.view(), &rope, 0, true)
        .unwrap()
        .probs;
    assert_eq!(alone, after);
}

#[test]
fn llama3_has_three_bands() {
    // Llama 3.1: d = 128, b = 500000, s = 8, L = 8192, low 1, high 4
    let (l, s) = (8192.0f64, 8.0f32);
    let plain = RopeConfig::new(128, 5e5)
        .unwrap()
        .frequencies(None)
        .unwrap();
    let llama = RopeConfig::with_scaling(128, 5e5, RopeScaling::llama3(8.0, 8192))
        .unwrap()
        .frequencies(None)
        .unwrap();
    let mut bands = [0usize; 3];
    for (&t, &t3) in plain.inv_freq.iter().zip(&llama.inv_freq) {
        let wavelength = std::f64::consts::TAU / f64::from(t);
        if wavelength < l / 4.0 {
            // high frequencies: kept, to the bit
            assert_eq!(t3, t);
            bands[0] += 1;
        } else if wavelength > l {
            // low frequencies: divided by s
            assert_eq!(t3, t / s);
            bands[2] += 1;
        } else {
            // between: a blend strictly inside (theta / s, theta) except at the ends
            assert!(t3 <= t && t3 >= t / s, "{t3} not within [{}, {t}]", t / s);
            bands[1] += 1;
        }
    }
    assert_eq!(bands.iter().sum::<usize>(), 64);
    assert!(bands.iter().all(|&n| n > 0), "{bands:?}");
}
