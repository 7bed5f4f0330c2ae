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

/// The vectors over distance of [`Terms`] reversed (distances $L-1, \dots, 0$), built once
/// per call: row $i$ reads entries $L-1-i .. L$ for keys $0..=i$.
#[derive(Debug, Default)]
pub(super) struct Prepared {
    /// $\beta$ of every head reversed, `[H, L]`.
    bias: Vec<f32>,
    /// $\psi$ reversed, `[L]`.
    feature: Vec<f32>,
    /// The query table's index reversed.
    query_index: Vec<usize>,
    /// The key table's index reversed.
    key_index: Vec<usize>,
    /// The relative values' index reversed.
    value_index: Vec<usize>,
    /// $\rho$ of every head with its rows reversed, `[H, L, D]`.
    keys: Vec<f32>,
}

impl<'a> Terms<'a> {
    /// Checks every term against `dims`.
    ///
    /// # Panics
    /// When a term does not have the size `dims` asks for, or an index is out of its table.
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
                        && f.slopes.len() == h * p,
                    "a piecewise bias",
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

    /// The reversed vectors over distance ([`Prepared`]).
    pub(super) fn prepare(&self, dims: &AttentionDims) -> Prepared {
        let (l, d) = (dims.len, dims.dim);
        let index = |t: &Option<Gathered>| t.map_or(Vec::new(), |g| reversed(g.index, 1));
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
            query_index: index(&self.query_table),
            key_index: index(&self.key_table),
            value_index: self.values.map_or(Vec::new(), |rv| reversed(rv.index, 1)),
            keys: self.distance.map_or(Vec::new(), |dk| {
                dk.keys
                    .chunks((l * d).max(1))
                    .flat_map(|h| reversed(h, d))
                    .collect()
            }),
        }
    }

    /// The terms of head `bh = b H + h`, reading `prepared`.
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
        let table = |g: &Option<Gathered<'a>>, index: &'p [usize]| {
            g.map(|g| HeadTable {
                table: &g.table[bh * l * g.rows..(bh + 1) * l * g.rows],
                rows: g.rows,
                index,
            })
        };
        HeadTerms {
            bias,
            query_table: table(&self.query_table, &prepared.query_index),
            key_table: table(&self.key_table, &prepared.key_index),
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
                index: &prepared.value_index,
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

/// A gathered table of one head: `[L, R]` and its index reversed.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadTable<'a> {
    pub(super) table: &'a [f32],
    pub(super) rows: usize,
    pub(super) index: &'a [usize],
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
    /// The index over distance, reversed.
    pub(super) index: &'a [usize],
}

impl HeadValues<'_> {
    /// The table row of every key $0..=i$ of query `i`.
    #[inline]
    pub(super) fn row_index(&self, i: usize, l: usize) -> &[usize] {
        &self.index[l - 1 - i..]
    }

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
            for (&c, &w) in self.row_index(i, l).iter().zip(&p[r * n..r * n + i + 1]) {
                out[c] += w;
            }
        }
    }
}

/// Every term of one head.
#[derive(Debug, Clone, Copy)]
pub(super) struct HeadTerms<'a> {
    pub(super) bias: HeadBias<'a>,
    pub(super) query_table: Option<HeadTable<'a>>,
    pub(super) key_table: Option<HeadTable<'a>>,
    pub(super) distance: Option<HeadDistance<'a>>,
    /// $p^Q$, $p^K$ of this head, `[L, D]` each.
    pub(super) untied: Option<(&'a [f32], &'a [f32])>,
    pub(super) values: Option<HeadValues<'a>>,
}

/// The piece of $x$: $\#\{k : t_k < x\}$, moved from `p` (the previous one; cheap when $x$
/// moves little).
#[inline(always)]
fn piece(breakpoints: &[f32], mut p: usize, x: f32) -> usize {
    while p > 0 && x <= breakpoints[p - 1] {
        p -= 1;
    }
    while p < breakpoints.len() && x > breakpoints[p] {
        p += 1;
    }
    p
}

