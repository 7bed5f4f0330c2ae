//! Linear layers and products, `x [rows, n_in]` by `w [n_in, n_out]` (burn's `Linear`
//! layout), blocks of rows in parallel, each block one single-threaded `gemm` product:
//!
//! ```math
//! y = x W + b, \qquad \partial x = \partial y\, W^\top, \quad \partial W = x^\top \partial y,
//! \quad \partial b = \sum_{\text{rows}} \partial y .
//! ```

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::parallel::{product, written_by, ROWS};

/// Rows of a block when `rows` are split over rayon's pool: two blocks per thread (so a thread
/// that is held up leaves at most half its share to the others), at least 64 rows.
fn block_rows(rows: usize) -> usize {
    rows.div_ceil(2 * rayon::current_num_threads().max(1))
        .max(64)
}

/// `dst[rows, n] = (bias +) lhs[rows, k] rhs[k, n]` with the rows split into blocks computed
/// in parallel, each by a single-threaded product (gemm's own threading gains little on these
/// shapes); a block's rows get the bias just before its product is added onto them. `rhs` is
/// given by pointer and (row, column) strides; `lhs` and `dst` are row-major. Every element of
/// `dst` is written.
fn product_by_rows(
    dst: &mut [MaybeUninit<f32>],
    lhs: &[f32],
    rhs: (&[f32], usize, usize),
    (k, n): (usize, usize),
    bias: Option<&[f32]>,
) {
    if dst.is_empty() || n == 0 {
        return;
    }
    let block = block_rows(dst.len() / n);
    dst.par_chunks_mut(block * n)
        .zip(lhs.par_chunks(block * k.max(1)))
        .for_each(|(dst, lhs)| {
            let m = dst.len() / n;
            if let Some(b) = bias {
                for row in dst.chunks_mut(n) {
                    for (d, &v) in row.iter_mut().zip(b) {
                        d.write(v);
                    }
                }
            }
            // SAFETY: dst is m x n (initialised when the product accumulates onto the bias,
            // written by it otherwise) and lhs m x k row-major; rhs covers k x n at its
            // strides.
            unsafe {
                product(
                    (m, n, k),
                    (dst.as_mut_ptr().cast::<f32>(), n, 1),
                    bias.is_some(),
                    (lhs.as_ptr(), k, 1),
                    (rhs.0.as_ptr(), rhs.1, rhs.2),
                    1.0,
                );
            }
        });
}

/// An affine map of `x [rows, n_in]` by `w [n_in, n_out]` and `b [n_out]`: $y = xW + b$,
/// `[rows, n_out]` (burn's `Linear` layout). Each block of rows gets the bias and then the
/// product added onto it, so no separate pass adds it; blocks of rows run in parallel.
pub fn linear_forward(x: &[f32], w: &[f32], b: Option<&[f32]>, n_in: usize) -> Vec<f32> {
    let n_out = w.len() / n_in.max(1);
    let rows = x.len() / n_in.max(1);
    if rows == 0 || n_out == 0 || n_in == 0 {
        return match b {
            Some(b) => b.repeat(rows),
            None => vec![0.0f32; rows * n_out],
        };
    }
    let b = b.map(|b| &b[..n_out]);
    // SAFETY: product_by_rows writes every element of its destination.
    unsafe {
        written_by(rows * n_out, |y| {
            product_by_rows(y, x, (w, n_out, 1), (n_in, n_out), b);
        })
    }
}

/// Gradients of [`linear_forward`]:
/// $\partial x = \partial y\, W^\top$ (blocks of rows in parallel),
/// $\partial W = x^\top \partial y$ (blocks of rows of $\partial W$ in parallel),
/// $\partial b = \sum_{\text{rows}} \partial y$.
pub fn linear_backward(
    x: &[f32],
    w: &[f32],
    dy: &[f32],
    n_in: usize,
    want_bias: bool,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let n_out = w.len() / n_in.max(1);
    let rows = x.len() / n_in.max(1);
    let (dx, dw) = if rows > 0 && n_out > 0 && n_in > 0 {
        // dX = dY W^T: W^T [n_out, n_in] is w read with row stride 1, column stride n_out
        // SAFETY: product_by_rows writes every element of its destination.
        let dx = unsafe {
            written_by(rows * n_in, |dx| {
                product_by_rows(dx, dy, (w, 1, n_out), (n_out, n_in), None);
            })
        };
        // dW[i0..i1, :] = x[:, i0..i1]^T dY
        let block = n_in
            .div_ceil(2 * rayon::current_num_threads().max(1))
            .max(8);
        let write_dw = |dw: &mut [MaybeUninit<f32>]| {
            dw.par_chunks_mut(block * n_out)
                .enumerate()
                .for_each(|(c, dw)| {
                    let i0 = c * block;
                    let m = dw.len() / n_out;
                    // SAFETY: x^T rows i0..i0+m are x's columns (stride n_in along rows of x);
                    // dy is rows x n_out; dw is m x n_out.
                    unsafe {
                        product(
                            (m, n_out, rows),
                            (dw.as_mut_ptr().cast::<f32>(), n_out, 1),
                            false,
                            (x.as_ptr().add(i0), 1, n_in),
                            (dy.as_ptr(), n_out, 1),
                            1.0,
                        );
                    }
                });
        };
        // SAFETY: every block of rows of dW is written by its product (not accumulated).
        let dw = unsafe { written_by(n_in * n_out, write_dw) };
        (dx, dw)
    } else {
        (vec![0.0f32; rows * n_in], vec![0.0f32; n_in * n_out])
    };
    let db = if want_bias {
        column_sums(dy, n_out)
    } else {
        Vec::new()
    };
    (dx, dw, db)
}

