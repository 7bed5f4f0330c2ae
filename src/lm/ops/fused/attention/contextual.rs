//! CoPE's contextual positions inside the tiled attention (Golovneva et al. 2024,
//! [arXiv:2405.18719](https://arxiv.org/abs/2405.18719); the composed form is
//! [`crate::lm::ops::reference::contextual_term`], the specification). With $a_{ij}$ the
//! scaled, biased logit of the pair, for the keys $j \le i$ of a row:
//!
//! ```math
//! g_{ij} = \sigma(a_{ij}), \quad r_{ij} = \sum_{t=j}^{i} g_{it}, \quad
//! p_{ij} = \min(r_{ij}, P - 1), \quad w_{ij} = p_{ij} - \lfloor p_{ij} \rfloor,
//! ```
//! ```math
//! T_{in} = q_i \cdot e_n, \quad
//! z_{ij} = (1 - w_{ij})\, T_{i,\lfloor p_{ij} \rfloor} + w_{ij}\, T_{i,\lceil p_{ij} \rceil},
//! \qquad \alpha_{ij} = \operatorname{softmax}_{j \le i}(a_{ij} + z_{ij}).
//! ```
//!
//! A tile holds complete rows (every key its rows see), so a row's count is a suffix sum over
//! that row, and $T$ is one `[m, P]` product per tile: nothing of size $L \times L$. The
//! backward pass turns $\partial s_{ij} = \partial(a_{ij} + z_{ij})$ into the logit's own
//! gradient,
//!
//! ```math
//! \partial T_{i,\lfloor p \rfloor} \mathrel{+}= (1 - w_{ij})\,\partial s_{ij}, \quad
//! \partial T_{i,\lceil p \rceil} \mathrel{+}= w_{ij}\,\partial s_{ij}, \quad
//! \partial p_{ij} = \partial s_{ij}\,(T_{i,\lceil p \rceil} - T_{i,\lfloor p \rfloor})\,
//!   [r_{ij} \le P - 1],
//! ```
//! ```math
//! \partial a_{it} = \partial s_{it} + g_{it}(1 - g_{it}) \sum_{j \le t} \partial p_{ij},
//! \qquad \partial q_i \mathrel{+}= \sum_n \partial T_{in}\, e_n, \quad
//! \partial e_n \mathrel{+}= \sum_i \partial T_{in}\, q_i,
//! ```
//!
//! the integer parts constants (as in x-transformers) and the clamp passing the gradient at
//! equality (burn's `clamp_max`). $\partial a$ then replaces $\partial s$ for every other
//! gradient of the pair.

use super::super::heads::{HeadRows, HeadRowsMut};
use super::super::parallel::product;
use super::super::simd::{exp, multiversion};

/// CoPE's position embeddings $e$, `[P, D]` row-major, shared by every head.
#[derive(Debug, Clone, Copy)]
pub struct Contextual<'a> {
    /// $e$, `[P, D]`.
    pub embeddings: &'a [f32],
    /// $P \ge 1$.
    pub positions: usize,
}

/// Per-thread buffers of the contextual term (empty without it).
#[derive(Debug, Default)]
pub(super) struct ContextualScratch {
    /// $g$ of the tile's rows, `[TILE, L]` at the tile's row stride.
    pub(super) gates: Vec<f32>,
    /// $r$ of the tile's rows, `[TILE, L]` ($+\infty$ where it is past $P - 1$).
    pub(super) counts: Vec<f32>,
    /// $T$ of the tile's rows, `[TILE, P]`.
    pub(super) positions: Vec<f32>,
    /// $\partial T$, `[TILE, P]` (the backward pass).
    pub(super) grads: Vec<f32>,
}

impl ContextualScratch {
    /// Buffers for tiles of `tile` rows of length `l` where `cx` is present.
    pub(super) fn new(cx: Option<&Contextual>, tile: usize, l: usize) -> Self {
        match cx {
            None => Self::default(),
            Some(cx) => Self {
                gates: vec![0.0; tile * l],
                counts: vec![0.0; tile * l],
                positions: vec![0.0; tile * cx.positions],
                grads: vec![0.0; tile * cx.positions],
            },
        }
    }
}