impl HeadTerms<'_> {
    /// Adds the gathered tables to the raw scores of query `i` (`row`: keys $0..=i$):
    /// $g_{i,\,\text{index}(i-j)} + g'_{j,\,\text{index}'(i-j)}$.
    #[inline]
    pub(super) fn add_gathered(&self, i: usize, l: usize, row: &mut [f32]) {
        if let Some(t) = &self.query_table {
            let g = &t.table[i * t.rows..(i + 1) * t.rows];
            for (s, &c) in row[..=i].iter_mut().zip(&t.index[l - 1 - i..]) {
                *s += g[c];
            }
        }
        if let Some(t) = &self.key_table {
            for (j, (s, &c)) in row[..=i].iter_mut().zip(&t.index[l - 1 - i..]).enumerate() {
                *s += t.table[j * t.rows + c];
            }
        }
    }

    /// The gradients of the gathered tables from the score gradient of query `i`, scaled by
    /// $c$: $\partial g_{i,\,\text{index}(i-j)} \mathrel{+}= c\,\partial s_{ij}$ into
    /// `dquery [L, R]` and $\partial g'_{j,\,\text{index}'(i-j)} \mathrel{+}= c\,\partial s_{ij}$
    /// into `dkey [L, R]`.
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
            for (&ds, &c) in ds[..=i].iter().zip(&t.index[l - 1 - i..]) {
                g[c] += scale * ds;
            }
        }
        if let Some(t) = &self.key_table {
            for (j, (&ds, &c)) in ds[..=i].iter().zip(&t.index[l - 1 - i..]).enumerate() {
                dkey[j * t.rows + c] += scale * ds;
            }
        }
    }

    /// The bias of query `i` for keys $0..=i$: a slice of the head's own data, or written
    /// into `scratch` (piecewise); `None` without a bias.
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
                let nu = row_scale[i];
                let out = &mut scratch[..=i];
                let mut p = 0;
                for (b, &psi) in out.iter_mut().zip(&feature[l - 1 - i..]) {
                    let x = psi * nu;
                    p = piece(breakpoints, p, x);
                    *b = slopes[p].mul_add(x, intercepts[p]);
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
            HeadBias::Reversed(_) => {
                for (g, &d) in dbias[l - 1 - i..].iter_mut().zip(&ds[..=i]) {
                    *g += d;
                }
            }
            HeadBias::Piecewise {
                feature,
                row_scale,
                breakpoints,
                ..
            } => {
                let nu = row_scale[i];
                let pieces = breakpoints.len() + 1;
                let (da, dsl) = dbias.split_at_mut(pieces);
                let mut p = 0;
                for (&g, &psi) in ds[..=i].iter().zip(&feature[l - 1 - i..]) {
                    let x = psi * nu;
                    p = piece(breakpoints, p, x);
                    da[p] += g;
                    dsl[p] = g.mul_add(x, dsl[p]);
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

    /// [`piece`] counts the breakpoints below $x$ from any starting piece, ties (a breakpoint
    /// equal to $x$) below, and several equal breakpoints (an empty piece) skipped.
    #[test]
    fn piece_counts_breakpoints_below() {
        let t = [-1.0, 0.0, 0.0, 2.0];
        for (x, want) in [
            (-5.0, 0),
            (-1.0, 0),
            (-0.5, 1),
            (0.0, 1),
            (1.0, 3),
            (2.0, 3),
            (9.0, 4),
        ] {
            for start in 0..=4 {
                assert_eq!(piece(&t, start, x), want, "x = {x} from {start}");
            }
        }
        assert_eq!(piece(&[], 0, 3.0), 0);
    }

    /// [`reversed`] reverses blocks, not the values inside one.
    #[test]
    fn reversed_keeps_blocks_whole() {
        assert_eq!(reversed(&[1, 2, 3, 4, 5, 6], 2), vec![5, 6, 3, 4, 1, 2]);
        assert_eq!(reversed(&[1, 2, 3], 1), vec![3, 2, 1]);
    }
}
