//! A piecewise-linear bias of a feature of the distance scaled per row (FIRE):
//! $b_{ij} = f_h(\psi_{i-j}\,\nu_i)$. A row's features are monotone in the key, so each piece
//! of $f_h$ covers one range of keys, found by bisection ([`piece_ranges`]). The first rows,
//! whose scale equals the first row's (FIRE's rows below its threshold), have one bias per
//! distance: computed once per call, their gradient summed per distance and folded into the
//! pieces at the end.
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
    /// The bias of every head at every distance, reversed, `[H, L]`, for the first rows.
    shared: Vec<f32>,
    /// How many rows read `shared`: those whose $\nu_i$ is $\nu_0$.
    shared_rows: usize,
}

impl Piecewise<'_> {
    /// $P$.
    #[inline]
    pub(in super::super) fn pieces(&self) -> usize {
        self.breakpoints.len() + 1
    }

    /// The reversed feature and the first rows' bias per distance ([`PreparedPiecewise`]).
    pub(super) fn prepare(&self) -> PreparedPiecewise {
        let feature = reversed(self.feature, 1);
        let Some(&nu) = self.row_scale.first() else {
            return PreparedPiecewise::default();
        };
        let shared_rows = self.row_scale.iter().take_while(|&&x| x == nu).count();
        let p = self.pieces();
        let mut shared = vec![0.0; self.intercepts.len() / p * feature.len()];
        for (h, out) in shared.chunks_mut(feature.len().max(1)).enumerate() {
            let (a, s) = (
                &self.intercepts[h * p..(h + 1) * p],
                &self.slopes[h * p..(h + 1) * p],
            );
            piecewise_row(out, &feature, nu, self.breakpoints, a, s);
        }
        PreparedPiecewise {
            feature,
            shared,
            shared_rows,
        }
    }

    /// Head `h` of the bias, reading `prepared`.
    pub(super) fn head<'p>(&self, prepared: &'p PreparedPiecewise, h: usize) -> HeadPiecewise<'p>
    where
        Self: 'p,
    {
        let (p, l) = (self.pieces(), prepared.feature.len());
        HeadPiecewise {
            feature: &prepared.feature,
            shared: &prepared.shared[h * l..(h + 1) * l],
            shared_rows: prepared.shared_rows,
            row_scale: self.row_scale,
            breakpoints: self.breakpoints,
            intercepts: &self.intercepts[h * p..(h + 1) * p],
            slopes: &self.slopes[h * p..(h + 1) * p],
        }
    }
}

/// A [`Piecewise`] bias as one head reads it: the feature reversed and the bias of the first
/// rows reversed.
#[derive(Debug, Clone, Copy)]
pub(in super::super) struct HeadPiecewise<'a> {
    feature: &'a [f32],
    shared: &'a [f32],
    shared_rows: usize,
    row_scale: &'a [f32],
    breakpoints: &'a [f32],
    intercepts: &'a [f32],
    slopes: &'a [f32],
}

