//! Causal multi-head attention on slices, tiled, with the position terms of [`terms`]
//! expanded inside each tile:
//!
//! ```math
//! o_i = \sum_{j \le i} \alpha_{ij} \big(v_j + a^V_{\text{index}(i-j)}\big), \qquad
//! \alpha_{ij} = \operatorname{softmax}_{j \le i}\big(c\,(q_i \cdot k_j + t_{ij}) + b_{ij}\big).
//! ```
//!
//! Queries are taken [`TILE`] rows at a time; a tile's scores stop at its last row's key (the
//! causal mask), and no `[L, L]` matrix is kept: the forward pass ([`forward`]) saves only the
//! log-sum-exp of every row, from which the backward pass ([`backward`]) rebuilds the weights
//! tile by tile. Every position term is a compact object (a vector over distance, a table per
//! row, relative keys per distance, a piecewise-linear function), so memory grows linearly in
//! $L$. CoPE's contextual positions ([`contextual`]) are counted along each row of a tile, which
//! holds every key its rows see. Parallel over (batch, head).

mod backward;
pub mod contextual;
mod forward;
pub mod terms;

pub use backward::attention_backward;
pub use contextual::Contextual;
pub use forward::attention_forward;
pub use terms::{
    Bias, BiasGrads, DistanceKeys, Gathered, Piecewise, RelativeValues, Terms, Untied, Window,
};

use super::heads::HeadRows;
use super::parallel::product;
use super::softmax::logits_row;
use contextual::{add_positions_row, ContextualScratch};
use terms::HeadTerms;

/// Query rows per attention tile. Key columns past a tile's last row are masked for every row
/// of the tile, so the products of a tile stop there: about $(T/L + 1)/2$ of the full
/// $L \times L$ work (62.5% at $L = 128$).
pub const TILE: usize = 32;

/// $S = Q_{i_0..i_0+m} K_{0..n}^\top$ of one tile (`n = i0 + m`: the keys its rows can see),
/// written into `s` `[m, n]` at row stride `n`.
///
/// # Safety
/// `q` covers rows `i0..i0 + m` and `k` rows `0..n`, `D` values each, at their strides.
#[inline]
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

/// The raw scores of one tile before the scale, keys `0..n` (`n = i0 + m`), into `s [m, n]`:
///
/// ```math
/// S_{rj} = q_i \cdot k_j + p^Q_i \cdot p^K_j + \hat q_i \cdot \rho_{i-j}
///   + g_{i,\,\text{index}(i-j)} + g'_{j,\,\text{index}'(i-j)}, \quad i = i_0 + r,
/// ```
///
/// the relative keys through $G = \hat Q_{\text{tile}} \rho_{n-1..0}^\top$ `[m, n]` in `g`
/// (row $i$ reads $G_{r,\,n-1-i+j}$, contiguous in $j$). With a [`Window`], the content
/// product of the pairs $i - j \ge w$ is the second pass's,
/// $q_i \cdot k_j \to q^{(2)}_i \cdot k^{(2)}_j$ (both products of the tile computed, the
/// second in `g` before the relative keys use it, and selected per element). Entries past a
/// row's own key are left as the products wrote them (the softmax masks them).
///
/// # Safety
/// `q` covers rows `i0..i0 + m` and `k` rows `0..n`, `D` values each, at their strides, and
/// so do the relative queries and the second pass of `terms`; `g` holds `m x n` when `terms`
/// has relative keys or a window.
#[inline]
unsafe fn tile_scores(
    (q, k): (HeadRows, HeadRows),
    terms: &HeadTerms,
    (i0, m, l, d): (usize, usize, usize, usize),
    s: &mut [f32],
    g: &mut [f32],
) {
    let n = i0 + m;
    // SAFETY (all products): the caller's contract; s and g hold m x n, the untied and
    // relative keys L x D.
    unsafe {
        tile_products((q, k), (i0, m, d), s);
        if let Some((q2, k2, w)) = terms.window {
            // S2 = Q2_tile K2[0..n]^T, [m, n]; s_ij = S2_ij where j <= i - w
            let g = &mut g[..m * n];
            tile_products((q2, k2), (i0, m, d), g);
            for r in 0..m {
                let i = i0 + r;
                if i >= w {
                    let far = r * n..r * n + i - w + 1;
                    s[far.clone()].copy_from_slice(&g[far]);
                }
            }
        }
        if let Some((pq, pk)) = terms.untied {
            // S += P^Q_tile P^K[0..n]^T
            product(
                (m, n, d),
                (s.as_mut_ptr(), n, 1),
                true,
                (pq.as_ptr().add(i0 * d), d, 1),
                (pk.as_ptr(), 1, d),
                1.0,
            );
        }
        if let Some(dk) = &terms.distance {
            // G = Q^_tile rho[n-1..0]^T: the reversed keys' rows L-n..L, [m, n]
            let g = &mut g[..m * n];
            product(
                (m, n, d),
                (g.as_mut_ptr(), n, 1),
                false,
                (dk.queries.0.add(i0 * dk.queries.1), dk.queries.1, 1),
                (dk.keys.as_ptr().add((l - n) * d), 1, d),
                1.0,
            );
            for r in 0..m {
                let i = i0 + r;
                // q^_i . rho_{i-j} = G[r, n-1-i+j], j <= i
                let from = r * n + n - 1 - i;
                for (s, &t) in s[r * n..r * n + i + 1]
                    .iter_mut()
                    .zip(&g[from..from + i + 1])
                {
                    *s += t;
                }
            }
        }
    }
    if terms.query_table.is_some() || terms.key_table.is_some() {
        for r in 0..m {
            terms.add_gathered(i0 + r, l, &mut s[r * n..(r + 1) * n]);
        }
    }
}

/// The logits of a tile's rows with CoPE's positions added, in place of the raw scores
/// `s [m, n]` ([`tile_scores`]): $a_{ij} = c\,s_{ij} + b_{ij}$, then $a_{ij} + z_{ij}$ with
/// $T = Q_{\text{tile}} e^\top$ in `cope` (and the rows' gates and counts, which the backward
/// pass reads); keys $0..=i$ of each row $i$, the rest left as it was.
///
/// # Safety
/// `q` covers rows `i0..i0 + m` of `D` values at its stride; `s` holds `m x n`, `bias` `L`.
#[allow(clippy::too_many_arguments)]
#[inline]
unsafe fn contextual_logits(
    cx: &Contextual,
    q: HeadRows,
    terms: &HeadTerms,
    (i0, m, l, d): (usize, usize, usize, usize),
    scale: f32,
    s: &mut [f32],
    bias: &mut [f32],
    cope: &mut ContextualScratch,
) {
    let (n, p) = (i0 + m, cx.positions);
    // T = Q_tile e^T, [m, P]
    // SAFETY: the caller's contract; positions holds TILE x P.
    unsafe { cx.tile_positions(q, (i0, m, d), &mut cope.positions) };
    for r in 0..m {
        let i = i0 + r;
        let row = &mut s[r * n..(r + 1) * n];
        // a_j = c s_j + b_j, then a_j + z_j
        logits_row(row, terms.bias_row(i, l, bias), scale, i + 1);
        add_positions_row(
            &mut row[..=i],
            &cope.positions[r * p..(r + 1) * p],
            &mut cope.gates[r * n..(r + 1) * n],
            &mut cope.counts[r * n..(r + 1) * n],
        );
    }
}

#[cfg(test)]
mod naive;
#[cfg(test)]
mod windowed;
