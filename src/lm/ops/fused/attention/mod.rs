//! Causal multi-head attention on slices, tiled, with an additive score bias and optionally
//! relative value vectors (Shaw et al.):
//!
//! ```math
//! o_i = \sum_{j \le i} \alpha_{ij} \big(v_j + a^V_{\text{index}_{ij}}\big), \qquad
//! \alpha_{ij} = \operatorname{softmax}_{j \le i}\big(c\, q_i \cdot k_j + b_{ij}\big).
//! ```
//!
//! Queries are taken [`TILE`] rows at a time; a tile's scores stop at its last row's key (the
//! causal mask), and no `[L, L]` matrix is kept: the forward pass ([`forward`]) saves only the
//! log-sum-exp of every row, from which the backward pass ([`backward`]) rebuilds the weights
//! tile by tile. Parallel over (batch, head).

mod backward;
mod forward;

pub use backward::{attention_backward, AttentionGrads};
pub use forward::attention_forward;

use super::heads::{AttentionDims, HeadRows};
use super::parallel::product;

/// Query rows per attention tile. Key columns past a tile's last row are masked for every row
/// of the tile, so the products of a tile stop there: about $(T/L + 1)/2$ of the full
/// $L \times L$ work (62.5% at $L = 128$).
pub const TILE: usize = 32;

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
    pub(super) fn check(&self, dims: &AttentionDims) {
        let ll = dims.len * dims.len;
        let (len, want) = match self {
            Bias::None => return,
            Bias::Heads(b) => (b.len(), dims.heads * ll),
            Bias::Batch(b) => (b.len(), dims.batch * dims.heads * ll),
        };
        assert_eq!(len, want, "attention: bias of {len} values for {dims:?}");
    }

    /// The `[L, L]` matrix of head `bh = b H + h`, if any.
    pub(super) fn of_head(&self, bh: usize, dims: &AttentionDims) -> Option<&'a [f32]> {
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

/// $S = Q_{i_0..i_0+m} K_{0..n}^\top$ of one tile (`n = i0 + m`: the keys its rows can see),
/// written into `s` `[m, n]` at row stride `n`.
///
/// # Safety
/// `q` covers rows `i0..i0 + m` and `k` rows `0..n`, `D` values each, at their strides.
pub(super) unsafe fn tile_products(
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
pub(super) fn tile_bias(bias: Option<&[f32]>, i: usize, l: usize, n: usize) -> Option<&[f32]> {
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
    pub(super) fn check(&self, dims: &AttentionDims) {
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
    pub(super) fn band_sums(
        &self,
        p: &[f32],
        (i0, m, n, l): (usize, usize, usize, usize),
        sums: &mut [f32],
    ) {
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
