//! Every scheme through the one reference attention: weights are distributions, causal
//! attention never looks ahead, and the relative schemes are translation invariant (with the
//! same content at every position, the score matrix is constant along diagonals).

use posenc::encodings::deberta::LogBuckets;
use posenc::encodings::dpb::DynamicPositionBias;
use posenc::encodings::rope::{PairRope, RandomEval, RandomPositions, RandomRope};
use posenc::encodings::sinusoidal::SinusoidalAbsolute;
use posenc::encodings::xl::XlDirection;
use posenc::prelude::*;

use crate::support::normal;

const D: usize = 8;

/// Every scheme, and whether its scores depend only on i - j (for equal content).
fn schemes() -> Vec<(Box<dyn PositionScheme>, bool)> {
    let rope = RopeConfig::new(D, 10_000.0).unwrap();
    vec![
        (Box::new(NoPe), true),
        (Box::new(SinusoidalAbsolute::new(D).unwrap()), false),
        (
            Box::new(LearnedAbsolute::new(64, D, 1, 0.5).unwrap()),
            false,
        ),
        (Box::new(ShawRelative::new(3, D, 0.5, 2).unwrap()), true),
        (
            Box::new(TransformerXl::new(D, D, XlDirection::Bidirectional, 3).unwrap()),
            true,
        ),
        (Box::new(T5Bias::new(8, 20, true, 2, 4).unwrap()), true),
        (
            Box::new(DebertaRelative::new(Some(LogBuckets::new(4, 16).unwrap()), 4, D, 5).unwrap()),
            true,
        ),
        (Box::new(Tupe::new(64, D, D, 6, None).unwrap()), false),
        (Box::new(Rope::new(rope, RopeLayout::Half)), true),
        (Box::new(Rope::new(rope, RopeLayout::Interleaved)), true),
        (Box::new(Alibi::new(4).unwrap()), true),
        (Box::new(XPos::new(D, 10_000.0, 512.0).unwrap()), true),
        (
            Box::new(Kerple::new(KerpleKind::Log, vec![1.0, 0.5], vec![0.5, 2.0]).unwrap()),
            true,
        ),
        (
            Box::new(Kerple::new(KerpleKind::Power, vec![1.0], vec![1.5]).unwrap()),
            true,
        ),
        (Box::new(Fire::new(2, 8, 0.1, 4.0, 7).unwrap()), false),
        (
            Box::new(DynamicPositionBias::new(2, 8, 2, true, true, 3).unwrap()),
            true,
        ),
        (Box::new(PairRope::partial(D, 10_000.0, 0.5).unwrap()), true),
        (Box::new(PairRope::p_rope(D, 10_000.0, 0.75).unwrap()), true),
        // at positions sampled from [0, N): relative only where the gaps are equal
        (
            Box::new(RandomRope {
                config: rope,
                positions: RandomPositions::new(100, RandomEval::Sampled).unwrap(),
            }),
            false,
        ),
    ]
}

#[test]
fn weights_are_distributions_and_causal_attention_never_looks_ahead() {
    let (q, k, v) = (normal(10, D, 1), normal(10, D, 2), normal(10, D, 3));
    for (scheme, _) in schemes() {
        let out = attention(q.view(), k.view(), v.view(), scheme.as_ref(), 0, true).unwrap();
        for (i, row) in out.probs.rows().into_iter().enumerate() {
            assert!((row.sum() - 1.0).abs() < 1e-5, "{}: row {i}", scheme.name());
            assert!(
                row.iter().skip(i + 1).all(|&p| p == 0.0),
                "{}: row {i}",
                scheme.name()
            );
        }
        // changing the last key and value changes no earlier output
        let (mut k2, mut v2) = (k.clone(), v.clone());
        k2.row_mut(9).fill(3.0);
        v2.row_mut(9).fill(-3.0);
        let out2 = attention(q.view(), k2.view(), v2.view(), scheme.as_ref(), 0, true).unwrap();
        let earlier = |o: &Array2<f32>| o.slice(s![..9, ..]).to_owned();
        let diff = (&earlier(&out.output) - &earlier(&out2.output))
            .mapv(f32::abs)
            .fold(0.0f32, |m, &x| m.max(x));
        assert!(
            diff < 1e-6,
            "{}: earlier outputs moved by {diff}",
            scheme.name()
        );
    }
}

#[test]
fn relative_schemes_are_translation_invariant_and_absolute_ones_are_not() {
    let l = 12;
    // the same content at every position
    let q = normal(1, D, 11).broadcast((l, D)).unwrap().to_owned();
    let k = normal(1, D, 12).broadcast((l, D)).unwrap().to_owned();
    for (scheme, relative) in schemes() {
        let out = attention(q.view(), k.view(), k.view(), scheme.as_ref(), 0, false).unwrap();
        let s = &out.scores;
        let worst = (0..l - 1)
            .flat_map(|i| (0..l - 1).map(move |j| (i, j)))
            .map(|(i, j)| (s[[i, j]] - s[[i + 1, j + 1]]).abs() / (1.0 + s[[i, j]].abs()))
            .fold(0.0f32, f32::max);
        if relative {
            assert!(
                worst < 1e-4,
                "{}: scores vary along a diagonal by {worst}",
                scheme.name()
            );
        } else {
            assert!(
                worst > 1e-3,
                "{}: expected position-dependent scores, got {worst}",
                scheme.name()
            );
        }
    }
}
