//! The fused operations on contiguous row-major `f32` slices, parallel over rows or over
//! (batch, head) with rayon: causal attention with a score bias, GELU, LayerNorm and
//! log-softmax + NLL, each forward and backward.
//!
//! Products go through the `gemm` crate (one thread per call, inside rayon's parallel loop);
//! everything around them is one pass per row, vectorised by [`super::simd`].

use std::mem::MaybeUninit;

use gemm::{gemm, Parallelism};
use rayon::prelude::*;

use super::simd::{
    dot, exp, exp_shifted_in_place, exp_shifted_sum, max, multiversion, normal_cdf, sum,
    sum_squared_deviations, FRAC_1_SQRT_2PI, LANES,
};

/// Query rows per attention tile. Key columns past a tile's last row are masked for every row
/// of the tile, so the products of a tile stop there: about $(T/L + 1)/2$ of the full
/// $L \times L$ work (62.5% at $L = 128$).
pub const TILE: usize = 32;

/// Sizes of a multi-head attention problem: queries, keys and values `[B, H, L, D]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionDims {
    /// $B$.
    pub batch: usize,
    /// $H$.
    pub heads: usize,
    /// $L$ (queries and keys alike; causal).
    pub len: usize,
    /// $D$, the head dimension.
    pub dim: usize,
}

/// An additive score bias $b_{ij}$.
#[derive(Debug, Clone, Copy)]
pub enum Bias<'a> {
    /// No bias.
    None,
    /// One `[L, L]` matrix per head, shared by the batch: `[H, L, L]`.
    Heads(&'a [f32]),
    /// One matrix per sequence and head: `[B, H, L, L]`.
    Batch(&'a [f32]),
}

impl<'a> Bias<'a> {
    fn check(&self, dims: &AttentionDims) {
        let ll = dims.len * dims.len;
        let (len, want) = match self {
            Bias::None => return,
            Bias::Heads(b) => (b.len(), dims.heads * ll),
            Bias::Batch(b) => (b.len(), dims.batch * dims.heads * ll),
        };
        assert_eq!(len, want, "attention: bias of {len} values for {dims:?}");
    }

    /// The `[L, L]` matrix of head `bh = b H + h`, if any.
    fn of_head(&self, bh: usize, dims: &AttentionDims) -> Option<&'a [f32]> {
        let ll = dims.len * dims.len;
        match *self {
            Bias::None => None,
            Bias::Heads(b) => {
                let h = bh % dims.heads;
                Some(&b[h * ll..(h + 1) * ll])
            }
            Bias::Batch(b) => Some(&b[bh * ll..(bh + 1) * ll]),
        }
    }
}

/// $C = \beta A B$ (or $C \mathrel{+}= \beta A B$ when `accumulate`), single-threaded, with
/// every operand given by a pointer, its row stride and its column stride.
///
/// # Safety
/// The pointers must cover `m x k`, `k x n` and `m x n` elements at the given strides, and
/// `dst` must not overlap the inputs.
#[allow(clippy::too_many_arguments)]
unsafe fn product(
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

multiversion! {
    /// One causal softmax row in place: `row[j] = scale row[j] + bias[j]` for `j < valid`,
    /// then $p_j = e^{s_j - \max} / \sum$, zeros from `valid` on. Returns
    /// $\log \sum_j e^{s_j}$.
    fn softmax_row(row: &mut [f32], bias: Option<&[f32]>, scale: f32, valid: usize) -> f32 {
        let (live, dead) = row.split_at_mut(valid);
        match bias {
            Some(b) => {
                for (s, &b) in live.iter_mut().zip(&b[..valid]) {
                    *s = s.mul_add(scale, b);
                }
            }
            None => {
                for s in live.iter_mut() {
                    *s *= scale;
                }
            }
        }
        let max = max(live);
        let sum = exp_shifted_in_place(live, max);
        let inv = 1.0 / sum;
        for s in live.iter_mut() {
            *s *= inv;
        }
        dead.fill(0.0);
        max + sum.ln()
    }
}

multiversion! {
    /// The probabilities of one row from its raw products and log-sum-exp:
    /// $p_j = e^{\text{scale}\, s_j + b_j - \text{lse}}$ for `j < valid`, zeros after.
    fn probs_row(row: &mut [f32], bias: Option<&[f32]>, scale: f32, valid: usize, lse: f32) {
        let (live, dead) = row.split_at_mut(valid);
        match bias {
            Some(b) => {
                for (s, &b) in live.iter_mut().zip(&b[..valid]) {
                    *s = exp(s.mul_add(scale, b) - lse);
                }
            }
            None => {
                for s in live.iter_mut() {
                    *s = exp(s.mul_add(scale, -lse));
                }
            }
        }
        dead.fill(0.0);
    }
}

multiversion! {
    /// $\partial s_j = p_j (\partial p_j - \delta)$ in place of `dp`, for `j < valid`; zeros after.
    fn score_grad_row(dp: &mut [f32], p: &[f32], delta: f32, valid: usize) {
        let (live, dead) = dp.split_at_mut(valid);
        for (g, &p) in live.iter_mut().zip(&p[..valid]) {
            *g = p * (*g - delta);
        }
        dead.fill(0.0);
    }
}

/// Where a `[B, H, L, D]` tensor's elements lie in its buffer: the offset of element
/// `(0, 0, 0, 0)` and the strides of the batch, head and row axes; the `D` values of a row are
/// contiguous. [`HeadLayout::interleaved`] is `[B, L, H, D]` memory (the heads of a Linear
/// output side by side), read without a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadLayout {
    /// Offset of element `(0, 0, 0, 0)`.
    pub offset: usize,
    /// Stride of the batch axis.
    pub batch: usize,
    /// Stride of the head axis.
    pub head: usize,
    /// Stride of the row (position) axis.
    pub row: usize,
}

