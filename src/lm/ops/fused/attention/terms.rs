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
//! $\sum_j \alpha_{ij}\, a^V_{\text{index}(i-j)}$ to the output. CoPE's contextual
//! positions add $z_{ij}$ to the finished logit, counted along its row
//! ([`super::contextual`]).
//!
//! A row $i$ reads the distances $i, i-1, \dots, 0$ for keys $0, 1, \dots, i$: each vector
//! over distance is reversed once per call ([`Prepared`]), so that the row reads a contiguous
//! slice of it, and each index over distance is cut into runs ([`runs`]).

mod piecewise;
mod runs;

use super::super::heads::{AttentionDims, HeadRows, Heads};
use super::super::simd::multiversion;
use super::contextual::Contextual;
pub use piecewise::Piecewise;
use piecewise::{HeadPiecewise, PreparedPiecewise};
use runs::{add_run_columns, add_runs, scatter_run_columns, sum_runs, DistanceRuns, Layout};

/// Which gradients of the bias a backward pass returns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BiasGrads {
    /// $\partial\beta$, or a piecewise bias's $(\partial a, \partial s)$.
    pub bias: bool,
    /// A piecewise bias's $(\partial\psi, \partial\nu)$ (ignored for the others).
    pub feature: bool,
}

impl BiasGrads {
    /// Whether any is asked for.
    pub fn any(self) -> bool {
        self.bias || self.feature
    }
}

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

/// A second pair of queries and keys for the pairs at distance $i - j \ge w$ (ReRoPE, Leaky
/// ReRoPE): their product replaces $q_i \cdot k_j$ there,
/// $s_{ij} = q^{(2)}_i \cdot k^{(2)}_j$ for $i - j \ge w$. Evaluation only: the backward pass
/// refuses it.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    /// $q^{(2)}$, `[B, H, L, D]` in any layout.
    pub queries: Heads<'a>,
    /// $k^{(2)}$, `[B, H, L, D]` in any layout.
    pub keys: Heads<'a>,
    /// $w \ge 1$.
    pub window: usize,
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
    /// The second pass beyond a window (ReRoPE; evaluation only).
    pub window: Option<Window<'a>>,
    /// CoPE's $z_{ij}$, added to the scaled, biased logits.
    pub contextual: Option<Contextual<'a>>,
}

/// `v` reversed in blocks of `block`: block $k$ of the result is block $n-1-k$ of `v`.
fn reversed<T: Copy>(v: &[T], block: usize) -> Vec<T> {
    v.chunks(block.max(1)).rev().flatten().copied().collect()
}

multiversion! {
    /// $x_j \mathrel{+}= y_j$.
    fn add_slice(x: &mut [f32], y: &[f32]) {
        for (s, &t) in x.iter_mut().zip(y) {
            *s += t;
        }
    }
}

/// The compact objects of [`Terms`] in the form the rows read, built once per call: the
/// vectors over distance reversed (distances $L-1, \dots, 0$: row $i$ reads entries
/// $L-1-i..L$ for keys $0..=i$), the indices as runs.
#[derive(Debug, Default)]
pub(super) struct Prepared {
    /// $\beta$ of every head reversed, `[H, L]`.
    bias: Vec<f32>,
    /// A piecewise bias's reversed feature and first rows.
    piecewise: PreparedPiecewise,
    /// The runs of the query table's index.
    query_runs: DistanceRuns,
    /// The runs of the key table's index.
    key_runs: DistanceRuns,
    /// The runs of the relative values' index.
    value_runs: DistanceRuns,
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
        if let Some(w) = &self.window {
            w.queries.check(dims, "second-pass queries");
            w.keys.check(dims, "second-pass keys");
            fits(w.window >= 1, "a window of at least 1");
        }
        if let Some(cx) = &self.contextual {
            cx.check(d);
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
        let table_runs =
            |t: &Option<Gathered>| t.map_or_else(Default::default, |g| DistanceRuns::new(g.index));
        Prepared {
            bias: match self.bias {
                Bias::Distance(beta) => {
                    beta.chunks(l.max(1)).flat_map(|h| reversed(h, 1)).collect()
                }
                _ => Vec::new(),
            },
            piecewise: match self.bias {
                Bias::Piecewise(f) => f.prepare(),
                _ => PreparedPiecewise::default(),
            },
            query_runs: table_runs(&self.query_table),
            key_runs: table_runs(&self.key_table),
            value_runs: self
                .values
                .map_or_else(Default::default, |rv| DistanceRuns::new(rv.index)),
            keys: self.distance.map_or(Vec::new(), |dk| {
                dk.keys
                    .chunks((l * d).max(1))
                    .flat_map(|h| reversed(h, d))
                    .collect()
            }),
        }
    }

    /// The terms of head `bh = b H + h`, reading `prepared`. The key table is the head's
    /// `[L, R]` block as stored: the caller hands it to [`HeadTable::for_rows`] before the
    /// rows read it.
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
            Bias::Piecewise(f) => HeadBias::Piecewise(f.head(&prepared.piecewise, h)),
        };
        let table = |g: &Option<Gathered<'a>>, runs: &'p DistanceRuns| {
            g.map(|g| HeadTable {
                table: &g.table[bh * l * g.rows..(bh + 1) * l * g.rows],
                rows: g.rows,
                transposed: false,
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
            window: self
                .window
                .map(|w| (w.queries.head(bh, dims), w.keys.head(bh, dims), w.window)),
            contextual: self.contextual,
        }
    }
}

