//! The schemes applied to a trained RoPE model at inference only, as tests: ReRoPE and Leaky
//! ReRoPE against scores written out by hand with explicit 2x2 rotations, and each scheme as a
//! limit of a more general one (ReRoPE with a window at least the length and Leaky ReRoPE with
//! k = 1 are RoPE; NTK-by-parts with its ramp at "all interpolate" is PI and at "all
//! extrapolate" RoPE; xPos without decay is RoPE; log-n up to the training length changes
//! nothing); log-n composes with every scaling and with ReRoPE; YaRN is NTK-by-parts times its
//! temperature.

use posenc::encodings::rope::{ntk_by_parts_inv_freq, yarn_ramp, YARN_BETA_FAST, YARN_BETA_SLOW};
use posenc::prelude::*;
use proptest::prelude::*;

use crate::support::normal;

/// A 2x2 rotation by `angle` applied to `(x, y)`.
fn rotate((x, y): (f64, f64), angle: f64) -> (f64, f64) {
    (
        x * angle.cos() - y * angle.sin(),
        x * angle.sin() + y * angle.cos(),
    )
}

/// How many f32 steps apart `a` and `b` are (same sign). PI's $(1/b^{2i/d})/s$ and
/// NTK-by-parts' interpolated $1/(s\,b^{2i/d})$ round twice each, in another order: a few ulps.
fn ulps(a: f32, b: f32) -> i64 {
    (i64::from(a.to_bits()) - i64::from(b.to_bits())).abs()
}

fn max_abs(a: &Array2<f32>, b: &Array2<f32>) -> f32 {
    (a - b).mapv(f32::abs).fold(0.0, |m, &x| m.max(x))
}

fn rope(dim: usize, scaling: RopeScaling, half: bool) -> Rope {
    let layout = if half {
        RopeLayout::Half
    } else {
        RopeLayout::Interleaved
    };
    Rope::new(RopeConfig::with_scaling(dim, 1e4, scaling).unwrap(), layout)
}

#[test]
fn rerope_scores_equal_a_table_worked_by_hand() {
    // d = 4, base 100: theta = (1, 0.1); interleaved pairs q = ((1, 0), (0, 1)), k = ((1, 0),
    // (1, 0)). Rotating q by d and k by 0: (R(d) (1,0)).(1,0) + (R(0.1 d) (0,1)).(1,0)
    // = cos d - sin(0.1 d).
    let plain = Rope::new(RopeConfig::new(4, 100.0).unwrap(), RopeLayout::Interleaved);
    let q = array![[1.0f32, 0.0, 0.0, 1.0]];
    let k = array![[1.0f32, 0.0, 1.0, 0.0]];
    // (i, j, w, leak k or none, d_ij worked out, cos d - sin(0.1 d) worked out)
    let table = [
        (5, 4, 3, None, 1.0, 0.440_468_889_221_311_6),
        (5, 3, 3, None, 2.0, -0.614_816_167_342_203_7),
        (5, 2, 3, None, 3.0, -1.285_512_703_261_785),
        (9, 0, 3, None, 3.0, -1.285_512_703_261_785),
        (9, 0, 3, Some(2.0), 6.0, 0.395_527_813_255_330_5),
        (9, 0, 3, Some(1.0), 9.0, -1.694_457_171_512_160_4),
        (6, 0, 3, Some(2.0), 4.5, -0.645_761_333_542_009_9),
        (5, 2, 3, Some(2.0), 3.0, -1.285_512_703_261_785),
    ];
    for (i, j, w, leak, d, score) in table {
        let r = ReRope {
            rope: plain,
            window: w,
            leak,
        };
        assert_eq!(r.position(i, j), d, "d_({i},{j}) w {w} k {leak:?}");
        // the same score by explicit rotations, pair by pair
        let by_hand: f64 = [(0, 1.0), (1, 0.1)]
            .iter()
            .map(|&(p, theta)| {
                let (x, y) = rotate((q[[0, 2 * p]].into(), q[[0, 2 * p + 1]].into()), d * theta);
                x * f64::from(k[[0, 2 * p]]) + y * f64::from(k[[0, 2 * p + 1]])
            })
            .sum();
        assert!((by_hand - score).abs() < 1e-12, "{by_hand} vs {score}");
        // the crate's two passes over i + 1 keys: q at row i, k at row j, zeros elsewhere
        let mut qs = Array2::<f32>::zeros((i + 1, 4));
        let mut ks = Array2::<f32>::zeros((i + 1, 4));
        qs.row_mut(i).assign(&q.row(0));
        ks.row_mut(j).assign(&k.row(0));
        let two_pass = r.scores(qs.view(), ks.view()).unwrap()[[i, j]];
        let map = r.scores_by_position_map(qs.view(), ks.view()).unwrap()[[i, j]];
        for (name, ours) in [("two passes", two_pass), ("position map", map)] {
            assert!(
                (f64::from(ours) - score).abs() < 1e-5,
                "{name} ({i}, {j}), w {w}, k {leak:?}: {ours} vs {score}"
            );
        }
    }
}