impl HeadLayout {
    /// `[B, L, H, D]` in memory, indexed as `[B, H, L, D]`.
    pub fn interleaved(d: &AttentionDims) -> Self {
        Self {
            offset: 0,
            batch: d.len * d.heads * d.dim,
            head: d.dim,
            row: d.heads * d.dim,
        }
    }

    /// Offset of row 0 of head `bh = b H + h`.
    fn start(&self, bh: usize, d: &AttentionDims) -> usize {
        self.offset + (bh / d.heads) * self.batch + (bh % d.heads) * self.head
    }

    /// One past the last element a tensor of `d` reaches.
    fn end(&self, d: &AttentionDims) -> usize {
        if d.batch == 0 || d.heads == 0 || d.len == 0 || d.dim == 0 {
            return self.offset;
        }
        self.offset
            + (d.batch - 1) * self.batch
            + (d.heads - 1) * self.head
            + (d.len - 1) * self.row
            + d.dim
    }
}

/// A `[B, H, L, D]` tensor: its buffer and where the elements lie.
#[derive(Debug, Clone, Copy)]
pub struct Heads<'a> {
    /// The buffer.
    pub data: &'a [f32],
    /// The layout of the elements in it.
    pub layout: HeadLayout,
}

impl<'a> Heads<'a> {
    /// Row 0 of head `bh` and the row stride.
    fn head(&self, bh: usize, d: &AttentionDims) -> (*const f32, usize) {
        // SAFETY: in bounds, checked by `check` before any head is read.
        (
            unsafe { self.data.as_ptr().add(self.layout.start(bh, d)) },
            self.layout.row,
        )
    }

    fn check(&self, d: &AttentionDims, what: &str) {
        assert!(
            self.layout.end(d) <= self.data.len(),
            "attention: {what} of {} elements does not cover {d:?} at {:?}",
            self.data.len(),
            self.layout
        );
    }
}

/// A raw pointer that rayon may share: the heads write disjoint rows through it.
#[derive(Clone, Copy)]
struct SharedMut(*mut f32);
// SAFETY: every parallel task writes only the rows of its own head (disjoint).
unsafe impl Send for SharedMut {}
// SAFETY: as above.
unsafe impl Sync for SharedMut {}

/// Row 0 of one head's matrix and its row stride (the `D` values of a row are contiguous).
type HeadRows = (*const f32, usize);
/// The same, writable.
type HeadRowsMut = (*mut f32, usize);

/// Row `i` of a head as a slice.
///
/// # Safety
/// `ptr + i * stride .. + d` must be in bounds.
unsafe fn row<'a>((ptr, stride): HeadRows, i: usize, d: usize) -> &'a [f32] {
    unsafe { std::slice::from_raw_parts(ptr.add(i * stride), d) }
}

multiversion! {
    /// $\sum_i a_i b_i$ of two rows.
    fn dot_rows(a: &[f32], b: &[f32]) -> f32 {
        dot(a, b)
    }
}

/// $S = Q_{i_0..i_0+m} K_{0..n}^\top$ of one tile (`n = i0 + m`: the keys its rows can see),
/// written into `s` `[m, n]` at row stride `n`.
///
/// # Safety
/// `q` covers rows `i0..i0 + m` and `k` rows `0..n`, `D` values each, at their strides.
unsafe fn tile_products(
    (q, k): (HeadRows, HeadRows),
    (i0, m, d): (usize, usize, usize),
    s: &mut [f32],
) {
    let n = i0 + m;
    // SAFETY: the caller's contract; s holds m x n.
    unsafe {
        product(
            (m, n, d),
            (s.as_mut_ptr(), n, 1),
            false,
            (q.0.add(i0 * q.1), q.1, 1),
            (k.0, 1, k.1),
            1.0,
        );
    }
}

/// Row `i` of an `[L, L]` bias, its first `n` entries.
fn tile_bias(bias: Option<&[f32]>, i: usize, l: usize, n: usize) -> Option<&[f32]> {
    bias.map(|b| &b[i * l..i * l + n])
}

/// Relative value vectors added to the attention output (Shaw et al.):
/// $o_i \mathrel{+}= \sum_{j \le i} \alpha_{ij}\, a^V_{\text{index}_{ij}}$, with one table
/// `[R, D]` shared by every head and one `index [L, L]` (entries below `R`).
#[derive(Debug, Clone, Copy)]
pub struct RelativeValues<'a> {
    /// $a^V$, `[R, D]` row-major.
    pub table: &'a [f32],
    /// `[L, L]` row-major.
    pub index: &'a [usize],
    /// `R`.
    pub rows: usize,
}

impl RelativeValues<'_> {
    fn check(&self, dims: &AttentionDims) {
        let (l, r) = (dims.len, self.rows);
        assert!(
            self.table.len() == r * dims.dim
                && self.index.len() == l * l
                && self.index.iter().all(|&c| c < r),
            "attention: relative values need a [R, D] table and an [L, L] index below R"
        );
    }

    /// The weights of each row of a tile summed per table row:
    /// $S_{r c} = \sum_{j \le i:\ \text{index}_{ij} = c} p_{r j}$ for tile rows $i = i_0 + r$,
    /// written into `sums [m, R]`.
    fn band_sums(&self, p: &[f32], (i0, m, n, l): (usize, usize, usize, usize), sums: &mut [f32]) {
        let rows = self.rows;
        for r in 0..m {
            let i = i0 + r;
            let out = &mut sums[r * rows..(r + 1) * rows];
            out.fill(0.0);
            for (&c, &w) in self.index[i * l..i * l + i + 1]
                .iter()
                .zip(&p[r * n..r * n + i + 1])
            {
                out[c] += w;
            }
        }
    }
}