/// The bias of one head.
#[derive(Debug, Clone, Copy)]
pub(super) enum HeadBias<'a> {
    None,
    /// $\beta$ reversed, `[L]`.
    Reversed(&'a [f32]),
    /// [`Piecewise`] of this head.
    Piecewise(HeadPiecewise<'a>),
}

/// A gathered table of one head and the runs of its index: `[L, R]` as stored (the query
/// table), or transposed `[R, L]` (a key table whose index has runs of one column: each run
/// reads a contiguous range of one column).
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadTable<'a> {
    table: &'a [f32],
    pub(super) rows: usize,
    transposed: bool,
    runs: &'a DistanceRuns,
}

impl<'a> HeadTable<'a> {
    /// The key table as its rows read it: transposed into `out` when its index has runs of
    /// one column ([`DistanceRuns::has_columns`]), else as stored.
    pub(super) fn for_rows<'b>(self, l: usize, out: &'b mut Vec<f32>) -> HeadTable<'b>
    where
        'a: 'b,
    {
        if !self.runs.has_columns() {
            return self;
        }
        transpose(self.table, l, self.rows, out);
        HeadTable {
            table: out,
            transposed: true,
            ..self
        }
    }

    /// Whether the table (and so its gradient) is transposed, `[R, L]`.
    pub(super) fn transposed(&self) -> bool {
        self.transposed
    }

    /// Where column $c$ of key $j$ lies.
    #[inline]
    fn layout(&self, l: usize) -> Layout {
        if self.transposed {
            Layout { column: l, key: 1 }
        } else {
            Layout {
                column: 1,
                key: self.rows,
            }
        }
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
    runs: &'a DistanceRuns,
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
            sum_runs(&p[r * n..r * n + i + 1], out, 1.0, self.runs, i, l);
        }
    }

    /// $\partial p_{ij} \mathrel{+}= g_{\text{index}(i-j)}$ for the keys of query `i`, with
    /// $g = \partial o_i\, a^{V\top}$ `[R]`.
    #[inline]
    pub(super) fn add_to_row(&self, i: usize, l: usize, g: &[f32], dp: &mut [f32]) {
        add_runs(dp, g, self.runs, i, l);
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
    /// The second pass's query and key rows of this head and $w$.
    pub(super) window: Option<(HeadRows, HeadRows, usize)>,
    /// CoPE's embeddings (every head's).
    pub(super) contextual: Option<Contextual<'a>>,
}

impl HeadTerms<'_> {
    /// Adds the gathered tables to the raw scores of query `i` (`row`: keys $0..=i$):
    /// $g_{i,\,\text{index}(i-j)} + g'_{j,\,\text{index}'(i-j)}$, one run of equal columns at
    /// a time.
    #[inline]
    pub(super) fn add_gathered(&self, i: usize, l: usize, row: &mut [f32]) {
        if let Some(t) = &self.query_table {
            add_runs(row, &t.table[i * t.rows..(i + 1) * t.rows], t.runs, i, l);
        }
        if let Some(t) = &self.key_table {
            add_run_columns(row, t.table, t.layout(l), t.runs, i, l);
        }
    }

    /// The gradients of the gathered tables from the score gradient of query `i`, scaled by
    /// $c$: $\partial g_{i,\,\text{index}(i-j)} \mathrel{+}= c\,\partial s_{ij}$ into
    /// `dquery [L, R]` and $\partial g'_{j,\,\text{index}'(i-j)} \mathrel{+}= c\,\partial s_{ij}$
    /// into `dkey` (in the key table's layout, [`HeadTable::transposed`]).
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
            sum_runs(&ds[..=i], g, scale, t.runs, i, l);
        }
        if let Some(t) = &self.key_table {
            scatter_run_columns(dkey, &ds[..=i], scale, t.layout(l), t.runs, i, l);
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
        match &self.bias {
            HeadBias::None => None,
            HeadBias::Reversed(beta) => Some(&beta[l - 1 - i..]),
            HeadBias::Piecewise(f) => Some(f.row(i, l, scratch)),
        }
    }

    /// Adds the gradient of the bias from the score gradient `ds` of query `i` (keys
    /// $0..=i$) to `dbias` ([`HeadTerms::bias_grad_len`]): $\partial\beta$ reversed `[L]`
    /// (distance), or as [`HeadPiecewise::grad`] (piecewise).
    #[inline]
    pub(super) fn bias_grad(&self, i: usize, l: usize, ds: &[f32], dbias: &mut [f32]) {
        match &self.bias {
            HeadBias::None => {}
            HeadBias::Reversed(_) => add_slice(&mut dbias[l - 1 - i..], &ds[..=i]),
            HeadBias::Piecewise(f) => f.grad(i, l, ds, dbias),
        }
    }

    /// Turns the accumulated `dbias` into the bias's gradient: $\partial\beta$ reversed
    /// `[L]`, or $(\partial a, \partial s)$ `[2, P]` and, when asked for, $\partial\psi$
    /// reversed and $\partial\nu$ `[L]` each ([`HeadPiecewise::finish_grad`]).
    pub(super) fn finish_bias_grad(&self, dbias: &mut Vec<f32>) {
        if let HeadBias::Piecewise(f) = &self.bias {
            f.finish_grad(dbias);
        }
    }

    /// The size of one head's bias gradient accumulator, with the gradient of a piecewise
    /// bias's feature when `feature`.
    #[inline]
    pub(super) fn bias_grad_len(&self, l: usize, feature: bool) -> usize {
        match &self.bias {
            HeadBias::None => 0,
            HeadBias::Reversed(_) => l,
            HeadBias::Piecewise(f) => f.grad_len(l, feature),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`reversed`] reverses blocks, not the values inside one.
    #[test]
    fn reversed_keeps_blocks_whole() {
        assert_eq!(reversed(&[1, 2, 3, 4, 5, 6], 2), vec![5, 6, 3, 4, 1, 2]);
        assert_eq!(reversed(&[1, 2, 3], 1), vec![3, 2, 1]);
    }
}
