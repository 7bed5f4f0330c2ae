//! A piecewise-linear bias of a feature of the distance scaled per row (FIRE):
//! $b_{ij} = f_h(\psi_{i-j}\,\nu_i)$. A row's features are monotone in the key, so each piece
//! of $f_h$ covers one range of keys, found by bisection ([`piece_ranges`]); the breakpoints,
//! $\psi$ and $\nu$ are the same for every head and sequence, so each row's ranges are found
//! once per call ([`PreparedPiecewise`]). The first rows, whose scale equals the first row's
//! (FIRE's rows below its threshold), have one bias per distance: computed once per call,
//! their gradient summed per distance and folded into the pieces at the end.
//!
//! The gradient reaches the pieces, $\partial a_p = \sum \partial b_{ij}$ and
//! $\partial s_p = \sum \partial b_{ij}\, x_{ij}$ over the pairs on piece $p$, and, when asked
//! for, the feature's two factors through $\partial x_{ij} = s_p\, \partial b_{ij}$ (the pieces
//! themselves move only where a breakpoint crosses a feature, a set of measure zero):
//!
//! ```math
//! \partial\psi_d = \sum_{i - j = d} \partial x_{ij}\, \nu_i, \qquad
//! \partial\nu_i = \sum_{j \le i} \partial x_{ij}\, \psi_{i-j}.
//! ```

use super::reversed;
use crate::lm::ops::fused::simd::{dot, multiversion, sum};

/// One piece of one row: the piece $p$ and the keys `start..end` on it.
type Range = [u32; 3];

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

/// What every head of a call reads of a [`Piecewise`] bias, built once per call.
#[derive(Debug, Default)]
pub(in super::super) struct PreparedPiecewise {
    /// $\psi$ reversed, `[L]`.
    feature: Vec<f32>,
    /// How many rows are the first rows: those whose $\nu_i$ is $\nu_0$.
    shared_rows: usize,
    /// The pieces of the first rows' distances ($x = \psi_d \nu_0$), over the reversed
    /// feature.
    shared_ranges: Vec<Range>,
    /// The bias of every head at every distance, reversed, `[H, L]`, for the first rows.
    shared: Vec<f32>,
    /// $s_{h, p(d)}\, \psi_d$ of every head, reversed, `[H, L]`, for the first rows' $\partial\nu$.
    shared_slope_feature: Vec<f32>,
    /// The pieces of every later row: row $i$'s at `ranges[starts[i]..starts[i + 1]]`.
    ranges: Vec<Range>,
    /// `[L + 1]`.
    starts: Vec<usize>,
}

impl Piecewise<'_> {
    /// $P$.
    #[inline]
    pub(in super::super) fn pieces(&self) -> usize {
        self.breakpoints.len() + 1
    }

    /// The reversed feature, the first rows' bias per distance and the later rows' pieces
    /// ([`PreparedPiecewise`]).
    pub(super) fn prepare(&self) -> PreparedPiecewise {
        let feature = reversed(self.feature, 1);
        let l = feature.len();
        let Some(&nu) = self.row_scale.first() else {
            return PreparedPiecewise::default();
        };
        let shared_rows = self.row_scale.iter().take_while(|&&x| x == nu).count();
        let shared_ranges: Vec<Range> = piece_ranges(&feature, nu, self.breakpoints).collect();
        let p = self.pieces();
        let heads = self.intercepts.len() / p;
        let (mut shared, mut shared_slope_feature) = (vec![0.0; heads * l], vec![0.0; heads * l]);
        for h in 0..heads {
            let (a, s) = (
                &self.intercepts[h * p..(h + 1) * p],
                &self.slopes[h * p..(h + 1) * p],
            );
            let out = &mut shared[h * l..(h + 1) * l];
            piecewise_row(out, &feature, nu, &shared_ranges, a, s);
            // s_{p(d)} psi_d
            let w = &mut shared_slope_feature[h * l..(h + 1) * l];
            for &[piece, start, end] in &shared_ranges {
                let (start, end) = (start as usize, end as usize);
                for (w, &psi) in w[start..end].iter_mut().zip(&feature[start..end]) {
                    *w = s[piece as usize] * psi;
                }
            }
        }
        let (mut ranges, mut starts) = (Vec::new(), Vec::with_capacity(l + 1));
        for (i, &nu) in self.row_scale.iter().enumerate() {
            starts.push(ranges.len());
            if i >= shared_rows {
                ranges.extend(piece_ranges(&feature[l - 1 - i..], nu, self.breakpoints));
            }
        }
        starts.push(ranges.len());
        PreparedPiecewise {
            feature,
            shared_rows,
            shared_ranges,
            shared,
            shared_slope_feature,
            ranges,
            starts,
        }
    }

    /// Head `h` of the bias, reading `prepared`.
    pub(super) fn head<'p>(&self, prepared: &'p PreparedPiecewise, h: usize) -> HeadPiecewise<'p>
    where
        Self: 'p,
    {
        let (p, l) = (self.pieces(), prepared.feature.len());
        HeadPiecewise {
            prepared,
            shared: &prepared.shared[h * l..(h + 1) * l],
            shared_slope_feature: &prepared.shared_slope_feature[h * l..(h + 1) * l],
            row_scale: self.row_scale,
            intercepts: &self.intercepts[h * p..(h + 1) * p],
            slopes: &self.slopes[h * p..(h + 1) * p],
        }
    }
}

