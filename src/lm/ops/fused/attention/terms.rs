//! The position terms of the tiled attention, each a compact object that the kernel expands
//! inside a tile, so that nothing of size $L \times L$ exists outside one tile:
//!
//! ```math
//! s_{ij} = c\,\big(q_i \cdot k_j + p^Q_i \cdot p^K_j + \hat q_i \cdot \rho_{i-j}
//!   + g_{i,\,\text{index}(i-j)} + g'_{j,\,\text{index}'(i-j)}\big) + b_{ij},
//! \qquad b_{ij} = \beta_{i-j} \ \text{or}\ f(\psi_{i-j}\,\nu_i),
//! ```
//!
//! for the keys $j \le i$ a query sees (so only distances $0..L$ occur): an untied absolute
//! term (TUPE), relative keys per distance (Transformer-XL), tables read at the column of the
//! distance in the query's row (Shaw, DeBERTa's c2p) or in the key's row (DeBERTa's p2c), and
//! a bias per distance (T5, ALiBi, Kerple) or a piecewise-linear function $f$ of a feature
//! of the distance scaled per row (FIRE). Relative values (Shaw) add
//! $\sum_j \alpha_{ij}\, a^V_{\text{index}(i-j)}$ to the output.
//!
//! A row $i$ reads the distances $i, i-1, \dots, 0$ for keys $0, 1, \dots, i$: each vector
//! over distance is reversed once per call ([`Prepared`]), so that the row reads a contiguous
//! slice of it.

use super::super::heads::{AttentionDims, HeadRows, Heads};
use super::super::simd::{multiversion, sum};

/// An additive score bias $b_{ij}$ (not scaled by $c$).
#[derive(Debug, Clone, Copy, Default)]
pub enum Bias<'a> {
    /// No bias.
    #[default]
    None,
    /// $b_{ij} = \beta_{h,\,i-j}$, `[H, L]` (distances $0..L$).
    Distance(&'a [f32]),
    /// $b_{ij} = f_h(\psi_{i-j}\,\nu_i)$ with $f_h$ piecewise linear.
    Piecewise(Piecewise<'a>),
}

/// $f_h(x) = a_{h,p} + s_{h,p}\, x$ on piece $p = \#\{k : t_k < x\}$ of the breakpoints
/// $t_1 \le \dots \le t_{P-1}$, at $x_{ij} = \psi_{i-j}\,\nu_i$.
#[derive(Debug, Clone, Copy)]
pub struct Piecewise<'a> {
    /// $\psi_d$ for distances $d = 0..L$.
    pub feature: &'a [f32],
    /// $\nu_i$ for queries $i = 0..L$.
    pub row_scale: &'a [f32],
    /// $t_1 \le \dots \le t_{P-1}$.
    pub breakpoints: &'a [f32],
    /// $a_{h,p}$, `[H, P]`.
    pub intercepts: &'a [f32],
    /// $s_{h,p}$, `[H, P]`.
    pub slopes: &'a [f32],
}

impl Piecewise<'_> {
    /// $P$.
    #[inline]
    fn pieces(&self) -> usize {
        self.breakpoints.len() + 1
    }
}

/// A table per sequence and head read at the column of the distance:
/// $g_{r,\,\text{index}(i-j)}$ with $r = i$ (the query's row) or $r = j$ (the key's row).
#[derive(Debug, Clone, Copy)]
pub struct Gathered<'a> {
    /// $g$, `[B, H, L, R]`.
    pub table: &'a [f32],
    /// $R$.
    pub rows: usize,
    /// $\text{index}(d)$ for distances $d = 0..L$, each below $R$.
    pub index: &'a [usize],
}

/// Relative keys per distance: $\hat q_i \cdot \rho_{h,\,i-j}$.
#[derive(Debug, Clone, Copy)]
pub struct DistanceKeys<'a> {
    /// $\hat q$, `[B, H, L, D]` in any layout.
    pub queries: Heads<'a>,
    /// $\rho$, `[H, L, D]` (distances $0..L$).
    pub keys: &'a [f32],
}

/// An untied absolute term shared by the batch: $p^Q_i \cdot p^K_j$.
#[derive(Debug, Clone, Copy)]
pub struct Untied<'a> {
    /// $p^Q$, `[H, L, D]`.
    pub queries: &'a [f32],
    /// $p^K$, `[H, L, D]`.
    pub keys: &'a [f32],
}