/// $\sum_r a_{rc}$ of `a [rows, cols]`, parallel over blocks of rows.
fn column_sums(a: &[f32], cols: usize) -> Vec<f32> {
    let cols = cols.max(1);
    a.par_chunks(cols * 4 * ROWS)
        .map(|block| {
            let mut s = vec![0.0f32; cols];
            for row in block.chunks(cols) {
                for (acc, &v) in s.iter_mut().zip(row) {
                    *acc += v;
                }
            }
            s
        })
        .reduce(
            || vec![0.0f32; cols],
            |mut a, b| {
                for (x, y) in a.iter_mut().zip(b) {
                    *x += y;
                }
                a
            },
        )
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_close, values};
    use super::*;

    /// [`linear_forward`] (with and without a bias) and [`linear_backward`] against the naive
    /// loops in `f64`: 200 rows (blocks of at least 64 rows, the last partial) by 37 inputs
    /// (blocks of rows of $\partial W$, the last partial) by 29 outputs; and one row. Relative
    /// error at most 1e-5.
    #[test]
    fn linear_matches_naive_loops() {
        for (rows, n_in, n_out) in [(200, 37, 29), (1, 5, 3)] {
            let x = values(rows * n_in, 1, 1.0);
            let w = values(n_in * n_out, 2, 1.0);
            let b = values(n_out, 3, 1.0);
            let dy = values(rows * n_out, 4, 1.0);
            let xw = |r: usize, o: usize| -> f64 {
                (0..n_in)
                    .map(|i| f64::from(x[r * n_in + i]) * f64::from(w[i * n_out + o]))
                    .sum()
            };
            let y: Vec<f64> = (0..rows * n_out)
                .map(|e| xw(e / n_out, e % n_out))
                .collect();
            let y_bias: Vec<f64> = (0..rows * n_out)
                .map(|e| y[e] + f64::from(b[e % n_out]))
                .collect();
            // dx = dy W^T, dW = x^T dy, db = column sums of dy
            let dx: Vec<f64> = (0..rows * n_in)
                .map(|e| {
                    let (r, i) = (e / n_in, e % n_in);
                    (0..n_out)
                        .map(|o| f64::from(dy[r * n_out + o]) * f64::from(w[i * n_out + o]))
                        .sum()
                })
                .collect();
            let dw: Vec<f64> = (0..n_in * n_out)
                .map(|e| {
                    let (i, o) = (e / n_out, e % n_out);
                    (0..rows)
                        .map(|r| f64::from(x[r * n_in + i]) * f64::from(dy[r * n_out + o]))
                        .sum()
                })
                .collect();
            let db: Vec<f64> = (0..n_out)
                .map(|o| (0..rows).map(|r| f64::from(dy[r * n_out + o])).sum())
                .collect();
            let what = format!("{rows} x {n_in} -> {n_out}");
            assert_close(
                &format!("xW {what}"),
                &linear_forward(&x, &w, None, n_in),
                &y,
                1e-5,
            );
            let got = linear_forward(&x, &w, Some(&b), n_in);
            assert_close(&format!("xW + b {what}"), &got, &y_bias, 1e-5);
            let (got_dx, got_dw, got_db) = linear_backward(&x, &w, &dy, n_in, true);
            assert_close(&format!("dx {what}"), &got_dx, &dx, 1e-5);
            assert_close(&format!("dW {what}"), &got_dw, &dw, 1e-5);
            assert_close(&format!("db {what}"), &got_db, &db, 1e-5);
            let (_, _, none) = linear_backward(&x, &w, &dy, n_in, false);
            assert!(none.is_empty());
        }
    }
}