/// A [`Piecewise`] bias as one head reads it: what the call prepared, and this head's bias
/// of the first rows, pieces and slopes.
#[derive(Debug, Clone, Copy)]
pub(in super::super) struct HeadPiecewise<'a> {
    prepared: &'a PreparedPiecewise,
    shared: &'a [f32],
    shared_slope_feature: &'a [f32],
    row_scale: &'a [f32],
    intercepts: &'a [f32],
    slopes: &'a [f32],
}

impl HeadPiecewise<'_> {
    /// The pieces of a later row `i`.
    #[inline]
    fn ranges(&self, i: usize) -> &[Range] {
        let p = self.prepared;
        &p.ranges[p.starts[i]..p.starts[i + 1]]
    }

    /// The bias of query `i` for keys $0..=i$: the first rows' own slice, or written into
    /// `scratch`.
    #[inline]
    pub(super) fn row<'s>(&'s self, i: usize, l: usize, scratch: &'s mut [f32]) -> &'s [f32] {
        if i < self.prepared.shared_rows {
            return &self.shared[l - 1 - i..];
        }
        let out = &mut scratch[..=i];
        let (nu, feature) = (self.row_scale[i], &self.prepared.feature[l - 1 - i..]);
        piecewise_row(
            out,
            feature,
            nu,
            self.ranges(i),
            self.intercepts,
            self.slopes,
        );
        out
    }

    /// The size of the head's gradient accumulator ([`Accumulator`]): $(\partial a, \partial s)$
    /// `[2, P]`, the first rows' gradient per distance, reversed, `[L]`, and with `feature`
    /// $\partial\psi$ reversed and $\partial\nu$, `[L]` each.
    #[inline]
    pub(super) fn grad_len(&self, l: usize, feature: bool) -> usize {
        2 * self.intercepts.len() + if feature { 3 * l } else { l }
    }

    /// Adds the gradient from the score gradient `ds` of query `i` (keys $0..=i$) to `grad`
    /// ([`HeadPiecewise::grad_len`]; the feature's factors when it holds them): a first row's
    /// to the sums per distance (and its $\partial\nu_i = \sum_j \partial b_{ij}\, s_{p(i-j)}
    /// \psi_{i-j}$), a later row's to the pieces and the factors directly.
    #[inline]
    pub(super) fn grad(&self, i: usize, l: usize, ds: &[f32], grad: &mut [f32]) {
        let acc = Accumulator::split(grad, self.intercepts.len(), l);
        let g = &ds[..=i];
        if i < self.prepared.shared_rows {
            for (p, &d) in acc.per_distance[l - 1 - i..].iter_mut().zip(g) {
                *p += d;
            }
            if let Some((_, dnu)) = acc.feature {
                dnu[i] += dot_slices(g, &self.shared_slope_feature[l - 1 - i..]);
            }
        } else {
            let (nu, feature) = (self.row_scale[i], &self.prepared.feature[l - 1 - i..]);
            let (dpsi, dnu) = acc
                .feature
                .map(|(dpsi, dnu)| (&mut dpsi[l - 1 - i..], &mut dnu[i]))
                .unzip();
            let pieces = Some((acc.da, acc.ds));
            let d = piecewise_grads(g, feature, nu, self.ranges(i), self.slopes, pieces, dpsi);
            if let Some(dnu) = dnu {
                *dnu += d;
            }
        }
    }

    /// Folds the first rows' gradient per distance into the pieces' (their $x$ is
    /// $\psi_d\,\nu_0$) and, when `grad` holds it, into $\partial\psi_d$
    /// ($\nu_0\, s_{p(d)}$ times the sum), leaving $(\partial a, \partial s)$ `[2, P]`, then
    /// $\partial\psi$ reversed and $\partial\nu$ `[L]` each when `grad` holds them.
    pub(super) fn finish_grad(&self, grad: &mut Vec<f32>) {
        let (pieces, p) = (self.intercepts.len(), self.prepared);
        let l = p.feature.len();
        let acc = Accumulator::split(grad, pieces, l);
        if let Some(&nu) = self.row_scale.first() {
            let to_pieces = Some((acc.da, acc.ds));
            let dpsi = acc.feature.map(|(dpsi, _)| dpsi);
            let (f, r, s) = (&p.feature, &p.shared_ranges, self.slopes);
            // (the first rows' dnu were added row by row)
            piecewise_grads(acc.per_distance, f, nu, r, s, to_pieces, dpsi);
        }
        // drop the per-distance sums: [da, ds, (dpsi, dnu)]
        grad.drain(2 * pieces..2 * pieces + l);
    }
}