/// Relative value vectors added to the output (Shaw et al.):
/// $o_i \mathrel{+}= \sum_{j \le i} \alpha_{ij}\, a^V_{\text{index}(i-j)}$, one table `[R, D]`
/// shared by every head.
#[derive(Debug, Clone, Copy)]
pub struct RelativeValues<'a> {
    /// $a^V$, `[R, D]` row-major.
    pub table: &'a [f32],
    /// $\text{index}(d)$ for distances $d = 0..L$, each below `R`.
    pub index: &'a [usize],
    /// `R`.
    pub rows: usize,
}

/// Every position term of one attention call (absent ones `None`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Terms<'a> {
    /// $b_{ij}$.
    pub bias: Bias<'a>,
    /// $g_{i,\,\text{index}(i-j)}$ (Shaw's keys, DeBERTa's c2p).
    pub query_table: Option<Gathered<'a>>,
    /// $g'_{j,\,\text{index}'(i-j)}$ (DeBERTa's p2c).
    pub key_table: Option<Gathered<'a>>,
    /// $\hat q_i \cdot \rho_{i-j}$ (Transformer-XL).
    pub distance: Option<DistanceKeys<'a>>,
    /// $p^Q_i \cdot p^K_j$ (TUPE).
    pub untied: Option<Untied<'a>>,
    /// Relative values (Shaw).
    pub values: Option<RelativeValues<'a>>,
}

/// `v` reversed in blocks of `block`: block $k$ of the result is block $n-1-k$ of `v`.
fn reversed<T: Copy>(v: &[T], block: usize) -> Vec<T> {
    v.chunks(block.max(1)).rev().flatten().copied().collect()
}

/// A run of equal entries of an index over distance, reversed: positions `start..end` of
/// the reversed index (distances $L-1-\text{start}$ down to $L-\text{end}$) all read `column`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Run {
    start: usize,
    end: usize,
    column: usize,
}

/// The runs of an index over distance `[L]`, reversed. An index clipped at a distance (Shaw)
/// or bucketed logarithmically (DeBERTa) has few runs, each a contiguous range of keys in
/// every row: the kernel adds one value to the range, or sums the range.
fn runs(index: &[usize]) -> Vec<Run> {
    let reversed = reversed(index, 1);
    let mut runs: Vec<Run> = Vec::new();
    for (k, &column) in reversed.iter().enumerate() {
        match runs.last_mut() {
            Some(r) if r.column == column => r.end = k + 1,
            _ => runs.push(Run {
                start: k,
                end: k + 1,
                column,
            }),
        }
    }
    runs
}

/// The runs of query `i` as ranges of its keys `a..b` (within `0..=i`) and their column.
#[inline]
fn row_runs(runs: &[Run], i: usize, l: usize) -> impl Iterator<Item = (usize, usize, usize)> + '_ {
    // key j reads reversed position o + j
    let o = l - 1 - i;
    let first = runs.partition_point(|r| r.end <= o);
    runs[first..]
        .iter()
        .map(move |r| (r.start.max(o) - o, r.end - o, r.column))
}

multiversion! {
    /// $x_j \mathrel{+}= v$.
    fn add_constant(x: &mut [f32], v: f32) {
        for s in x {
            *s += v;
        }
    }
}

multiversion! {
    /// $x_j \mathrel{+}= y_j$.
    fn add_slice(x: &mut [f32], y: &[f32]) {
        for (s, &t) in x.iter_mut().zip(y) {
            *s += t;
        }
    }
}

multiversion! {
    /// $\sum_j x_j$.
    fn slice_sum(x: &[f32]) -> f32 {
        sum(x)
    }
}

multiversion! {
    /// $b_j = s\,(\psi_j \nu) + a$ (one piece of a row).
    fn piece_values(out: &mut [f32], feature: &[f32], nu: f32, a: f32, s: f32) {
        for (b, &psi) in out.iter_mut().zip(feature) {
            *b = s.mul_add(psi * nu, a);
        }
    }
}

multiversion! {
    /// $\sum_j g_j$ and $\sum_j g_j\,(\psi_j \nu)$ (one piece of a row's gradient).
    fn piece_grads(g: &[f32], feature: &[f32], nu: f32) -> (f32, f32) {
        let x: f32 = g.iter().zip(feature).map(|(&g, &psi)| g * (psi * nu)).sum();
        (sum(g), x)
    }
}