impl Contextual<'_> {
    /// Checks $e$ against the head dimension `d`.
    ///
    /// # Panics
    /// When $P = 0$ or $e$ is not `[P, D]`.
    pub(super) fn check(&self, d: usize) {
        assert!(
            self.positions >= 1 && self.embeddings.len() == self.positions * d,
            "attention: CoPE's embeddings are not [P >= 1, {d}]"
        );
    }

    /// $T = Q_{\text{tile}}\, e^\top$, `[m, P]` into `t`, for the tile's query rows
    /// `i0..i0 + m`.
    ///
    /// # Safety
    /// `q` covers rows `i0..i0 + m` of `d` values at its stride; `t` holds `m x P`.
    #[inline]
    pub(super) unsafe fn tile_positions(
        &self,
        q: HeadRows,
        (i0, m, d): (usize, usize, usize),
        t: &mut [f32],
    ) {
        let p = self.positions;
        // SAFETY: the caller's contract; e is P x D.
        unsafe {
            product(
                (m, p, d),
                (t.as_mut_ptr(), p, 1),
                false,
                (q.0.add(i0 * q.1), q.1, 1),
                (self.embeddings.as_ptr(), 1, d),
                1.0,
            );
        }
    }

    /// $\partial Q_{\text{tile}} \mathrel{+}= \partial T\, e$ and
    /// $\partial e \mathrel{+}= \partial T^\top Q_{\text{tile}}$ (`de [P, D]`).
    ///
    /// # Safety
    /// `q` and `dq` cover rows `i0..i0 + m` of `d` values at their strides; `dt` holds
    /// `m x P`, `de` `P x D`.
    #[inline]
    pub(super) unsafe fn tile_grads(
        &self,
        (q, dq): (HeadRows, HeadRowsMut),
        (i0, m, d): (usize, usize, usize),
        dt: &[f32],
        de: &mut [f32],
    ) {
        let p = self.positions;
        // SAFETY: the caller's contract; e and de are P x D.
        unsafe {
            product(
                (m, d, p),
                (dq.0.add(i0 * dq.1), dq.1, 1),
                true,
                (dt.as_ptr(), p, 1),
                (self.embeddings.as_ptr(), d, 1),
                1.0,
            );
            product(
                (p, d, m),
                (de.as_mut_ptr(), d, 1),
                true,
                (dt.as_ptr(), 1, p),
                (q.0.add(i0 * q.1), q.1, 1),
                1.0,
            );
        }
    }
}

multiversion! {
    /// $g_j = \sigma(a_j) = 1 / (1 + e^{-a_j})$.
    fn gates_row(a: &[f32], g: &mut [f32]) {
        for (g, &a) in g.iter_mut().zip(a) {
            *g = 1.0 / (1.0 + exp(-a));
        }
    }
}

/// $\lfloor p \rfloor$, $\lceil p \rceil$ and $w = p - \lfloor p \rfloor$ of
/// $p = \min(r, P - 1)$ (`top` $= P - 1$).
#[inline(always)]
fn interpolation(r: f32, top: f32) -> (usize, usize, f32) {
    let p = r.min(top);
    let low = p.floor();
    (low as usize, p.ceil() as usize, p - low)
}

/// $z_j = w\,T_{\lceil p \rceil} + (1 - w)\,T_{\lfloor p \rfloor}$ of a count $r$.
#[inline(always)]
fn position_logit(r: f32, t: &[f32], top: f32) -> f32 {
    let (low, high, w) = interpolation(r, top);
    t[high] * w + t[low] * (1.0 - w)
}

multiversion! {
    /// The keys past a row's saturation: `row[j] += z` and `counts[j] = +∞` for every `j`.
    fn add_saturated(row: &mut [f32], counts: &mut [f32], z: f32) {
        for (a, r) in row.iter_mut().zip(counts.iter_mut()) {
            *a += z;
            *r = f32::INFINITY;
        }
    }
}

/// One row's logits $a_j$ (keys $0..$`row.len()`) become $a_j + z_j$ in place, from the row's
/// $T$ `[P]`; its gates and counts are written into `gates` and `counts`.
///
/// The count grows from the row's end (the gates are not negative), so once it passes
/// $P - 1$ every key before it has $p = P - 1$ and $z = T_{P-1}$: those keys get that $z$,
/// computed by the same expression, and the count $+\infty$, which
/// [`position_grad_row`] reads as any count past $P - 1$. The logits are those of the plain
/// scan to the bit; the scan (one dependent addition per key) stops after a few dozen keys
/// instead of running over the whole row.
#[inline]
pub(super) fn add_positions_row(row: &mut [f32], t: &[f32], gates: &mut [f32], counts: &mut [f32]) {
    let n = row.len();
    let top = (t.len() - 1) as f32;
    gates_row(row, &mut gates[..n]);
    // r_j = sum_{t = j..i} g_t, from the row's end, until it passes P - 1
    let mut r = 0.0f32;
    let mut j = n;
    while j > 0 {
        j -= 1;
        r += gates[j];
        counts[j] = r;
        row[j] += position_logit(r, t, top);
        if r > top {
            add_saturated(&mut row[..j], &mut counts[..j], position_logit(r, t, top));
            break;
        }
    }
}