/// A head's gradient accumulator ([`HeadPiecewise::grad_len`]) split into its parts.
struct Accumulator<'g> {
    da: &'g mut [f32],
    ds: &'g mut [f32],
    per_distance: &'g mut [f32],
    /// $\partial\psi$ reversed and $\partial\nu$, when asked for.
    feature: Option<(&'g mut [f32], &'g mut [f32])>,
}

impl<'g> Accumulator<'g> {
    fn split(grad: &'g mut [f32], pieces: usize, l: usize) -> Self {
        let (da, rest) = grad.split_at_mut(pieces);
        let (ds, rest) = rest.split_at_mut(pieces);
        let (per_distance, rest) = rest.split_at_mut(l);
        let feature = (!rest.is_empty()).then(|| rest.split_at_mut(l));
        Self {
            da,
            ds,
            per_distance,
            feature,
        }
    }
}

/// The keys $j$ of each piece of a row, as `[piece, start, end]`: with the row's features
/// $x_j = \psi_{i-j}\nu_i$ non-increasing in $j$, piece $p = \#\{k : t_k < x_j\}$ holds the
/// keys from the first with $x_j \le t_p$ to the first with $x_j \le t_{p-1}$. Only the pieces
/// from the last key's to the first key's are visited (the others hold no key), and each
/// boundary is found once, by bisection among the keys left.
#[inline(always)]
fn piece_ranges<'b>(
    feature: &'b [f32],
    nu: f32,
    breakpoints: &'b [f32],
) -> impl Iterator<Item = Range> + 'b {
    let (first, last) = match (feature.first(), feature.last()) {
        (Some(&f), Some(&l)) => (f * nu, l * nu),
        _ => (0.0, 0.0),
    };
    // the pieces of the first key (the largest x) and of the last (the smallest)
    let top = breakpoints.partition_point(|&t| t < first);
    let bottom = breakpoints.partition_point(|&t| t < last).min(top);
    let pieces = if feature.is_empty() {
        0..0
    } else {
        bottom..top + 1
    };
    // c_p = #{j : x_j > t_p}, non-increasing in p; the bottom piece ends at the row's end
    let mut end = feature.len();
    pieces.map(move |p| {
        let start = if p == top {
            0
        } else {
            feature[..end].partition_point(|&psi| psi * nu > breakpoints[p])
        };
        let range = [p as u32, start as u32, end as u32];
        end = start;
        range
    })
}