#[test]
fn ntk_by_parts_ramp_limits_are_pi_and_rope() {
    for dim in [2, 8, 32, 128] {
        for factor in [1.5, 4.0, 16.0] {
            let pi = RopeConfig::with_scaling(dim, 1e4, RopeScaling::Linear { factor })
                .unwrap()
                .frequencies(None)
                .unwrap()
                .inv_freq;
            let plain = RopeConfig::new(dim, 1e4)
                .unwrap()
                .frequencies(None)
                .unwrap()
                .inv_freq;
            // gamma = 0: interpolate every pair, 1/(s b^(2i/d)) against (1/b^(2i/d))/s
            let all_in = ntk_by_parts_inv_freq(dim, 1e4, factor, &vec![0.0; dim / 2]).unwrap();
            for (a, b) in all_in.iter().zip(&pi) {
                assert!(ulps(*a, *b) <= 4, "{a} {b}");
            }
            // gamma = 1: keep every pair, bit for bit
            let all_out = ntk_by_parts_inv_freq(dim, 1e4, factor, &vec![1.0; dim / 2]).unwrap();
            assert_eq!(all_out, plain);
        }
    }
    assert!(ntk_by_parts_inv_freq(8, 1e4, 2.0, &[1.0; 3]).is_err());
    assert!(ntk_by_parts_inv_freq(8, 1e4, 2.0, &[1.0, 1.0, 1.5, 0.0]).is_err());
    assert!(ntk_by_parts_inv_freq(8, 1e4, 0.0, &[1.0; 4]).is_err());
    assert!(yarn_ramp(0, 1e4, 128, 32.0, 1.0, true).is_err());
    assert!(yarn_ramp(8, 1e4, 128, 1.0, 32.0, true).is_err());
}

