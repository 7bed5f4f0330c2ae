//! Rotary position embedding (RoPE) in the half layout on every head of `x [B, H, L, D]`, and
//! its adjoint (the backward pass), parallel over (batch, position):
//!
//! ```math
//! y = x \cos + \operatorname{rotate\_half}(x) \sin, \quad
//! \operatorname{rotate\_half}([x_1, x_2]) = [-x_2, x_1]; \qquad
//! \partial x = \partial y \cos + \operatorname{rotate\_half}^\top(\partial y \sin),
//! ```
//!
//! with `cos`, `sin` `[L, D]`, or `[B, L, D]`: a table per sequence (randomized positions).
//! The interleaved pairs $(x_{2j}, x_{2j+1})$ of xPos rotate the
//! same way and are written in the half layout.

use rayon::prelude::*;

use super::heads::{AttentionDims, Heads};
use super::simd::multiversion;

multiversion! {
    /// One row of a rotation with `cos`, `sin` `[D]` in the half layout (see [`rope_half`]).
    /// With `pairs_interleaved` the forward reads the pairs $(x_{2j}, x_{2j+1})$ and writes
    /// them in the half layout; the adjoint reads the half layout and writes the pairs back.
    fn rope_row(
        x: &[f32],
        cos: &[f32],
        sin: &[f32],
        y: &mut [f32],
        transpose: bool,
        pairs_interleaved: bool,
    ) {
        let h = x.len() / 2;
        let (c1, c2) = cos.split_at(h);
        let (s1, s2) = sin.split_at(h);
        match (transpose, pairs_interleaved) {
            (false, false) => {
                let (x1, x2) = x.split_at(h);
                let (y1, y2) = y.split_at_mut(h);
                for j in 0..h {
                    y1[j] = x1[j].mul_add(c1[j], -x2[j] * s1[j]);
                    y2[j] = x2[j].mul_add(c2[j], x1[j] * s2[j]);
                }
            }
            (true, false) => {
                let (x1, x2) = x.split_at(h);
                let (y1, y2) = y.split_at_mut(h);
                for j in 0..h {
                    y1[j] = x1[j].mul_add(c1[j], x2[j] * s2[j]);
                    y2[j] = x2[j].mul_add(c2[j], -x1[j] * s1[j]);
                }
            }
            (false, true) => {
                let (y1, y2) = y.split_at_mut(h);
                for j in 0..h {
                    let (a, b) = (x[2 * j], x[2 * j + 1]);
                    y1[j] = a.mul_add(c1[j], -b * s1[j]);
                    y2[j] = b.mul_add(c2[j], a * s2[j]);
                }
            }
            (true, true) => {
                let (x1, x2) = x.split_at(h);
                for j in 0..h {
                    y[2 * j] = x1[j].mul_add(c1[j], x2[j] * s2[j]);
                    y[2 * j + 1] = x2[j].mul_add(c2[j], -x1[j] * s1[j]);
                }
            }
        }
    }
}

/// RoPE in the half layout on every head, $x \cos + \text{rotate\_half}(x) \sin$ with
/// `cos`, `sin` `[L, D]`, or `[B, L, D]` with a table per sequence (or, with `transpose`, its
/// adjoint: the backward pass). `x` in any
/// [`HeadLayout`]; the result in `[B, L, H, D]` memory ([`HeadLayout::interleaved`]), which
/// the fused attention reads in place. Parallel over (batch, position).
///
/// With `pairs_interleaved` the rotated pairs are $(x_{2j}, x_{2j+1})$ (the interleaved layout
/// of xPos and the original RoPE) and the result holds them in the half layout: the rotation
/// followed by one fixed permutation $P$ of the head dimensions, which changes no product
/// $(P q') \cdot (P k') = q' \cdot k'$ when queries and keys both get it.
///
/// # Panics
/// When `x` does not cover its layout, `D` is odd, or `cos`, `sin` are neither `[L, D]` nor
/// `[B, L, D]`.
pub fn rope_half(
    x: Heads<'_>,
    cos: &[f32],
    sin: &[f32],
    dims: AttentionDims,
    transpose: bool,
    pairs_interleaved: bool,
) -> Vec<f32> {
    x.check(&dims, "x");
    let (h, l, d) = (dims.heads, dims.len, dims.dim);
    assert!(d % 2 == 0, "rope: odd head dimension {d}");
    // a table per sequence: row (b, i) at b L + i
    let per_sequence = cos.len() == dims.batch * l * d && dims.batch > 1;
    assert!(
        (cos.len() == l * d || per_sequence) && sin.len() == cos.len(),
        "rope: cos and sin must be [L, D] or [B, L, D]"
    );
    let mut y = vec![0.0f32; dims.batch * l * h * d];
    y.par_chunks_mut((h * d).max(1))
        .enumerate()
        .for_each(|(bi, y)| {
            let (b, i) = (bi / l, bi % l);
            let row = if per_sequence { bi } else { i };
            let (c, s) = (&cos[row * d..(row + 1) * d], &sin[row * d..(row + 1) * d]);
            for (hh, y) in y.chunks_mut(d).enumerate() {
                let at = x.layout.start(b * h + hh, &dims) + i * x.layout.row;
                rope_row(&x.data[at..at + d], c, s, y, transpose, pairs_interleaved);
            }
        });
    y
}