multiversion! {
    /// $\sum_j a_j b_j$.
    fn dot_slices(a: &[f32], b: &[f32]) -> f32 {
        dot(a, b)
    }
}

multiversion! {
    /// The piecewise bias of a row: $b_j = s_p\,(\psi_j \nu) + a_p$ on each piece's keys
    /// (`ranges`, [`piece_ranges`]).
    fn piecewise_row(out: &mut [f32], feature: &[f32], nu: f32, ranges: &[Range], intercepts: &[f32], slopes: &[f32]) {
        for &[p, a, b] in ranges {
            let (p, a, b) = (p as usize, a as usize, b as usize);
            let (a0, s0) = (intercepts[p], slopes[p]);
            for (v, &psi) in out[a..b].iter_mut().zip(&feature[a..b]) {
                *v = s0.mul_add(psi * nu, a0);
            }
        }
    }
}

multiversion! {
    /// The gradient of [`piecewise_row`] from the row's $\partial b$, over each piece's keys:
    /// into `pieces`, $\partial a_p \mathrel{+}= \sum_j \partial b_j$ and $\partial s_p
    /// \mathrel{+}= \nu \sum_j \partial b_j\, \psi_j$; into `dfeature`, $\partial\psi_j
    /// \mathrel{+}= s_p\,\partial b_j\, \nu$. Returns $\partial\nu = \sum_p s_p \sum_j \partial b_j\,
    /// \psi_j$ (0 without `dfeature`).
    fn piecewise_grads(g: &[f32], feature: &[f32], nu: f32, ranges: &[Range], slopes: &[f32], pieces: Option<(&mut [f32], &mut [f32])>, dfeature: Option<&mut [f32]>) -> f32 {
        let (mut pieces, mut dfeature) = (pieces, dfeature);
        let mut dnu = 0.0;
        for &[p, a, b] in ranges {
            let (p, a, b) = (p as usize, a as usize, b as usize);
            let (g, f) = (&g[a..b], &feature[a..b]);
            // sum_j db_j psi_j
            let g_psi = dot(g, f);
            if let Some((da, ds)) = pieces.as_mut() {
                da[p] += sum(g);
                ds[p] += nu * g_psi;
            }
            if let Some(dpsi) = dfeature.as_deref_mut() {
                // dx_j = s_p db_j: dpsi_j += dx_j nu, dnu += dx_j psi_j
                let s_nu = slopes[p] * nu;
                for (d, &gj) in dpsi[a..b].iter_mut().zip(g) {
                    *d = gj.mul_add(s_nu, *d);
                }
                dnu += slopes[p] * g_psi;
            }
        }
        dnu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`piece_ranges`] gives every key of a row the piece that counts the breakpoints below
    /// its feature (ties below), several equal breakpoints an empty piece, and no key twice:
    /// breakpoints inside the row's range, all below it, all above it, and none.
    #[test]
    fn piece_ranges_count_breakpoints_below() {
        // x_j = feature_j * nu, non-increasing: at nu = 0.5, 5, 2, 1, 0.5, 0, 0, -1, -3
        let feature = [10.0, 4.0, 2.0, 1.0, 0.0, 0.0, -2.0, -6.0];
        let inside = [-1.0, 0.0, 0.0, 2.0, 9.0];
        let below = [-9.0, -8.0];
        let above = [7.0, 8.0, 8.0];
        for t in [&inside[..], &below, &above, &[]] {
            for nu in [0.5, 0.1, 3.0] {
                for len in [1, 2, 5, 8] {
                    let feature = &feature[..len];
                    let mut seen = vec![None; len];
                    for [p, a, b] in piece_ranges(feature, nu, t) {
                        for s in &mut seen[a as usize..b as usize] {
                            assert!(s.is_none(), "a key in two pieces");
                            *s = Some(p as usize);
                        }
                    }
                    for (j, s) in seen.iter().enumerate() {
                        let x = feature[j] * nu;
                        let want = t.iter().filter(|&&t| t < x).count();
                        assert_eq!(*s, Some(want), "key {j}, x = {x}, breakpoints {t:?}");
                    }
                }
            }
        }
    }
}
