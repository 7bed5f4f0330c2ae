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

pub use backward::attention_backward;
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
    #[inline]
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
    #[inline]
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
#[inline]
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
#[inline]
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
    #[inline]
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
    #[inline]
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

/// The naive attention the tests of [`forward`] and [`backward`] compare with: loops over
/// batch, head, query and key in `f64`, every input contiguous `[B, H, L, D]`.
#[cfg(test)]
mod naive {
    use super::super::heads::AttentionDims;
    use super::super::testing::values;
    use super::{Bias, RelativeValues};

    /// Which bias an attention problem has.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum BiasKind {
        None,
        Heads,
        Batch,
    }

    /// One attention problem: seeded inputs, contiguous `[B, H, L, D]`.
    pub struct Case {
        pub dims: AttentionDims,
        pub q: Vec<f32>,
        pub k: Vec<f32>,
        pub v: Vec<f32>,
        pub kind: BiasKind,
        /// `[H, L, L]` or `[B, H, L, L]` by `kind`.
        pub bias: Vec<f32>,
        /// Relative values: the table `[R, D]`, the index `[L, L]` and `R`.
        pub values: Option<(Vec<f32>, Vec<usize>, usize)>,
        pub scale: f32,
    }

    impl Case {
        pub fn new([b, h, l, d]: [usize; 4], kind: BiasKind, relative_values: bool) -> Self {
            let dims = AttentionDims {
                batch: b,
                heads: h,
                len: l,
                dim: d,
            };
            let n = b * h * l * d;
            let bias = match kind {
                BiasKind::None => Vec::new(),
                BiasKind::Heads => values(h * l * l, 4, 2.0),
                BiasKind::Batch => values(b * h * l * l, 5, 2.0),
            };
            // R = 5 rows, each used by many (query, key) pairs: clip(j - i, -2, 2) + 2
            let rel = relative_values.then(|| {
                let index = (0..l * l)
                    .map(|e| ((e % l) as i64 - (e / l) as i64).clamp(-2, 2) as usize + 2)
                    .collect();
                (values(5 * d, 6, 1.0), index, 5)
            });
            Self {
                dims,
                q: values(n, 1, 1.0),
                k: values(n, 2, 1.0),
                v: values(n, 3, 1.0),
                kind,
                bias,
                values: rel,
                scale: 1.0 / (d as f32).sqrt(),
            }
        }

        pub fn bias(&self) -> Bias<'_> {
            match self.kind {
                BiasKind::None => Bias::None,
                BiasKind::Heads => Bias::Heads(&self.bias),
                BiasKind::Batch => Bias::Batch(&self.bias),
            }
        }

        pub fn relative_values(&self) -> Option<RelativeValues<'_>> {
            self.values
                .as_ref()
                .map(|(table, index, rows)| RelativeValues {
                    table,
                    index,
                    rows: *rows,
                })
        }

        /// $b_{ij}$ of head `h` of sequence `b`.
        fn b(&self, b: usize, h: usize, i: usize, j: usize) -> f64 {
            let (hh, l) = (self.dims.heads, self.dims.len);
            match self.kind {
                BiasKind::None => 0.0,
                BiasKind::Heads => f64::from(self.bias[(h * l + i) * l + j]),
                BiasKind::Batch => f64::from(self.bias[((b * hh + h) * l + i) * l + j]),
            }
        }

        /// $v_j + a^V_{\text{index}_{ij}}$, coordinate `c`, of head `bh`.
        fn value(&self, bh: usize, i: usize, j: usize, c: usize) -> f64 {
            let (l, d) = (self.dims.len, self.dims.dim);
            let rel = self
                .values
                .as_ref()
                .map_or(0.0, |(t, idx, _)| f64::from(t[idx[i * l + j] * d + c]));
            f64::from(self.v[(bh * l + j) * d + c]) + rel
        }

        /// $\alpha_{ij}$ `[B, H, L, L]` (zeros above the diagonal), $o$ `[B, H, L, D]` and
        /// $\log\sum_{j \le i} e^{s_{ij}}$ `[B, H, L]`.
        pub fn forward(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
            let AttentionDims {
                batch,
                heads,
                len: l,
                dim: d,
            } = self.dims;
            let mut p = vec![0.0; batch * heads * l * l];
            let mut o = vec![0.0; batch * heads * l * d];
            let mut lse = vec![0.0; batch * heads * l];
            for b in 0..batch {
                for h in 0..heads {
                    let bh = b * heads + h;
                    for i in 0..l {
                        // s_ij = c q_i . k_j + b_ij, j <= i
                        let s: Vec<f64> = (0..=i)
                            .map(|j| {
                                let qk: f64 = (0..d)
                                    .map(|c| {
                                        f64::from(self.q[(bh * l + i) * d + c])
                                            * f64::from(self.k[(bh * l + j) * d + c])
                                    })
                                    .sum();
                                f64::from(self.scale) * qk + self.b(b, h, i, j)
                            })
                            .collect();
                        let z = s.iter().map(|s| s.exp()).sum::<f64>();
                        lse[bh * l + i] = z.ln();
                        for (j, s) in s.iter().enumerate() {
                            let pij = s.exp() / z;
                            p[(bh * l + i) * l + j] = pij;
                            for c in 0..d {
                                o[(bh * l + i) * d + c] += pij * self.value(bh, i, j, c);
                            }
                        }
                    }
                }
            }
            (p, o, lse)
        }

        /// $(\partial q, \partial k, \partial v, \partial b, \partial a^V)$ from
        /// $\partial o$ `[B, H, L, D]`: $\partial b$ in the bias's shape (empty without one),
        /// $\partial a^V$ `[R, D]` (empty without relative values).
        #[allow(clippy::type_complexity)]
        pub fn backward(&self, dout: &[f32]) -> (Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>, Vec<f64>) {
            let AttentionDims {
                batch,
                heads,
                len: l,
                dim: d,
            } = self.dims;
            let (p, _, _) = self.forward();
            let n = batch * heads * l * d;
            let (mut dq, mut dk, mut dv) = (vec![0.0; n], vec![0.0; n], vec![0.0; n]);
            let mut db = vec![0.0; self.bias.len()];
            let mut dtable = vec![0.0; self.values.as_ref().map_or(0, |(t, _, _)| t.len())];
            let c = f64::from(self.scale);
            let x = |t: &[f32], bh: usize, i: usize, e: usize| f64::from(t[(bh * l + i) * d + e]);
            for b in 0..batch {
                for h in 0..heads {
                    let bh = b * heads + h;
                    for i in 0..l {
                        let pij = |j: usize| p[(bh * l + i) * l + j];
                        // dp_ij = do_i . (v_j + a^V_ij); delta_i = sum_j p_ij dp_ij
                        let dp: Vec<f64> = (0..=i)
                            .map(|j| {
                                (0..d)
                                    .map(|e| x(dout, bh, i, e) * self.value(bh, i, j, e))
                                    .sum()
                            })
                            .collect();
                        let delta: f64 = (0..=i).map(|j| pij(j) * dp[j]).sum();
                        for j in 0..=i {
                            let ds = pij(j) * (dp[j] - delta);
                            for e in 0..d {
                                dq[(bh * l + i) * d + e] += c * ds * x(&self.k, bh, j, e);
                                dk[(bh * l + j) * d + e] += c * ds * x(&self.q, bh, i, e);
                                dv[(bh * l + j) * d + e] += pij(j) * x(dout, bh, i, e);
                            }
                            match self.kind {
                                BiasKind::None => {}
                                BiasKind::Heads => db[(h * l + i) * l + j] += ds,
                                BiasKind::Batch => db[(bh * l + i) * l + j] = ds,
                            }
                            if let Some((_, idx, _)) = &self.values {
                                let r = idx[i * l + j];
                                for e in 0..d {
                                    dtable[r * d + e] += pij(j) * x(dout, bh, i, e);
                                }
                            }
                        }
                    }
                }
            }
            (dq, dk, dv, db, dtable)
        }
    }

    /// The problems the tests run: lengths of one query, across one tile boundary, exactly two
    /// tiles and across two; odd head dimensions; every bias with and without relative values.
    pub fn cases() -> impl Iterator<Item = Case> {
        [[2, 3, 1, 5], [1, 2, 33, 7], [1, 1, 64, 4], [2, 1, 70, 16]]
            .into_iter()
            .flat_map(|dims| {
                [BiasKind::None, BiasKind::Heads, BiasKind::Batch]
                    .into_iter()
                    .flat_map(move |kind| {
                        [false, true]
                            .into_iter()
                            .map(move |rv| Case::new(dims, kind, rv))
                    })
            })
    }
}