/// The compact objects of [`Terms`] in the form the rows read, built once per call: the
/// vectors over distance reversed (distances $L-1, \dots, 0$: row $i$ reads entries
/// $L-1-i..L$ for keys $0..=i$), the indices as runs.
#[derive(Debug, Default)]
pub(super) struct Prepared {
    /// $\beta$ of every head reversed, `[H, L]`.
    bias: Vec<f32>,
    /// $\psi$ reversed, `[L]`.
    feature: Vec<f32>,
    /// The runs of the query table's index.
    query_runs: Vec<Run>,
    /// The runs of the key table's index.
    key_runs: Vec<Run>,
    /// The runs of the relative values' index.
    value_runs: Vec<Run>,
    /// $\rho$ of every head with its rows reversed, `[H, L, D]`.
    keys: Vec<f32>,
}

impl<'a> Terms<'a> {
    /// Checks every term against `dims`.
    ///
    /// # Panics
    /// When a term does not have the size `dims` asks for, an index is out of its table, or
    /// a piecewise bias's feature decreases with the distance or its row scale is not
    /// positive (the rows find their pieces by bisection).
    pub(super) fn check(&self, dims: &AttentionDims) {
        let AttentionDims {
            batch: b,
            heads: h,
            len: l,
            dim: d,
        } = *dims;
        let fits = |ok: bool, what: &str| assert!(ok, "attention: {what} does not fit {dims:?}");
        match &self.bias {
            Bias::None => {}
            Bias::Distance(t) => fits(t.len() == h * l, "an [H, L] bias"),
            Bias::Piecewise(f) => {
                let p = f.pieces();
                fits(
                    f.feature.len() == l
                        && f.row_scale.len() == l
                        && f.intercepts.len() == h * p
                        && f.slopes.len() == h * p
                        && f.feature.windows(2).all(|w| w[0] <= w[1])
                        && f.row_scale.iter().all(|&nu| nu > 0.0)
                        && f.breakpoints.windows(2).all(|w| w[0] <= w[1]),
                    "a piecewise bias (non-decreasing feature and breakpoints, positive scale)",
                );
            }
        }
        for (t, what) in [(&self.query_table, "query"), (&self.key_table, "key")] {
            if let Some(g) = t {
                fits(
                    g.table.len() == b * h * l * g.rows
                        && g.index.len() == l
                        && g.index.iter().all(|&c| c < g.rows),
                    &format!("the {what} table (or its index)"),
                );
            }
        }
        if let Some(dk) = &self.distance {
            dk.queries.check(dims, "relative queries");
            fits(dk.keys.len() == h * l * d, "the [H, L, D] relative keys");
        }
        if let Some(u) = &self.untied {
            fits(
                u.queries.len() == h * l * d && u.keys.len() == h * l * d,
                "the [H, L, D] untied terms",
            );
        }
        if let Some(rv) = &self.values {
            fits(
                rv.table.len() == rv.rows * d
                    && rv.index.len() == l
                    && rv.index.iter().all(|&c| c < rv.rows),
                "relative values (a [R, D] table and its index below R)",
            );
        }
    }

    /// The reversed vectors and the runs ([`Prepared`]).
    pub(super) fn prepare(&self, dims: &AttentionDims) -> Prepared {
        let (l, d) = (dims.len, dims.dim);
        let table_runs = |t: &Option<Gathered>| t.map_or(Vec::new(), |g| runs(g.index));
        Prepared {
            bias: match self.bias {
                Bias::Distance(beta) => {
                    beta.chunks(l.max(1)).flat_map(|h| reversed(h, 1)).collect()
                }
                _ => Vec::new(),
            },
            feature: match self.bias {
                Bias::Piecewise(f) => reversed(f.feature, 1),
                _ => Vec::new(),
            },
            query_runs: table_runs(&self.query_table),
            key_runs: table_runs(&self.key_table),
            value_runs: self.values.map_or(Vec::new(), |rv| runs(rv.index)),
            keys: self.distance.map_or(Vec::new(), |dk| {
                dk.keys
                    .chunks((l * d).max(1))
                    .flat_map(|h| reversed(h, d))
                    .collect()
            }),
        }
    }

