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