/// One row's $\partial s_j = \partial(a_j + z_j)$ (keys $0..$`ds.len()`) becomes
/// $\partial a_j$ in place, from the row's gates, counts and $T$ `[P]` of
/// [`add_positions_row`]; $\partial T$ is added to `dt [P]` (the module's formulas).
#[inline]
pub(super) fn position_grad_row(
    ds: &mut [f32],
    (gates, counts): (&[f32], &[f32]),
    t: &[f32],
    dt: &mut [f32],
) {
    let top = (t.len() - 1) as f32;
    // sum_{j <= t} dp_j, running
    let mut dg = 0.0f32;
    for ((ds, &g), &r) in ds.iter_mut().zip(gates).zip(counts) {
        let (low, high, w) = interpolation(r, top);
        let d = *ds;
        dt[low] += d * (1.0 - w);
        dt[high] += d * w;
        if r <= top {
            dg += d * (t[high] - t[low]);
        }
        *ds = d + dg * g * (1.0 - g);
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::testing::values;
    use super::*;

    /// The module's formulas key by key over the whole row: the scan without its stop.
    fn full_scan(row: &mut [f32], t: &[f32], gates: &[f32], counts: &mut [f32]) {
        let top = (t.len() - 1) as f32;
        let mut r = 0.0f32;
        for j in (0..row.len()).rev() {
            r += gates[j];
            counts[j] = r;
            let (low, high, w) = interpolation(r, top);
            row[j] += t[high] * w + t[low] * (1.0 - w);
        }
    }

    /// The stopped scan gives the full scan's logits to the bit, the same counts up to
    /// $P - 1$, a count past $P - 1$ wherever the full one is, and so the same gradients
    /// to the bit: rows that saturate early (large logits), late or never (very negative
    /// ones), at every P from 1.
    #[test]
    fn stopping_at_saturation_changes_no_bit() {
        for (n, scale, shift, p) in [
            (1, 1.0, 0.0, 1),
            (40, 2.0, 0.0, 16),
            (300, 3.0, 4.0, 16),
            (300, 1.0, -6.0, 16),
            (257, 2.0, 0.0, 2),
            (64, 1.0, 0.0, 64),
        ] {
            let logits: Vec<f32> = values(n, n as u64 + p as u64, scale)
                .iter()
                .map(|x| x + shift)
                .collect();
            let t = values(p, 7, 1.0);
            let (mut gates, mut counts) = (vec![0.0; n], vec![0.0; n]);
            let mut row = logits.clone();
            add_positions_row(&mut row, &t, &mut gates, &mut counts);
            let (mut want, mut want_counts) = (logits.clone(), vec![0.0; n]);
            full_scan(&mut want, &t, &gates, &mut want_counts);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&row), bits(&want), "logits, n = {n}, P = {p}");
            let top = (p - 1) as f32;
            for (j, (&c, &w)) in counts.iter().zip(&want_counts).enumerate() {
                assert!(c == w || (c > top && w > top), "count {j}: {c} vs {w}");
            }
            let ds = values(n, 99, 1.0);
            let (mut got_ds, mut got_dt) = (ds.clone(), vec![0.0; p]);
            position_grad_row(&mut got_ds, (&gates, &counts), &t, &mut got_dt);
            let (mut want_ds, mut want_dt) = (ds, vec![0.0; p]);
            position_grad_row(&mut want_ds, (&gates, &want_counts), &t, &mut want_dt);
            assert_eq!(
                bits(&got_ds),
                bits(&want_ds),
                "logit gradients, n = {n}, P = {p}"
            );
            assert_eq!(
                bits(&got_dt),
                bits(&want_dt),
                "T gradients, n = {n}, P = {p}"
            );
        }
    }
}