proptest! {
    #[test]
    fn ntk_by_parts_is_pi_or_rope_where_the_betas_put_the_ramp(dim in 2usize..=64, factor in 1.0f64..32.0) {
        // the ramp's ends above every pair: every pair kept, RoPE bit for bit; the low end at 0
        // and the high one in (0, 1]: every pair but the fastest (gamma_0 = 1 always) is PI
        let dim = dim * 2;
        let parts = |beta_fast, beta_slow, original_max| {
            RopeConfig::with_scaling(dim, 1e4, RopeScaling::NtkByParts { factor, original_max, beta_fast, beta_slow, truncate: false })
                .unwrap().frequencies(None).unwrap()
        };
        let plain = RopeConfig::new(dim, 1e4).unwrap().frequencies(None).unwrap();
        let pi = RopeConfig::with_scaling(dim, 1e4, RopeScaling::Linear { factor }).unwrap().frequencies(None).unwrap();
        // low = d ln(L / (2 pi beta)) / (2 ln b) >= d/2 when L = 2 pi beta b
        let above = parts(2.0, 1.0, (2.0 * std::f64::consts::PI * 2.0 * 1e4).ceil() as usize);
        prop_assert_eq!(above, plain.clone());
        // high in (0, 1]: L / (2 pi beta_slow) in (1, b^(2/d)]; low <= 0: beta_fast >= L / (2 pi)
        let original_max = 4096usize;
        let beta_slow = original_max as f64 / (2.0 * std::f64::consts::PI * 10f64.powf(4.0 / dim as f64));
        let beta_fast = original_max as f64 / (2.0 * std::f64::consts::PI) * 1.5;
        let below = parts(beta_fast, beta_slow * 1.0001, original_max);
        prop_assert_eq!(below.inv_freq[0], plain.inv_freq[0]);
        for (a, b) in below.inv_freq.iter().zip(&pi.inv_freq).skip(1) {
            prop_assert!(ulps(*a, *b) <= 4, "{} {}", a, b);
        }
        prop_assert_eq!(below.attention_factor, 1.0);
    }

    #[test]
    fn rerope_with_a_window_at_least_the_length_is_rope(
        seed in 0u64..300, l in 1usize..12, extra in 0usize..4, half in any::<bool>(), leak in prop_oneof![Just(None), Just(Some(4.0))]
    ) {
        let base = rope(16, RopeScaling::None, half);
        let r = ReRope { rope: base, window: l + extra, leak };
        let (q, k) = (normal(l, 16, seed), normal(l, 16, seed + 1));
        for causal in [true, false] {
            let a = attention(q.view(), k.view(), k.view(), &r, 0, causal).unwrap();
            let b = attention(q.view(), k.view(), k.view(), &base, 0, causal).unwrap();
            prop_assert!(max_abs(&a.probs, &b.probs) < 1e-5);
        }
    }

    #[test]
    fn leaky_rerope_with_k_one_is_rope(seed in 0u64..300, w in 1usize..10, half in any::<bool>(), yarn in any::<bool>()) {
        let scaling = if yarn { RopeScaling::yarn(4.0, 8) } else { RopeScaling::None };
        let base = rope(16, scaling, half);
        let r = ReRope::leaky(base, w, 1.0).unwrap();
        let (q, k) = (normal(14, 16, seed), normal(14, 16, seed + 1));
        let a = attention(q.view(), k.view(), k.view(), &r, 0, true).unwrap();
        let b = attention(q.view(), k.view(), k.view(), &base, 0, true).unwrap();
        prop_assert!(max_abs(&a.probs, &b.probs) < 1e-5);
        prop_assert!(max_abs(&a.scores.mapv(|s| s.max(-1e9)), &b.scores.mapv(|s| s.max(-1e9))) < 1e-4);
    }

    #[test]
    fn xpos_without_decay_is_interleaved_rope(seed in 0u64..300, lq in 1usize..10, extra in 0usize..6) {
        // scale base B -> infinity: zeta^(m/B) = 1 for every pair
        let xpos = XPos::new(16, 1e4, 1e300).unwrap();
        let base = rope(16, RopeScaling::None, false);
        let (q, k) = (normal(lq, 16, seed), normal(lq + extra, 16, seed + 1));
        let a = attention(q.view(), k.view(), k.view(), &xpos, 0, true).unwrap();
        let b = attention(q.view(), k.view(), k.view(), &base, 0, true).unwrap();
        prop_assert!(max_abs(&a.probs, &b.probs) < 1e-5);
    }

    #[test]
    fn log_n_up_to_the_training_length_changes_nothing(seed in 0u64..300, lq in 1usize..10, extra in 0usize..6, train_len in 16usize..64) {
        // every query sees at most L keys: tau = 1 exactly, the same bits as the inner scheme
        let base = rope(16, RopeScaling::NtkAware { factor: 4.0 }, true);
        let hot = Tempered::new(base, Temperature::LogN { train_len }).unwrap();
        let (q, k) = (normal(lq, 16, seed), normal(lq + extra, 16, seed + 1));
        let a = attention(q.view(), k.view(), k.view(), &hot, 0, true).unwrap();
        let b = attention(q.view(), k.view(), k.view(), &base, 0, true).unwrap();
        prop_assert_eq!(a.scores, b.scores);
    }

    #[test]
    fn log_n_multiplies_each_querys_logits_on_top_of_any_scaling_and_rerope(seed in 0u64..200, which in 0usize..5) {
        // beyond L = 4 the query at m has its logits times log_L(m + 1), whatever the scheme
        // computes them with: NTK-aware, YaRN (whose a^2 stays), NTK-by-parts, ReRoPE, Leaky
        let scaling = [RopeScaling::NtkAware { factor: 4.0 }, RopeScaling::yarn(4.0, 4), RopeScaling::ntk_by_parts(4.0, 4)];
        let t = Temperature::LogN { train_len: 4 };
        let (q, k) = (normal(6, 16, seed), normal(16, 16, seed + 1));
        let (plain, hot) = match which {
            0..=2 => {
                let r = rope(16, scaling[which], true);
                (attention(q.view(), k.view(), k.view(), &r, 0, true).unwrap(),
                 attention(q.view(), k.view(), k.view(), &Tempered::new(r, t).unwrap(), 0, true).unwrap())
            }
            _ => {
                let base = rope(16, RopeScaling::None, true);
                let r = if which == 3 { ReRope::new(base, 3).unwrap() } else { ReRope::leaky(base, 3, 4.0).unwrap() };
                (attention(q.view(), k.view(), k.view(), &r, 0, true).unwrap(),
                 attention(q.view(), k.view(), k.view(), &Tempered::new(r, t).unwrap(), 0, true).unwrap())
            }
        };
        for i in 0..6 {
            // query i sits at 10 + i and sees 11 + i keys
            let tau = ((11 + i) as f32).ln() / 4f32.ln();
            for j in 0..=10 + i {
                let (p, h) = (plain.scores[[i, j]], hot.scores[[i, j]]);
                prop_assert!((h - tau * p).abs() < 1e-4 * (1.0 + p.abs()), "{} {}: {} vs {} x {}", i, j, h, tau, p);
            }
        }
    }

    #[test]
    fn yarn_is_ntk_by_parts_with_its_temperature_on_every_logit(seed in 0u64..300, factor in 1.0f64..64.0, half in any::<bool>()) {
        // the same frequencies; YaRN's a on cos and sin is a^2 on every logit
        let yarn = rope(32, RopeScaling::yarn(factor, 64), half);
        let parts = rope(32, RopeScaling::ntk_by_parts(factor, 64), half);
        let fy = yarn.config.frequencies(None).unwrap();
        let fp = parts.config.frequencies(None).unwrap();
        prop_assert_eq!(&fy.inv_freq, &fp.inv_freq);
        prop_assert_eq!(fp.attention_factor, 1.0);
        let a2 = fy.attention_factor * fy.attention_factor;
        let (q, k) = (normal(8, 32, seed), normal(8, 32, seed + 1));
        let sy = attention(q.view(), k.view(), k.view(), &yarn, 0, false).unwrap().scores;
        let sp = attention(q.view(), k.view(), k.view(), &parts, 0, false).unwrap().scores;
        prop_assert!(max_abs(&sy, &(sp * a2)) < 1e-4 * a2.max(1.0) * 10.0);
        prop_assert!(yarn_ramp(32, 1e4, 64, YARN_BETA_FAST, YARN_BETA_SLOW, true).unwrap().iter().all(|g| (0.0..=1.0).contains(g)));
    }
}