    /// The terms of head `bh = b H + h`, reading `prepared`. The key table is the head's
    /// `[L, R]` block as stored: the caller transposes it ([`HeadTable::transpose`]) before
    /// the rows read it.
    #[inline]
    pub(super) fn head<'p>(
        &self,
        prepared: &'p Prepared,
        bh: usize,
        dims: &AttentionDims,
    ) -> HeadTerms<'p>
    where
        'a: 'p,
    {
        let (l, d) = (dims.len, dims.dim);
        let h = bh % dims.heads;
        let ld = l * d;
        let bias = match self.bias {
            Bias::None => HeadBias::None,
            Bias::Distance(_) => HeadBias::Reversed(&prepared.bias[h * l..(h + 1) * l]),
            Bias::Piecewise(f) => {
                let p = f.pieces();
                HeadBias::Piecewise {
                    feature: &prepared.feature,
                    row_scale: f.row_scale,
                    breakpoints: f.breakpoints,
                    intercepts: &f.intercepts[h * p..(h + 1) * p],
                    slopes: &f.slopes[h * p..(h + 1) * p],
                }
            }
        };
        let table = |g: &Option<Gathered<'a>>, runs: &'p [Run]| {
            g.map(|g| HeadTable {
                table: &g.table[bh * l * g.rows..(bh + 1) * l * g.rows],
                rows: g.rows,
                runs,
            })
        };
        HeadTerms {
            bias,
            query_table: table(&self.query_table, &prepared.query_runs),
            key_table: table(&self.key_table, &prepared.key_runs),
            distance: self.distance.map(|dk| HeadDistance {
                queries: dk.queries.head(bh, dims),
                keys: &prepared.keys[h * ld..(h + 1) * ld],
            }),
            untied: self.untied.map(|u| {
                (
                    &u.queries[h * ld..(h + 1) * ld],
                    &u.keys[h * ld..(h + 1) * ld],
                )
            }),
            values: self.values.map(|rv| HeadValues {
                table: rv.table,
                rows: rv.rows,
                runs: &prepared.value_runs,
            }),
        }
    }
}

/// The bias of one head.
#[derive(Debug, Clone, Copy)]
pub(super) enum HeadBias<'a> {
    None,
    /// $\beta$ reversed, `[L]`.
    Reversed(&'a [f32]),
    /// [`Piecewise`] of this head, the feature reversed.
    Piecewise {
        feature: &'a [f32],
        row_scale: &'a [f32],
        breakpoints: &'a [f32],
        intercepts: &'a [f32],
        slopes: &'a [f32],
    },
}

/// A gathered table of one head and the runs of its index: the query table `[L, R]` as
/// stored, the key table transposed `[R, L]` (a run reads a contiguous range of one column).
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadTable<'a> {
    pub(super) table: &'a [f32],
    pub(super) rows: usize,
    runs: &'a [Run],
}

impl HeadTable<'_> {
    /// Writes the head's `[L, R]` table transposed, `[R, L]`, into `out`.
    pub(super) fn transpose(&self, l: usize, out: &mut Vec<f32>) {
        transpose(self.table, l, self.rows, out);
    }
}

/// `x [rows, cols]` transposed into `out [cols, rows]`.
pub(super) fn transpose(x: &[f32], rows: usize, cols: usize, out: &mut Vec<f32>) {
    out.clear();
    out.resize(rows * cols, 0.0);
    for (r, row) in x.chunks(cols.max(1)).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            out[c * rows + r] = v;
        }
    }
}

/// Relative keys of one head: $\hat q$ rows and $\rho$ with its rows reversed `[L, D]`.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadDistance<'a> {
    pub(super) queries: HeadRows,
    pub(super) keys: &'a [f32],
}

/// Relative values as one head reads them.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadValues<'a> {
    pub(super) table: &'a [f32],
    pub(super) rows: usize,
    runs: &'a [Run],
}

impl HeadValues<'_> {
    /// The weights of each row of a tile summed per table row:
    /// $S_{r c} = \sum_{j \le i:\ \text{index}(i-j) = c} p_{r j}$ for tile rows $i = i_0 + r$,
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
            let p = &p[r * n..r * n + i + 1];
            for (a, b, c) in row_runs(self.runs, i, l) {
                out[c] += slice_sum(&p[a..b]);
            }
        }
    }

    /// $\partial p_{ij} \mathrel{+}= g_{\text{index}(i-j)}$ for the keys of query `i`, with
    /// $g = \partial o_i\, a^{V\top}$ `[R]`.
    #[inline]
    pub(super) fn add_to_row(&self, i: usize, l: usize, g: &[f32], dp: &mut [f32]) {
        for (a, b, c) in row_runs(self.runs, i, l) {
            add_constant(&mut dp[a..b], g[c]);
        }
    }
}