#[cfg(test)]
mod tests {
    use super::super::heads::AttentionDims;
    use super::super::testing::{assert_close, from_interleaved, heads, store, values};
    use super::*;

    /// The rotation of one row in `f64`, written from the formula: with `pairs`, first the
    /// pairs $(x_{2j}, x_{2j+1})$ laid out as halves; then $x \cos + \text{rotate\_half}(x)
    /// \sin$, $\text{rotate\_half}([x_1, x_2]) = [-x_2, x_1]$.
    fn rotate(x: &[f64], cos: &[f32], sin: &[f32], pairs: bool) -> Vec<f64> {
        let h = x.len() / 2;
        let u: Vec<f64> = if pairs {
            (0..h)
                .map(|j| x[2 * j])
                .chain((0..h).map(|j| x[2 * j + 1]))
                .collect()
        } else {
            x.to_vec()
        };
        let rotated: Vec<f64> = (0..h)
            .map(|j| -u[h + j])
            .chain((0..h).map(|j| u[j]))
            .collect();
        (0..x.len())
            .map(|c| u[c] * f64::from(cos[c]) + rotated[c] * f64::from(sin[c]))
            .collect()
    }

    /// The adjoint of [`rotate`] from its matrix: column `e` is the rotation of the unit
    /// vector $e$, and $\partial x_e = \sum_c M_{ce}\, \partial y_c$.
    fn adjoint(dy: &[f64], cos: &[f32], sin: &[f32], pairs: bool) -> Vec<f64> {
        (0..dy.len())
            .map(|e| {
                let mut unit = vec![0.0; dy.len()];
                unit[e] = 1.0;
                let column = rotate(&unit, cos, sin, pairs);
                column.iter().zip(dy).map(|(m, g)| m * g).sum()
            })
            .collect()
    }

    /// [`rope_half`] against [`rotate`] (forward) and [`adjoint`] (`transpose`), both
    /// layouts of the pairs, input contiguous and in `[B, L, H, D]` memory at an offset,
    /// `[2, 3, 5, 6]` (three pairs per head) and `[1, 2, 33, 2]`, with `cos` and `sin` not
    /// a rotation (as xPos scales them). Relative error at most 1e-6.
    #[test]
    fn rope_matches_formula_and_its_adjoint() {
        for [b, h, l, d] in [[2, 3, 5, 6], [1, 2, 33, 2]] {
            let dims = AttentionDims {
                batch: b,
                heads: h,
                len: l,
                dim: d,
            };
            let x = values(b * h * l * d, 1, 1.0);
            let (cos, sin) = (values(l * d, 2, 1.2), values(l * d, 3, 1.2));
            for (transpose, pairs) in [(false, false), (true, false), (false, true), (true, true)] {
                // the naive result, [B, H, L, D], row by row
                let want: Vec<f64> = x
                    .chunks(d)
                    .enumerate()
                    .flat_map(|(row, x)| {
                        let i = row % l;
                        let (c, s) = (&cos[i * d..(i + 1) * d], &sin[i * d..(i + 1) * d]);
                        let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                        if transpose {
                            adjoint(&x, c, s, pairs)
                        } else {
                            rotate(&x, c, s, pairs)
                        }
                    })
                    .collect();
                for interleaved in [false, true] {
                    let stored = store(&x, &dims, interleaved);
                    let y = rope_half(heads(&stored), &cos, &sin, dims, transpose, pairs);
                    let what = format!(
                        "[{b}, {h}, {l}, {d}] transpose {transpose} pairs {pairs} \
                         interleaved {interleaved}"
                    );
                    assert_close(&what, &from_interleaved(&y, &dims), &want, 1e-6);
                }
            }
        }
    }

    /// Tables per sequence, `[B, L, D]`: row $(b, i)$ rotates every head of sequence $b$ at
    /// position $i$, forward and adjoint, against [`rotate`] and [`adjoint`] row by row.
    #[test]
    fn rope_with_a_table_per_sequence() {
        let [b, h, l, d] = [3, 2, 37, 8];
        let dims = AttentionDims {
            batch: b,
            heads: h,
            len: l,
            dim: d,
        };
        let x = values(b * h * l * d, 4, 1.0);
        let (cos, sin) = (values(b * l * d, 5, 1.0), values(b * l * d, 6, 1.0));
        for transpose in [false, true] {
            let want: Vec<f64> = x
                .chunks(d)
                .enumerate()
                .flat_map(|(row, x)| {
                    // x is [B, H, L, D]: sequence row / (H L), position row % L
                    let at = (row / (h * l) * l + row % l) * d;
                    let (c, s) = (&cos[at..at + d], &sin[at..at + d]);
                    let x: Vec<f64> = x.iter().map(|&v| f64::from(v)).collect();
                    if transpose {
                        adjoint(&x, c, s, false)
                    } else {
                        rotate(&x, c, s, false)
                    }
                })
                .collect();
            let stored = store(&x, &dims, false);
            let y = rope_half(heads(&stored), &cos, &sin, dims, transpose, false);
            let what = format!("per sequence, transpose {transpose}");
            assert_close(&what, &from_interleaved(&y, &dims), &want, 1e-6);
        }
    }
}
