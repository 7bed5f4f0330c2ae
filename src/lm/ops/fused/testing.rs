//! What the slice-level tests share: seeded inputs, the error measure, and an independent
//! $\operatorname{erfc}$ in `f64` (the standard library has none), and `[B, H, L, D]` tensors
//! stored in the layouts the kernels read and write.

use super::heads::{AttentionDims, HeadLayout, Heads};

/// `n` deterministic values in about `[-scale, scale]` (xorshift of the seed).
pub fn values(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0) * scale
        })
        .collect()
}

/// Asserts $\max_i |a_i - b_i| \le \text{tol} \cdot \max(\max_i |b_i|, 1)$: the error of the
/// kernel's `got` relative to the scale of the naive `want` (absolute where that scale is below
/// one, as for gradients near zero).
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    let scale = want.iter().fold(1.0f64, |m, &x| m.max(x.abs()));
    let (at, diff) = got
        .iter()
        .zip(want)
        .map(|(&a, &b)| (f64::from(a) - b).abs())
        .enumerate()
        .fold((0, 0.0f64), |m, (i, d)| if d > m.1 { (i, d) } else { m });
    assert!(
        diff <= tol * scale,
        "{what}: error {:.2e} at {at} (kernel {}, naive {}) above {tol:.0e} of {scale:.3}",
        diff / scale,
        got[at],
        want[at]
    );
}

/// $\operatorname{erfc}(z)$ in `f64`: the Maclaurin series of erf for $|z| \le 3$, the
/// continued fraction beyond.
pub fn erfc(z: f64) -> f64 {
    if z.abs() <= 3.0 {
        let mut term = z;
        let mut sum = z;
        for n in 1..200 {
            term *= -z * z / n as f64;
            sum += term / (2 * n + 1) as f64;
        }
        1.0 - 2.0 / std::f64::consts::PI.sqrt() * sum
    } else if z > 0.0 {
        // evaluated backwards from a deep level
        let mut f = 0.0;
        for k in (1..200).rev() {
            f = (k as f64 / 2.0) / (z + f);
        }
        (-z * z).exp() / std::f64::consts::PI.sqrt() / (z + f)
    } else {
        2.0 - erfc(-z)
    }
}

/// `x` `[B, H, L, D]` stored in the given layout after three unused values (a view with
/// an offset): contiguous, or `[B, L, H, D]` memory.
pub fn store(x: &[f32], dims: &AttentionDims, interleaved: bool) -> (Vec<f32>, HeadLayout) {
    let mut layout = if interleaved {
        HeadLayout::interleaved(dims)
    } else {
        HeadLayout::contiguous(dims)
    };
    layout.offset = 3;
    let mut data = vec![f32::NAN; 3 + x.len()];
    let (h, l, d) = (dims.heads, dims.len, dims.dim);
    for (e, &v) in x.iter().enumerate() {
        let (bh, i, c) = (e / (l * d), e / d % l, e % d);
        let at = 3 + (bh / h) * layout.batch + (bh % h) * layout.head + i * layout.row + c;
        data[at] = v;
    }
    (data, layout)
}

/// A kernel's `[B, L, H, D]` memory read back as `[B, H, L, D]`.
pub fn from_interleaved(y: &[f32], dims: &AttentionDims) -> Vec<f32> {
    let (h, l, d) = (dims.heads, dims.len, dims.dim);
    let layout = HeadLayout::interleaved(dims);
    (0..y.len())
        .map(|e| {
            let (bh, i, c) = (e / (l * d), e / d % l, e % d);
            y[(bh / h) * layout.batch + (bh % h) * layout.head + i * layout.row + c]
        })
        .collect()
}

/// A stored tensor as the kernels read it.
pub fn heads<'a>((data, layout): &'a (Vec<f32>, HeadLayout)) -> Heads<'a> {
    Heads {
        data,
        layout: *layout,
    }
}