/// Every term of one head.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadTerms<'a> {
    pub(super) bias: HeadBias<'a>,
    pub(super) query_table: Option<HeadTable<'a>>,
    /// Transposed, `[R, L]`, once the caller has set it so.
    pub(super) key_table: Option<HeadTable<'a>>,
    pub(super) distance: Option<HeadDistance<'a>>,
    /// $p^Q$, $p^K$ of this head, `[L, D]` each.
    pub(super) untied: Option<(&'a [f32], &'a [f32])>,
    pub(super) values: Option<HeadValues<'a>>,
}

/// The keys $j$ of each piece of a row, as `(piece, a, b)`: with the row's features
/// $x_j = \psi_{i-j}\nu_i$ non-increasing in $j$, piece $p = \#\{k : t_k < x_j\}$ holds the
/// keys from the first with $x_j \le t_p$ to the first with $x_j \le t_{p-1}$.
#[inline]
fn piece_ranges<'b>(
    feature: &'b [f32],
    nu: f32,
    breakpoints: &'b [f32],
) -> impl Iterator<Item = (usize, usize, usize)> + 'b {
    // c_p = #{j : x_j > t_p}, non-increasing in p; c_{-1} = the row's length, c_{P-1} = 0
    let count = move |p: usize| feature.partition_point(|&psi| psi * nu > breakpoints[p]);
    let pieces = breakpoints.len() + 1;
    (0..pieces).map(move |p| {
        let a = if p + 1 < pieces { count(p) } else { 0 };
        let b = if p == 0 { feature.len() } else { count(p - 1) };
        (p, a, b.max(a))
    })
}

