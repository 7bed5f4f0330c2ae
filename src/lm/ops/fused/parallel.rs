//! What the kernels share: one single-threaded product through the `gemm` crate (the kernels
//! call it inside their own rayon loops), vectors filled in parallel without a zero fill
//! first, and the chunk sizes of the parallel loops.
//!
//! The product computes
//!
//! ```math
//! C = \beta A B \quad\text{or}\quad C \mathrel{+}= \beta A B,
//! ```
//!
//! every operand given by a pointer and its row and column strides, so a transposed operand
//! is read in place.

use std::mem::MaybeUninit;

use gemm::{gemm, Parallelism};
use rayon::prelude::*;

/// $C = \beta A B$ (or $C \mathrel{+}= \beta A B$ when `accumulate`), single-threaded, with
/// every operand given by a pointer, its row stride and its column stride.
///
/// # Safety
/// The pointers must cover `m x k`, `k x n` and `m x n` elements at the given strides, and
/// `dst` must not overlap the inputs.
#[allow(clippy::too_many_arguments)]
#[inline]
pub(super) unsafe fn product(
    (m, n, k): (usize, usize, usize),
    dst: (*mut f32, usize, usize),
    accumulate: bool,
    lhs: (*const f32, usize, usize),
    rhs: (*const f32, usize, usize),
    beta: f32,
) {
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for i in 0..m {
                for j in 0..n {
                    *dst.0.add(i * dst.1 + j * dst.2) = 0.0;
                }
            }
        }
        return;
    }
    // gemm's convention: dst = alpha dst + beta lhs rhs, strides as (column, row)
    gemm(
        m,
        n,
        k,
        dst.0,
        dst.2 as isize,
        dst.1 as isize,
        accumulate,
        lhs.0,
        lhs.2 as isize,
        lhs.1 as isize,
        rhs.0,
        rhs.2 as isize,
        rhs.1 as isize,
        1.0,
        beta,
        false,
        false,
        false,
        Parallelism::None,
    );
}

/// A raw pointer that rayon may share: the heads write disjoint rows through it.
#[derive(Clone, Copy)]
pub(super) struct SharedMut(pub(super) *mut f32);
// SAFETY: every parallel task writes only the rows of its own head (disjoint).
unsafe impl Send for SharedMut {}
// SAFETY: as above.
unsafe impl Sync for SharedMut {}

/// A vector of `n` values written by `write` into its uninitialised storage (no zero fill
/// first).
///
/// # Safety
/// `write` must initialise every one of the `n` elements.
#[inline]
pub(super) unsafe fn written_by(n: usize, write: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    write(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: the caller's contract: every element was written.
    unsafe { v.set_len(n) };
    v
}

/// Elements per parallel chunk of the elementwise kernels.
pub(super) const CHUNK: usize = 16 * 1024;

/// A vector of `n` values computed chunk by chunk in parallel, without zeroing it first:
/// `fill(i, out)` writes every element of chunk `i` (elements `i * CHUNK ..`).
pub(super) fn par_collect(
    n: usize,
    fill: impl Fn(usize, &mut [MaybeUninit<f32>]) + Sync,
) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    v.spare_capacity_mut()[..n]
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(i, out)| fill(i, out));
    // SAFETY: every chunk was written by `fill` (its contract), so all n elements are.
    unsafe { v.set_len(n) };
    v
}

/// Rows per parallel chunk of the row kernels (LayerNorm, NLL).
pub(super) const ROWS: usize = 64;

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_close, values};
    use super::*;

    /// [`product`] against the triple loop $C_{ij} = [C_{ij}] + \beta \sum_l A_{il} B_{lj}$,
    /// with $B$ read transposed in place and $C$ written at a row stride wider than its row;
    /// sizes that are not multiples of gemm's register blocks, and $k = 0$. Relative error at
    /// most 1e-6.
    #[test]
    fn product_matches_triple_loop_at_any_strides() {
        for (m, n, k) in [(1, 1, 1), (7, 13, 5), (33, 17, 70), (5, 9, 0)] {
            let a = values(m * k, 1, 1.0);
            // B given as its transpose [n, k] in memory
            let bt = values(n * k, 2, 1.0);
            let wide_row = n + 3;
            for accumulate in [false, true] {
                let mut c = values(m * wide_row, 3, 1.0);
                let mut want: Vec<f64> = c.iter().map(|&v| f64::from(v)).collect();
                for i in 0..m {
                    for j in 0..n {
                        let s: f64 = (0..k)
                            .map(|l| f64::from(a[i * k + l]) * f64::from(bt[j * k + l]))
                            .sum();
                        let base = if accumulate {
                            want[i * wide_row + j]
                        } else {
                            0.0
                        };
                        want[i * wide_row + j] = base + 0.5 * s;
                    }
                }
                // SAFETY: a is m x k, bt read as k x n (row stride 1, column stride k), c is
                // m x n at row stride wide_row.
                unsafe {
                    product(
                        (m, n, k),
                        (c.as_mut_ptr(), wide_row, 1),
                        accumulate,
                        (a.as_ptr(), k, 1),
                        (bt.as_ptr(), 1, k),
                        0.5,
                    );
                }
                let what = format!("product {m}x{n}x{k} accumulate={accumulate}");
                assert_close(&what, &c, &want, 1e-6);
            }
        }
    }

    /// [`par_collect`] hands every chunk its own index: a vector of a length that ends inside
    /// a chunk, each element its own position.
    #[test]
    fn par_collect_fills_every_chunk_in_place() {
        let n = 2 * CHUNK + 77;
        let v = par_collect(n, |i, out| {
            for (j, o) in out.iter_mut().enumerate() {
                o.write((i * CHUNK + j) as f32);
            }
        });
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as f32));
    }
}