/// Forward pass of one head: its output rows (through `out`, row stride `out.1`) and the
/// log-sum-exp of every row `lse [L]`.
///
/// # Safety
/// The pointers cover the head's `L` rows of `D` at their strides.
#[allow(clippy::too_many_arguments)]
unsafe fn attention_head_forward(
    (q, k, v): (HeadRows, HeadRows, HeadRows),
    (bias, values): (Option<&[f32]>, Option<RelativeValues<'_>>),
    scale: f32,
    dims: &AttentionDims,
    out: HeadRowsMut,
    lse: &mut [f32],
    scratch: &mut [f32],
) {
    let (l, d) = (dims.len, dims.dim);
    let (scratch, sums) = scratch.split_at_mut(TILE * l);
    for i0 in (0..l).step_by(TILE) {
        let m = TILE.min(l - i0);
        // keys 0..n can be seen by some row of the tile
        let n = i0 + m;
        let s = &mut scratch[..m * n];
        // SAFETY: q covers rows i0..i0+m, k covers n rows (caller's contract).
        unsafe { tile_products((q, k), (i0, m, d), s) };
        for r in 0..m {
            let i = i0 + r;
            lse[i] = softmax_row(
                &mut s[r * n..(r + 1) * n],
                tile_bias(bias, i, l, n),
                scale,
                i + 1,
            );
        }
        // O_tile = P V[0..n], [m, d]
        // SAFETY: s is m x n, v covers n rows, out covers rows i0..i0+m.
        unsafe {
            product(
                (m, d, n),
                (out.0.add(i0 * out.1), out.1, 1),
                false,
                (s.as_ptr(), n, 1),
                (v.0, v.1, 1),
                1.0,
            );
        }
        if let Some(rv) = values {
            // O_tile += S a^V with S the weights summed per table row, [m, R]
            let sums = &mut sums[..m * rv.rows];
            rv.band_sums(s, (i0, m, n, l), sums);
            // SAFETY: sums is m x R, the table R x D, out covers rows i0..i0+m.
            unsafe {
                product(
                    (m, d, rv.rows),
                    (out.0.add(i0 * out.1), out.1, 1),
                    true,
                    (sums.as_ptr(), rv.rows, 1),
                    (rv.table.as_ptr(), d, 1),
                    1.0,
                );
            }
        }
    }
}

/// Causal attention of every head, parallel over (batch, head):
///
/// ```math
/// o_i = \sum_{j \le i} \operatorname{softmax}_j\!\big(c\, q_i \cdot k_j + b_{ij}\big)\, v_j
/// ```
///
/// `q, k, v` in any [`HeadLayout`]. Returns `out` in `[B, L, H, D]` memory
/// ([`HeadLayout::interleaved`]: the input layout of the output projection) and the
/// log-sum-exp of every row `[B, H, L]` (what the backward pass needs to rebuild the weights).
/// No `[L, L]` matrix is kept: each thread holds one tile of `TILE x L` scores.
///
/// # Panics
/// When a buffer does not cover its layout or a bias does not match `dims`.
pub fn attention_forward(
    (q, k, v): (Heads<'_>, Heads<'_>, Heads<'_>),
    (bias, values): (Bias<'_>, Option<RelativeValues<'_>>),
    scale: f32,
    dims: AttentionDims,
) -> (Vec<f32>, Vec<f32>) {
    q.check(&dims, "q");
    k.check(&dims, "k");
    v.check(&dims, "v");
    bias.check(&dims);
    if let Some(rv) = &values {
        rv.check(&dims);
    }
    let value_rows = values.map_or(0, |rv| rv.rows);
    let l = dims.len;
    let heads = dims.batch * dims.heads;
    let out_layout = HeadLayout::interleaved(&dims);
    let n = heads * l * dims.dim;
    // written row by row by the heads' P V products (no zero fill first)
    let mut out: Vec<f32> = Vec::with_capacity(n);
    let mut lse = vec![0.0f32; heads * l];
    let out_ptr = SharedMut(out.spare_capacity_mut().as_mut_ptr().cast::<f32>());
    lse.par_chunks_mut(l.max(1)).enumerate().for_each_init(
        || vec![0.0f32; TILE * (l + value_rows)],
        |scratch, (bh, lse)| {
            // the whole wrapper moves into the closure (not its raw-pointer field)
            let out_ptr = &out_ptr;
            // SAFETY: the layouts were checked to lie within their buffers; head bh writes only
            // its own rows of `out`.
            unsafe {
                attention_head_forward(
                    (q.head(bh, &dims), k.head(bh, &dims), v.head(bh, &dims)),
                    (bias.of_head(bh, &dims), values),
                    scale,
                    &dims,
                    (out_ptr.0.add(out_layout.start(bh, &dims)), out_layout.row),
                    lse,
                    scratch,
                );
            }
        },
    );
    // SAFETY: every head wrote all its L rows of D values (the P V product of each tile
    // writes the tile's rows), and the heads cover the buffer.
    unsafe { out.set_len(n) };
    (out, lse)
}

/// Gradients of [`attention_forward`] with respect to its inputs.
#[derive(Debug, Clone)]
pub struct AttentionGrads {
    /// $\partial q$, in `[B, L, H, D]` memory ([`HeadLayout::interleaved`]).
    pub q: Vec<f32>,
    /// $\partial k$, likewise.
    pub k: Vec<f32>,
    /// $\partial v$, likewise.
    pub v: Vec<f32>,
    /// $\partial b$ in the bias's own shape (`[H, L, L]` summed over the batch, or
    /// `[B, H, L, L]`); empty without a bias.
    pub bias: Vec<f32>,
    /// $\partial a^V$ of the relative values, `[R, D]`; empty without them.
    pub values: Vec<f32>,
}

/// Per-thread buffers of the backward pass.
struct BackwardScratch {
    p: Vec<f32>,
    dp: Vec<f32>,
    /// `[TILE, R]`: the relative values' output gradient per table row, then the weights'
    /// sums per table row.
    sums: Vec<f32>,
}

/// Backward pass of one head, writing its rows of `dq`, `dk`, `dv` (interleaved row stride).
/// `dbias` is the head's `[L, L]` bias gradient, if wanted.
///
/// # Safety
/// Every pointer covers the head's `L` rows of `D` at its stride.
#[allow(clippy::too_many_arguments)]
unsafe fn attention_head_backward(
    (q, k, v): (HeadRows, HeadRows, HeadRows),
    (out, dout, lse): (HeadRows, HeadRows, &[f32]),
    (bias, values): (Option<&[f32]>, Option<RelativeValues<'_>>),
    scale: f32,
    dims: &AttentionDims,
    (dq, dk, dv): (HeadRowsMut, HeadRowsMut, HeadRowsMut),
    (mut dbias, mut dvalues): (Option<&mut [f32]>, Option<&mut [f32]>),
    scratch: &mut BackwardScratch,
) {
    let (l, d) = (dims.len, dims.dim);
    for i in 0..l {
        // SAFETY: row i of dk and dv is in bounds (caller's contract).
        unsafe {
            std::slice::from_raw_parts_mut(dk.0.add(i * dk.1), d).fill(0.0);
            std::slice::from_raw_parts_mut(dv.0.add(i * dv.1), d).fill(0.0);
        }
    }
    for i0 in (0..l).step_by(TILE) {
        let m = TILE.min(l - i0);
        let n = i0 + m;
        let p = &mut scratch.p[..m * n];
        let dp = &mut scratch.dp[..m * n];
        // SAFETY (all products below): the rows used are in bounds by the caller's contract;
        // p and dp hold m x n.
        // rebuild P from Q_tile K^T and the saved log-sum-exp
        unsafe { tile_products((q, k), (i0, m, d), p) };
        for r in 0..m {
            let i = i0 + r;
            let b = tile_bias(bias, i, l, n);
            probs_row(&mut p[r * n..(r + 1) * n], b, scale, i + 1, lse[i]);
        }
        // dP = dO_tile V^T, [m, n]
        unsafe {
            product(
                (m, n, d),
                (dp.as_mut_ptr(), n, 1),
                false,
                (dout.0.add(i0 * dout.1), dout.1, 1),
                (v.0, 1, v.1),
                1.0,
            );
        }
        if let (Some(rv), Some(dtable)) = (values, dvalues.as_deref_mut()) {
            let rows = rv.rows;
            let sums = &mut scratch.sums[..m * rows];
            // dP_ij += dO_i . a^V_{index_ij}: G = dO_tile a^V^T [m, R], gathered per row
            // SAFETY: dout covers rows i0..i0+m; the table is R x D; sums holds m x R.
            unsafe {
                product(
                    (m, rows, d),
                    (sums.as_mut_ptr(), rows, 1),
                    false,
                    (dout.0.add(i0 * dout.1), dout.1, 1),
                    (rv.table.as_ptr(), 1, d),
                    1.0,
                );
            }
            for r in 0..m {
                let i = i0 + r;
                let g = &sums[r * rows..(r + 1) * rows];
                for (dp, &c) in dp[r * n..r * n + i + 1]
                    .iter_mut()
                    .zip(&rv.index[i * l..i * l + i + 1])
                {
                    *dp += g[c];
                }
            }
            // d a^V += S^T dO_tile with S the weights summed per table row
            rv.band_sums(p, (i0, m, n, l), sums);
            // SAFETY: S^T is R x m (sums read transposed), dout m x D, dtable R x D.
            unsafe {
                product(
                    (rows, d, m),
                    (dtable.as_mut_ptr(), d, 1),
                    true,
                    (sums.as_ptr(), 1, rows),
                    (dout.0.add(i0 * dout.1), dout.1, 1),
                    1.0,
                );
            }
        }
        // dS = P (dP - delta), delta_i = dO_i . O_i
        for r in 0..m {
            let i = i0 + r;
            // SAFETY: row i of dout and out is in bounds.
            let delta = dot_rows(unsafe { row(dout, i, d) }, unsafe { row(out, i, d) });
            score_grad_row(
                &mut dp[r * n..(r + 1) * n],
                &p[r * n..(r + 1) * n],
                delta,
                i + 1,
            );
            if let Some(db) = dbias.as_deref_mut() {
                db[i * l..i * l + n].copy_from_slice(&dp[r * n..(r + 1) * n]);
                db[i * l + n..(i + 1) * l].fill(0.0);
            }
        }
        unsafe {
            // dQ_tile = c dS K[0..n]
            product(
                (m, d, n),
                (dq.0.add(i0 * dq.1), dq.1, 1),
                false,
                (dp.as_ptr(), n, 1),
                (k.0, k.1, 1),
                scale,
            );
            // dK[0..n] += c dS^T Q_tile
            product(
                (n, d, m),
                (dk.0, dk.1, 1),
                true,
                (dp.as_ptr(), 1, n),
                (q.0.add(i0 * q.1), q.1, 1),
                scale,
            );
            // dV[0..n] += P^T dO_tile
            product(
                (n, d, m),
                (dv.0, dv.1, 1),
                true,
                (p.as_ptr(), 1, n),
                (dout.0.add(i0 * dout.1), dout.1, 1),
                1.0,
            );
        }
    }
}

/// Backward pass of [`attention_forward`] from the output gradient `dout`, the forward output
/// and its log-sum-exp (`out` and `dout` in any [`HeadLayout`]):
///
/// ```math
/// \partial s_{ij} = p_{ij}\big(\partial o_i \cdot v_j - \partial o_i \cdot o_i\big), \quad
/// \partial q_i = c \sum_j \partial s_{ij} k_j, \quad \partial k_j = c \sum_i \partial s_{ij} q_i,
/// \quad \partial v_j = \sum_i p_{ij} \partial o_i, \quad \partial b_{ij} = \partial s_{ij}.
/// ```
///
/// # Panics
/// When a buffer does not cover its layout or a bias does not match `dims`.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    (q, k, v): (Heads<'_>, Heads<'_>, Heads<'_>),
    (out, dout, lse): (Heads<'_>, Heads<'_>, &[f32]),
    (bias, values): (Bias<'_>, Option<RelativeValues<'_>>),
    scale: f32,
    dims: AttentionDims,
    want_bias_grad: bool,
) -> AttentionGrads {
    for (t, what) in [
        (&q, "q"),
        (&k, "k"),
        (&v, "v"),
        (&out, "out"),
        (&dout, "dout"),
    ] {
        t.check(&dims, what);
    }
    bias.check(&dims);
    if let Some(rv) = &values {
        rv.check(&dims);
    }
    let value_rows = values.map_or(0, |rv| rv.rows);
    let l = dims.len;
    let ll = l * l;
    let heads = dims.batch * dims.heads;
    assert!(lse.len() >= heads * l, "attention: log-sum-exp too short");
    let grad_layout = HeadLayout::interleaved(&dims);
    let n = heads * l * dims.dim;
    // written by the heads (no zero fill first): dQ by each tile's product, dK and dV zeroed
    // row by row and then accumulated
    let (mut dq, mut dk, mut dv): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let uninit = |v: &mut Vec<f32>| SharedMut(v.spare_capacity_mut().as_mut_ptr().cast::<f32>());
    let ptrs = (uninit(&mut dq), uninit(&mut dk), uninit(&mut dv));
    let with_bias = want_bias_grad && !matches!(bias, Bias::None);
    // dS of every head (summed over the batch afterwards for a per-head bias)
    let mut ds = if with_bias {
        vec![0.0f32; heads * ll]
    } else {
        Vec::new()
    };
    let mut ds_chunks: Vec<Option<&mut [f32]>> = if with_bias {
        ds.chunks_mut(ll.max(1)).map(Some).collect()
    } else {
        (0..heads).map(|_| None).collect()
    };
    // d a^V of every head, summed afterwards
    let table_size = value_rows * dims.dim;
    let mut dvalues = vec![
        0.0f32;
        if values.is_some() {
            heads * table_size
        } else {
            0
        }
    ];
    let mut dv_chunks: Vec<Option<&mut [f32]>> = if values.is_some() {
        dvalues.chunks_mut(table_size.max(1)).map(Some).collect()
    } else {
        (0..heads).map(|_| None).collect()
    };
    ds_chunks
        .par_iter_mut()
        .zip(dv_chunks.par_iter_mut())
        .enumerate()
        .for_each_init(
            || BackwardScratch {
                p: vec![0.0f32; TILE * l],
                dp: vec![0.0f32; TILE * l],
                sums: vec![0.0f32; TILE * value_rows],
            },
            |scratch, (bh, (dbias, dtable))| {
                let ptrs = &ptrs;
                let at = grad_layout.start(bh, &dims);
                let stride = grad_layout.row;
                // SAFETY: the layouts were checked; head bh writes only its own rows of dq, dk, dv.
                unsafe {
                    attention_head_backward(
                        (q.head(bh, &dims), k.head(bh, &dims), v.head(bh, &dims)),
                        (
                            out.head(bh, &dims),
                            dout.head(bh, &dims),
                            &lse[bh * l..(bh + 1) * l],
                        ),
                        (bias.of_head(bh, &dims), values),
                        scale,
                        &dims,
                        (
                            (ptrs.0 .0.add(at), stride),
                            (ptrs.1 .0.add(at), stride),
                            (ptrs.2 .0.add(at), stride),
                        ),
                        (dbias.as_deref_mut(), dtable.as_deref_mut()),
                        scratch,
                    );
                }
            },
        );
    drop(ds_chunks);
    drop(dv_chunks);
    let values_grad = if values.is_some() {
        let mut total = vec![0.0f32; table_size];
        for head in dvalues.chunks(table_size.max(1)) {
            for (t, &g) in total.iter_mut().zip(head) {
                *t += g;
            }
        }
        total
    } else {
        Vec::new()
    };
    // SAFETY: every head wrote all its rows of dq, dk and dv, and the heads cover the buffers.
    unsafe {
        dq.set_len(n);
        dk.set_len(n);
        dv.set_len(n);
    }
    let bias_grad = match bias {
        Bias::Heads(_) if with_bias => {
            // sum over the batch, parallel over (head, row)
            let mut summed = vec![0.0f32; dims.heads * ll];
            summed
                .par_chunks_mut(l.max(1))
                .enumerate()
                .for_each(|(row, dst)| {
                    let (h, i) = (row / l, row % l);
                    for b in 0..dims.batch {
                        let at = (b * dims.heads + h) * ll + i * l;
                        for (x, &y) in dst.iter_mut().zip(&ds[at..at + l]) {
                            *x += y;
                        }
                    }
                });
            summed
        }
        _ => ds,
    };
    AttentionGrads {
        q: dq,
        k: dk,
        v: dv,
        bias: bias_grad,
        values: values_grad,
    }
}

multiversion! {
    /// GELU of a slice, $y = x \Phi(x)$, and $\Phi(x)$ (kept for the backward), written
    /// into uninitialised outputs.
    fn gelu_slice(x: &[f32], y: &mut [MaybeUninit<f32>], cdf: &mut [MaybeUninit<f32>]) {
        for ((y, c), &x) in y.iter_mut().zip(cdf.iter_mut()).zip(x) {
            let p = normal_cdf(x);
            c.write(p);
            y.write(x * p);
        }
    }
}

multiversion! {
    /// GELU's backward on a slice from the saved $\Phi(x)$: $g\,(\Phi(x) + x \varphi(x))$,
    /// $\varphi(x) = e^{-x^2/2} / \sqrt{2\pi}$.
    fn gelu_backward_slice(x: &[f32], cdf: &[f32], g: &[f32], dx: &mut [MaybeUninit<f32>]) {
        for (((dx, &x), &c), &g) in dx.iter_mut().zip(x).zip(cdf).zip(g) {
            let pdf = FRAC_1_SQRT_2PI * exp(-0.5 * x * x);
            dx.write(g * x.mul_add(pdf, c));
        }
    }
}

/// Elements per parallel chunk of the elementwise kernels.
const CHUNK: usize = 16 * 1024;

/// A vector of `n` values computed chunk by chunk in parallel, without zeroing it first:
/// `fill(i, out)` writes every element of chunk `i` (elements `i * CHUNK ..`).
fn par_collect(n: usize, fill: impl Fn(usize, &mut [MaybeUninit<f32>]) + Sync) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    v.spare_capacity_mut()[..n]
        .par_chunks_mut(CHUNK)
        .enumerate()
        .for_each(|(i, out)| fill(i, out));
    // SAFETY: every chunk was written by `fill` (its contract), so all n elements are.
    unsafe { v.set_len(n) };
    v
}

/// Exact (erf) GELU, $\text{GELU}(x) = x \Phi(x) = \tfrac{x}{2}\big(1 + \operatorname{erf}(x/\sqrt2)\big)$.
/// Returns $y$ and $\Phi(x)$.
pub fn gelu_forward(x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let n = x.len();
    let mut y: Vec<f32> = Vec::with_capacity(n);
    let mut cdf: Vec<f32> = Vec::with_capacity(n);
    y.spare_capacity_mut()[..n]
        .par_chunks_mut(CHUNK)
        .zip(cdf.spare_capacity_mut()[..n].par_chunks_mut(CHUNK))
        .zip(x.par_chunks(CHUNK))
        .for_each(|((y, c), x)| gelu_slice(x, y, c));
    // SAFETY: gelu_slice wrote every element of every chunk of both.
    unsafe {
        y.set_len(n);
        cdf.set_len(n);
    }
    (y, cdf)
}

/// $\partial x = \partial y \, \big(\Phi(x) + x\varphi(x)\big)$, from the forward's $\Phi(x)$.
pub fn gelu_backward(x: &[f32], cdf: &[f32], dy: &[f32]) -> Vec<f32> {
    par_collect(x.len(), |i, dx| {
        let at = i * CHUNK..(i * CHUNK + dx.len());
        gelu_backward_slice(&x[at.clone()], &cdf[at.clone()], &dy[at], dx);
    })
}

multiversion! {
    /// One LayerNorm row: writes $\hat x \gamma + \beta$ and returns
    /// $(\mu, 1/\sigma)$.
    fn layer_norm_row(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, y: &mut [f32]) -> (f32, f32) {
        let n = x.len() as f32;
        let mean = sum(x) / n;
        let var = sum_squared_deviations(x, mean) / n;
        let rstd = 1.0 / (var + eps).sqrt();
        for (((y, &x), &g), &b) in y.iter_mut().zip(x).zip(gamma).zip(beta) {
            *y = ((x - mean) * rstd).mul_add(g, b);
        }
        (mean, rstd)
    }
}

/// LayerNorm over the last axis of `x [rows, d]`:
/// $y = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} \gamma + \beta$ with the biased variance.
/// Returns `y` and the per-row $(\mu, 1/\sigma)$ as `[rows, 2]`.
pub fn layer_norm_forward(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) -> (Vec<f32>, Vec<f32>) {
    let d = gamma.len().max(1);
    let mut y = vec![0.0f32; x.len()];
    let mut stats = vec![0.0f32; 2 * (x.len() / d)];
    y.par_chunks_mut(d)
        .zip(x.par_chunks(d))
        .zip(stats.par_chunks_mut(2))
        .for_each(|((y, x), st)| {
            let (mean, rstd) = layer_norm_row(x, gamma, beta, eps, y);
            st[0] = mean;
            st[1] = rstd;
        });
    (y, stats)
}

multiversion! {
    /// One LayerNorm row backward: writes $\partial x$ and adds to the running
    /// $\partial\gamma$, $\partial\beta$.
    fn layer_norm_backward_row(
        x: &[f32],
        dy: &[f32],
        gamma: &[f32],
        stats: (f32, f32),
        dx: &mut [f32],
        dgamma: &mut [f32],
        dbeta: &mut [f32],
    ) {
        let (mean, rstd) = stats;
        let n = x.len() as f32;
        // a = mean(g dy), b = mean(g dy xhat), over LANES partial sums each
        let len = x.len();
        let (dy, gamma) = (&dy[..len], &gamma[..len]);
        let (dgamma, dbeta) = (&mut dgamma[..len], &mut dbeta[..len]);
        let mut acc_a = [0.0f32; LANES];
        let mut acc_b = [0.0f32; LANES];
        let full = len / LANES * LANES;
        for c in (0..full).step_by(LANES) {
            for l in 0..LANES {
                let i = c + l;
                let xhat = (x[i] - mean) * rstd;
                let gdy = gamma[i] * dy[i];
                acc_a[l] += gdy;
                acc_b[l] = gdy.mul_add(xhat, acc_b[l]);
                dgamma[i] = dy[i].mul_add(xhat, dgamma[i]);
                dbeta[i] += dy[i];
            }
        }
        let (mut a, mut b) = (sum(&acc_a), sum(&acc_b));
        for i in full..len {
            let xhat = (x[i] - mean) * rstd;
            let gdy = gamma[i] * dy[i];
            a += gdy;
            b = gdy.mul_add(xhat, b);
            dgamma[i] = dy[i].mul_add(xhat, dgamma[i]);
            dbeta[i] += dy[i];
        }
        a /= n;
        b /= n;
        for (((dx, &x), &dy), &g) in dx.iter_mut().zip(x).zip(dy).zip(gamma) {
            let xhat = (x - mean) * rstd;
            *dx = rstd * (g * dy - a - xhat * b);
        }
    }
}

/// Rows per parallel chunk of the row kernels (LayerNorm, NLL).
const ROWS: usize = 64;

/// LayerNorm backward:
///
/// ```math
/// \partial x = \frac{1}{\sigma}\Big(\gamma \partial y - \overline{\gamma \partial y}
///   - \hat x \, \overline{\gamma \partial y \, \hat x}\Big), \quad
/// \partial \gamma = \sum_{\text{rows}} \partial y \, \hat x, \quad
/// \partial \beta = \sum_{\text{rows}} \partial y .
/// ```
///
/// Returns $(\partial x, \partial\gamma, \partial\beta)$.
pub fn layer_norm_backward(
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    stats: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let d = gamma.len().max(1);
    let mut dx = vec![0.0f32; x.len()];
    let partial: Vec<(Vec<f32>, Vec<f32>)> = dx
        .par_chunks_mut(d * ROWS)
        .zip(x.par_chunks(d * ROWS))
        .zip(dy.par_chunks(d * ROWS))
        .zip(stats.par_chunks(2 * ROWS))
        .map(|(((dx, x), dy), st)| {
            let mut dgamma = vec![0.0f32; d];
            let mut dbeta = vec![0.0f32; d];
            for (r, dx) in dx.chunks_mut(d).enumerate() {
                layer_norm_backward_row(
                    &x[r * d..(r + 1) * d],
                    &dy[r * d..(r + 1) * d],
                    gamma,
                    (st[2 * r], st[2 * r + 1]),
                    dx,
                    &mut dgamma,
                    &mut dbeta,
                );
            }
            (dgamma, dbeta)
        })
        .collect();
    let mut dgamma = vec![0.0f32; d];
    let mut dbeta = vec![0.0f32; d];
    for (g, b) in partial {
        for (acc, v) in dgamma.iter_mut().zip(g) {
            *acc += v;
        }
        for (acc, v) in dbeta.iter_mut().zip(b) {
            *acc += v;
        }
    }
    (dx, dgamma, dbeta)
}

multiversion! {
    /// $\log \sum_j e^{x_j}$ of one row.
    fn log_sum_exp_row(x: &[f32]) -> f32 {
        let max = max(x);
        max + exp_shifted_sum(x, max).ln()
    }
}

multiversion! {
    /// $\partial x_j = g\,(e^{x_j - \text{lse}} - [j = t])$ for one row.
    fn nll_backward_row(x: &[f32], lse: f32, target: usize, g: f32, dx: &mut [f32]) {
        for (dx, &x) in dx.iter_mut().zip(x) {
            *dx = g * exp(x - lse);
        }
        dx[target] -= g;
    }
}

/// Negative log-likelihood of `targets [rows]` under `logits [rows, V]`:
/// $\ell_r = \log\sum_j e^{x_{rj}} - x_{r t_r}$. Returns `nll [rows]` and the row's
/// log-sum-exp `[rows]`. Targets must be below `V` (checked by the caller).
pub fn nll_forward(logits: &[f32], targets: &[usize], vocab: usize) -> (Vec<f32>, Vec<f32>) {
    let rows = targets.len();
    let mut nll = vec![0.0f32; rows];
    let mut lse = vec![0.0f32; rows];
    nll.par_chunks_mut(ROWS)
        .zip(lse.par_chunks_mut(ROWS))
        .enumerate()
        .for_each(|(c, (nll, lse))| {
            for r in 0..nll.len() {
                let row = c * ROWS + r;
                let x = &logits[row * vocab..(row + 1) * vocab];
                lse[r] = log_sum_exp_row(x);
                nll[r] = lse[r] - x[targets[row]];
            }
        });
    (nll, lse)
}

/// $\partial x_{rj} = \partial\ell_r \,\big(\operatorname{softmax}(x_r)_j - [j = t_r]\big)$.
pub fn nll_backward(
    logits: &[f32],
    targets: &[usize],
    lse: &[f32],
    dnll: &[f32],
    vocab: usize,
) -> Vec<f32> {
    let mut dx = vec![0.0f32; logits.len()];
    dx.par_chunks_mut(vocab.max(1) * ROWS)
        .enumerate()
        .for_each(|(c, dx)| {
            for (r, dx) in dx.chunks_mut(vocab.max(1)).enumerate() {
                let row = c * ROWS + r;
                nll_backward_row(
                    &logits[row * vocab..(row + 1) * vocab],
                    lse[row],
                    targets[row],
                    dnll[row],
                    dx,
                );
            }
        });
    dx
}

/// Rows of a block when `rows` are split over rayon's pool: two blocks per thread (so a thread
/// that is held up leaves at most half its share to the others), at least 64 rows.
fn block_rows(rows: usize) -> usize {
    rows.div_ceil(2 * rayon::current_num_threads().max(1))
        .max(64)
}

/// A vector of `n` values written by `write` into its uninitialised storage (no zero fill
/// first).
///
/// # Safety
/// `write` must initialise every one of the `n` elements.
unsafe fn written_by(n: usize, write: impl FnOnce(&mut [MaybeUninit<f32>])) -> Vec<f32> {
    let mut v: Vec<f32> = Vec::with_capacity(n);
    write(&mut v.spare_capacity_mut()[..n]);
    // SAFETY: the caller's contract: every element was written.
    unsafe { v.set_len(n) };
    v
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
/// `cos`, `sin` `[L, D]` (or, with `transpose`, its adjoint: the backward pass). `x` in any
/// [`HeadLayout`]; the result in `[B, L, H, D]` memory ([`HeadLayout::interleaved`]), which
/// the fused attention reads in place. Parallel over (batch, position).
///
/// With `pairs_interleaved` the rotated pairs are $(x_{2j}, x_{2j+1})$ (the interleaved layout
/// of xPos and the original RoPE) and the result holds them in the half layout: the rotation
/// followed by one fixed permutation $P$ of the head dimensions, which changes no product
/// $(P q') \cdot (P k') = q' \cdot k'$ when queries and keys both get it.
///
/// # Panics
/// When `x` does not cover its layout, `D` is odd, or `cos`, `sin` are not `[L, D]`.
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
    assert!(
        cos.len() == l * d && sin.len() == l * d,
        "rope: cos and sin must be [L, D]"
    );
    let mut y = vec![0.0f32; dims.batch * l * h * d];
    y.par_chunks_mut((h * d).max(1))
        .enumerate()
        .for_each(|(bi, y)| {
            let (b, i) = (bi / l, bi % l);
            let (c, s) = (&cos[i * d..(i + 1) * d], &sin[i * d..(i + 1) * d]);
            for (hh, y) in y.chunks_mut(d).enumerate() {
                let at = x.layout.start(b * h + hh, &dims) + i * x.layout.row;
                rope_row(&x.data[at..at + d], c, s, y, transpose, pairs_interleaved);
            }
        });
    y
}

/// The relative-position gather of every `[L, R]` matrix of `a [BH, L, R]` by one
/// `index [L, L]` (every entry below `R`), `[BH, L, L]`:
///
/// ```math
/// y_{ij} = a_{i,\,\text{index}_{ij}} \quad\text{(rows)}, \qquad
/// y_{ij} = a_{j,\,\text{index}_{ij}} \quad\text{(transposed)}.
/// ```
///
/// DeBERTa's c2p term is the first form of $a = Q K^{r\top}$, its p2c term the second of
/// $a = K Q^{r\top}$; Transformer-XL's shifted term is the first with
/// $\text{index}_{ij} = L - 1 - i + j$. Parallel over the `BH` matrices.
pub fn relative_gather(
    a: &[f32],
    index: &[usize],
    (l, r): (usize, usize),
    transposed: bool,
) -> Vec<f32> {
    let (ll, lr) = (l * l, l * r);
    let heads = a.len().checked_div(lr).unwrap_or(0);
    // SAFETY: every matrix's L x L entries are written below.
    unsafe {
        written_by(heads * ll, |out| {
            out.par_chunks_mut(ll.max(1))
                .zip(a.par_chunks(lr.max(1)))
                .for_each(|(out, a)| {
                    for (i, (out, idx)) in out.chunks_mut(l).zip(index.chunks(l)).enumerate() {
                        for (j, (y, &c)) in out.iter_mut().zip(idx).enumerate() {
                            let row = if transposed { j } else { i };
                            y.write(a[row * r + c]);
                        }
                    }
                });
        })
    }
}

/// The gradient of [`relative_gather`] with respect to `a`, `[BH, L, R]`:
/// $\partial a_{i c} = \sum_{j:\ \text{index}_{ij} = c} \partial y_{ij}$ (rows), or
/// $\partial a_{j c} = \sum_{i:\ \text{index}_{ij} = c} \partial y_{ij}$ (transposed).
pub fn relative_gather_backward(
    dy: &[f32],
    index: &[usize],
    (l, r): (usize, usize),
    transposed: bool,
) -> Vec<f32> {
    let (ll, lr) = (l * l, l * r);
    let heads = dy.len().checked_div(ll).unwrap_or(0);
    let mut da = vec![0.0f32; heads * lr];
    da.par_chunks_mut(lr.max(1))
        .zip(dy.par_chunks(ll.max(1)))
        .for_each(|(da, dy)| {
            for (i, (dy, idx)) in dy.chunks(l).zip(index.chunks(l)).enumerate() {
                for (j, (&g, &c)) in dy.iter().zip(idx).enumerate() {
                    let row = if transposed { j } else { i };
                    da[row * r + c] += g;
                }
            }
        });
    da
}