impl HeadTerms<'_> {
    /// Adds the gathered tables to the raw scores of query `i` (`row`: keys $0..=i$):
    /// $g_{i,\,\text{index}(i-j)} + g'_{j,\,\text{index}'(i-j)}$, one run of equal columns at
    /// a time.
    #[inline]
    pub(super) fn add_gathered(&self, i: usize, l: usize, row: &mut [f32]) {
        if let Some(t) = &self.query_table {
            let g = &t.table[i * t.rows..(i + 1) * t.rows];
            for (a, b, c) in row_runs(t.runs, i, l) {
                add_constant(&mut row[a..b], g[c]);
            }
        }
        if let Some(t) = &self.key_table {
            // the transposed table: column c of keys a..b is contiguous
            for (a, b, c) in row_runs(t.runs, i, l) {
                add_slice(&mut row[a..b], &t.table[c * l + a..c * l + b]);
            }
        }
    }

    /// The gradients of the gathered tables from the score gradient of query `i`, scaled by
    /// $c$: $\partial g_{i,\,\text{index}(i-j)} \mathrel{+}= c\,\partial s_{ij}$ into
    /// `dquery [L, R]` and $\partial g'_{j,\,\text{index}'(i-j)} \mathrel{+}= c\,\partial s_{ij}$
    /// into `dkey`, transposed `[R, L]`.
    #[inline]
    pub(super) fn gathered_grads(
        &self,
        i: usize,
        l: usize,
        ds: &[f32],
        scale: f32,
        (dquery, dkey): (&mut [f32], &mut [f32]),
    ) {
        if let Some(t) = &self.query_table {
            let g = &mut dquery[i * t.rows..(i + 1) * t.rows];
            for (a, b, c) in row_runs(t.runs, i, l) {
                g[c] += scale * slice_sum(&ds[a..b]);
            }
        }
        if let Some(t) = &self.key_table {
            for (a, b, c) in row_runs(t.runs, i, l) {
                let dst = &mut dkey[c * l + a..c * l + b];
                for (g, &d) in dst.iter_mut().zip(&ds[a..b]) {
                    *g += scale * d;
                }
            }
        }
    }

    /// The bias of query `i` for keys $0..=i$: a slice of the head's own data, or written
    /// into `scratch` (piecewise, one piece at a time); `None` without a bias.
    #[inline]
    pub(super) fn bias_row<'s>(
        &'s self,
        i: usize,
        l: usize,
        scratch: &'s mut [f32],
    ) -> Option<&'s [f32]> {
        match self.bias {
            HeadBias::None => None,
            HeadBias::Reversed(beta) => Some(&beta[l - 1 - i..]),
            HeadBias::Piecewise {
                feature,
                row_scale,
                breakpoints,
                intercepts,
                slopes,
            } => {
                let (nu, feature) = (row_scale[i], &feature[l - 1 - i..]);
                let out = &mut scratch[..=i];
                for (p, a, b) in piece_ranges(feature, nu, breakpoints) {
                    let (a0, s0) = (intercepts[p], slopes[p]);
                    piece_values(&mut out[a..b], &feature[a..b], nu, a0, s0);
                }
                Some(out)
            }
        }
    }

    /// Adds the gradient of the bias from the score gradient `ds` of query `i` (keys
    /// $0..=i$) to `dbias`: $\partial\beta$ reversed `[L]` (distance), or
    /// $(\partial a, \partial s)$ `[2, P]` (piecewise).
    #[inline]
    pub(super) fn bias_grad(&self, i: usize, l: usize, ds: &[f32], dbias: &mut [f32]) {
        match self.bias {
            HeadBias::None => {}
            HeadBias::Reversed(_) => add_slice(&mut dbias[l - 1 - i..], &ds[..=i]),
            HeadBias::Piecewise {
                feature,
                row_scale,
                breakpoints,
                ..
            } => {
                let (nu, feature) = (row_scale[i], &feature[l - 1 - i..]);
                let pieces = breakpoints.len() + 1;
                let (da, dsl) = dbias.split_at_mut(pieces);
                for (p, a, b) in piece_ranges(feature, nu, breakpoints) {
                    let (g, gx) = piece_grads(&ds[a..b], &feature[a..b], nu);
                    da[p] += g;
                    dsl[p] += gx;
                }
            }
        }
    }

    /// The size of one head's bias gradient accumulator.
    #[inline]
    pub(super) fn bias_grad_len(&self, l: usize) -> usize {
        match self.bias {
            HeadBias::None => 0,
            HeadBias::Reversed(_) => l,
            HeadBias::Piecewise { breakpoints, .. } => 2 * (breakpoints.len() + 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`piece_ranges`] gives every key of a row the piece that counts the breakpoints below
    /// its feature (ties below), several equal breakpoints an empty piece, and no key twice.
    #[test]
    fn piece_ranges_count_breakpoints_below() {
        let t = [-1.0, 0.0, 0.0, 2.0, 9.0];
        // x_j = feature_j * 0.5, non-increasing: 5, 2, 1, 0.5, 0, 0, -1, -3
        let feature = [10.0, 4.0, 2.0, 1.0, 0.0, 0.0, -2.0, -6.0];
        let mut seen = vec![None; feature.len()];
        for (p, a, b) in piece_ranges(&feature, 0.5, &t) {
            for s in &mut seen[a..b] {
                assert!(s.is_none(), "a key in two pieces");
                *s = Some(p);
            }
        }
        for (j, s) in seen.iter().enumerate() {
            let x = feature[j] * 0.5;
            let want = t.iter().filter(|&&t| t < x).count();
            assert_eq!(*s, Some(want), "key {j}, x = {x}");
        }
    }

    /// [`runs`] splits an index into maximal runs of one column, reversed, and [`row_runs`]
    /// gives each row the keys of each run: every key once, with the column of its distance.
    #[test]
    fn runs_cover_every_key_with_its_column() {
        let index = [3, 2, 1, 0, 0, 0, 5, 5];
        let l = index.len();
        let r = runs(&index);
        assert_eq!(r.len(), 5);
        for i in 0..l {
            let mut seen = vec![None; i + 1];
            for (a, b, c) in row_runs(&r, i, l) {
                for s in &mut seen[a..b] {
                    assert!(s.is_none());
                    *s = Some(c);
                }
            }
            for (j, s) in seen.iter().enumerate() {
                assert_eq!(*s, Some(index[i - j]), "row {i}, key {j}");
            }
        }
    }

    /// [`reversed`] reverses blocks, not the values inside one.
    #[test]
    fn reversed_keeps_blocks_whole() {
        assert_eq!(reversed(&[1, 2, 3, 4, 5, 6], 2), vec![5, 6, 3, 4, 1, 2]);
        assert_eq!(reversed(&[1, 2, 3], 1), vec![3, 2, 1]);
    }
}
