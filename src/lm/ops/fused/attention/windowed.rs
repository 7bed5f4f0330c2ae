//! The two-pass window of the tiled attention ([`super::Window`], ReRoPE at inference)
//! against a naive loop: for every query $i$ and key $j \le i$
//!
//! ```math
//! s_{ij} = c \begin{cases} q_i \cdot k_j & i - j < w \\ q^{(2)}_i \cdot k^{(2)}_j & i - j \ge w
//! \end{cases}, \qquad o_i = \sum_{j \le i} \operatorname{softmax}_j(s_{ij})\, v_j,
//! ```
//!
//! in `f64`, at lengths that cross the 32-row tiles, windows inside, at and beyond a tile and
//! beyond the length, inputs contiguous and in `[B, H, L, D]` memory at an offset.

use super::{attention_forward, Terms, Window};
use crate::lm::ops::fused::heads::AttentionDims;
use crate::lm::ops::fused::testing::{assert_close, from_interleaved, heads, store, values};

/// The output `[B, H, L, D]` and log-sum-exp `[B, H, L]` of the naive two-pass loop.
fn naive(
    (q, k, v): (&[f32], &[f32], &[f32]),
    (q2, k2): (&[f32], &[f32]),
    window: usize,
    scale: f32,
    dims: &AttentionDims,
) -> (Vec<f64>, Vec<f64>) {
    let (l, d) = (dims.len, dims.dim);
    let dot = |a: &[f32], b: &[f32], bh: usize, i: usize, j: usize| -> f64 {
        (0..d)
            .map(|c| f64::from(a[(bh * l + i) * d + c]) * f64::from(b[(bh * l + j) * d + c]))
            .sum()
    };
    let mut out = Vec::new();
    let mut lse = Vec::new();
    for bh in 0..dims.batch * dims.heads {
        for i in 0..l {
            // s_ij for j <= i: the first pass inside the window, the second beyond it
            let s: Vec<f64> = (0..=i)
                .map(|j| {
                    let raw = if i - j < window {
                        dot(q, k, bh, i, j)
                    } else {
                        dot(q2, k2, bh, i, j)
                    };
                    f64::from(scale) * raw
                })
                .collect();
            let max = s.iter().fold(f64::NEG_INFINITY, |m, &x| m.max(x));
            let sum: f64 = s.iter().map(|x| (x - max).exp()).sum();
            lse.push(max + sum.ln());
            for c in 0..d {
                out.push(
                    s.iter()
                        .enumerate()
                        .map(|(j, x)| (x - max).exp() / sum * f64::from(v[(bh * l + j) * d + c]))
                        .sum(),
                );
            }
        }
    }
    (out, lse)
}

/// The tiled forward pass with a window equals the naive loop (relative error 1e-5) at
/// lengths 1, 31, 33, 70 and 100 against the 32-row tile, windows 1, 5, 32, 40 and 128
/// (beyond every length: the first pass alone), in both layouts.
#[test]
fn the_window_selects_the_second_pass_beyond_w() {
    for (l, seed) in [(1, 1), (31, 2), (33, 3), (70, 4), (100, 5)] {
        let dims = AttentionDims {
            batch: 2,
            heads: 2,
            len: l,
            dim: 8,
        };
        let n = 2 * 2 * l * 8;
        let [q, k, v, q2, k2] = [0, 1, 2, 3, 4].map(|t| values(n, seed * 10 + t, 1.5));
        for window in [1, 5, 32, 40, 128] {
            let (want_out, want_lse) = naive((&q, &k, &v), (&q2, &k2), window, 0.35, &dims);
            for interleaved in [false, true] {
                let [sq, sk, sv, sq2, sk2] =
                    [&q, &k, &v, &q2, &k2].map(|x| store(x, &dims, interleaved));
                let terms = Terms {
                    window: Some(Window {
                        queries: heads(&sq2),
                        keys: heads(&sk2),
                        window,
                    }),
                    ..Terms::default()
                };
                let (out, lse) =
                    attention_forward((heads(&sq), heads(&sk), heads(&sv)), &terms, 0.35, dims);
                let what = format!("L {l} w {window} interleaved {interleaved}");
                let out = from_interleaved(&out, &dims);
                assert_close(&format!("output {what}"), &out, &want_out, 1e-5);
                assert_close(&format!("lse {what}"), &lse, &want_lse, 1e-5);
            }
        }
    }
}

/// A window at or beyond the length leaves the plain attention bit for bit: the second pass
/// is computed but never selected.
#[test]
fn a_window_beyond_the_length_is_plain_attention() {
    let dims = AttentionDims {
        batch: 1,
        heads: 3,
        len: 70,
        dim: 8,
    };
    let n = 3 * 70 * 8;
    let [q, k, v, q2, k2] = [0, 1, 2, 3, 4].map(|t| values(n, 90 + t, 1.0));
    let [sq, sk, sv, sq2, sk2] = [&q, &k, &v, &q2, &k2].map(|x| store(x, &dims, false));
    let qkv = (heads(&sq), heads(&sk), heads(&sv));
    let plain = attention_forward(qkv, &Terms::default(), 0.5, dims);
    let windowed = Terms {
        window: Some(Window {
            queries: heads(&sq2),
            keys: heads(&sk2),
            window: 70,
        }),
        ..Terms::default()
    };
    assert_eq!(attention_forward(qkv, &windowed, 0.5, dims), plain);
}