impl HeadPiecewise<'_> {
    /// The bias of query `i` for keys $0..=i$: the first rows' own slice, or written into
    /// `scratch`.
    #[inline]
    pub(super) fn row<'s>(&'s self, i: usize, l: usize, scratch: &'s mut [f32]) -> &'s [f32] {
        if i < self.shared_rows {
            return &self.shared[l - 1 - i..];
        }
        let out = &mut scratch[..=i];
        let (nu, feature) = (self.row_scale[i], &self.feature[l - 1 - i..]);
        piecewise_row(
            out,
            feature,
            nu,
            self.breakpoints,
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
        2 * (self.breakpoints.len() + 1) + if feature { 3 * l } else { l }
    }

    /// Adds the gradient from the score gradient `ds` of query `i` (keys $0..=i$) to `grad`
    /// ([`HeadPiecewise::grad_len`]; the feature's factors when it holds them).
    #[inline]
    pub(super) fn grad(&self, i: usize, l: usize, ds: &[f32], grad: &mut [f32]) {
        let acc = Accumulator::split(grad, self.breakpoints.len() + 1, l);
        let (nu, feature, g) = (self.row_scale[i], &self.feature[l - 1 - i..], &ds[..=i]);
        let dfeature = acc
            .feature
            .map(|(dpsi, dnu)| (&mut dpsi[l - 1 - i..], &mut dnu[i]));
        if i < self.shared_rows {
            for (p, &d) in acc.per_distance[l - 1 - i..].iter_mut().zip(g) {
                *p += d;
            }
            if let Some((dpsi, dnu)) = dfeature {
                *dnu += piecewise_grads(
                    g,
                    feature,
                    nu,
                    self.breakpoints,
                    self.slopes,
                    None,
                    Some(dpsi),
                );
            }
        } else {
            let (dpsi, dnu) = dfeature.unzip();
            let pieces = Some((acc.da, acc.ds));
            let d = piecewise_grads(g, feature, nu, self.breakpoints, self.slopes, pieces, dpsi);
            if let Some(dnu) = dnu {
                *dnu += d;
            }
        }
    }

    /// Folds the first rows' gradient per distance into the pieces' (their $x$ is
    /// $\psi_d\,\nu_0$), leaving $(\partial a, \partial s)$ `[2, P]`, then $\partial\psi$
    /// reversed and $\partial\nu$ `[L]` each when `grad` holds them.
    pub(super) fn finish_grad(&self, grad: &mut Vec<f32>) {
        let (pieces, l) = (self.breakpoints.len() + 1, self.feature.len());
        let acc = Accumulator::split(grad, pieces, l);
        if let Some(&nu) = self.row_scale.first() {
            let to_pieces = Some((acc.da, acc.ds));
            let (f, t, a) = (self.feature, self.breakpoints, self.slopes);
            piecewise_grads(acc.per_distance, f, nu, t, a, to_pieces, None);
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

/// The keys $j$ of each piece of a row, as `(piece, a, b)`: with the row's features
/// $x_j = \psi_{i-j}\nu_i$ non-increasing in $j$, piece $p = \#\{k : t_k < x_j\}$ holds the
/// keys from the first with $x_j \le t_p$ to the first with $x_j \le t_{p-1}$.
#[inline(always)]
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

multiversion! {
    /// The piecewise bias of a row: $b_j = s_p\,(\psi_j \nu) + a_p$ on each piece's keys
    /// ([`piece_ranges`]).
    fn piecewise_row(out: &mut [f32], feature: &[f32], nu: f32, breakpoints: &[f32], intercepts: &[f32], slopes: &[f32]) {
        for (p, a, b) in piece_ranges(feature, nu, breakpoints) {
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
    /// \mathrel{+}= \sum_j \partial b_j\,(\psi_j \nu)$; into `dfeature`, $\partial\psi_j
    /// \mathrel{+}= s_p\,\partial b_j\, \nu$. Returns $\partial\nu = \sum_p s_p \sum_j \partial b_j\,
    /// \psi_j$ (0 without `dfeature`).
    fn piecewise_grads(g: &[f32], feature: &[f32], nu: f32, breakpoints: &[f32], slopes: &[f32], pieces: Option<(&mut [f32], &mut [f32])>, dfeature: Option<&mut [f32]>) -> f32 {
        let (mut pieces, mut dfeature) = (pieces, dfeature);
        let mut dnu = 0.0;
        for (p, a, b) in piece_ranges(feature, nu, breakpoints) {
            let (g, f) = (&g[a..b], &feature[a..b]);
            if let Some((da, ds)) = pieces.as_mut() {
                let x: f32 = g.iter().zip(f).map(|(&g, &psi)| g * (psi * nu)).sum();
                da[p] += sum(g);
                ds[p] += x;
            }
            if let Some(dpsi) = dfeature.as_deref_mut() {
                // dx_j = s_p db_j: dpsi_j += dx_j nu, dnu += dx_j psi_j
                let s_nu = slopes[p] * nu;
                for (d, &gj) in dpsi[a..b].iter_mut().zip(g) {
                    *d = gj.mul_add(s_nu, *d);
                }
                dnu += slopes[p] * dot(g, f);
            }
        }
        dnu
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
}
