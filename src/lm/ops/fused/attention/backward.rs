//! The backward pass of the tiled attention, per tile of query rows: the weights rebuilt
//! from the raw scores ([`super::tile_scores`]) and the saved log-sum-exp,
//! $p_{ij} = e^{s_{ij} - \text{lse}_i}$, then
//!
//! ```math
//! \partial s_{ij} = p_{ij}\big(\partial o_i \cdot (v_j + a^V_{\text{index}(i-j)})
//!   - \partial o_i \cdot o_i\big), \quad
//! \partial q_i = c \sum_j \partial s_{ij} k_j, \quad \partial k_j = c \sum_i \partial s_{ij} q_i,
//! \quad \partial v_j = \sum_i p_{ij} \partial o_i,
//! ```
//!
//! and every position term's gradient accumulated into its own compact object:
//! $\partial b_{ij} = \partial s_{ij}$ summed per distance ($\partial\beta_d$) or per piece
//! ($\partial a_p$, $\partial s_p$ with $x_{ij}$, and the feature's factors $\partial\psi_d$,
//! $\partial\nu_i$ through $x_{ij} = \psi_{i-j}\nu_i$), $c\,\partial s_{ij}$ summed per table cell
//! ($\partial g$, $\partial g'$), $\partial \hat q_i = c \sum_j \partial s_{ij} \rho_{i-j}$ and
//! $\partial\rho_d = c \sum_{i-j=d} \partial s_{ij} \hat q_i$, $\partial p^Q$ and $\partial p^K$
//! like $\partial q$ and $\partial k$, and $\partial a^V_r = \sum_{\text{index}(i-j) = r}
//! p_{ij}\, \partial o_i$. Per-head objects shared by the batch have their gradients summed
//! over it. With CoPE, the weights are rebuilt from $a_{ij} + z_{ij}$ and $\partial s_{ij}$ is
//! turned into the logit's own gradient $\partial a_{ij}$ before any of the above
//! ([`super::contextual::position_grad_row`]), and $\partial e$ is summed over batch and heads.

use rayon::prelude::*;

use super::contextual::{position_grad_row, ContextualScratch};
use super::terms::{transpose, HeadTable, HeadTerms};
use super::{contextual_logits, tile_scores, Bias, BiasGrads, Terms, TILE};
use crate::lm::ops::fused::heads::{row, AttentionDims, HeadLayout, HeadRows, HeadRowsMut, Heads};
use crate::lm::ops::fused::parallel::{product, SharedMut};
use crate::lm::ops::fused::simd::{dot, multiversion};
use crate::lm::ops::fused::softmax::{probs_row, score_grad_row};

multiversion! {
    /// $\sum_i a_i b_i$ of two rows.
    fn dot_rows(a: &[f32], b: &[f32]) -> f32 {
        dot(a, b)
    }
}

/// Gradients of [`super::attention_forward`] with respect to its inputs and terms (each
/// empty where its term is absent).
#[derive(Debug, Clone, Default)]
pub struct AttentionGrads {
    /// $\partial q$, in `[B, L, H, D]` memory ([`HeadLayout::interleaved`]).
    pub q: Vec<f32>,
    /// $\partial k$, likewise.
    pub k: Vec<f32>,
    /// $\partial v$, likewise.
    pub v: Vec<f32>,
    /// The bias's gradient summed over the batch: $\partial\beta$ `[H, L]`, or the intercepts'
    /// $\partial a$ `[H, P]` (piecewise).
    pub bias: Vec<f32>,
    /// The piecewise slopes' $\partial s$, `[H, P]`.
    pub slopes: Vec<f32>,
    /// A piecewise bias's $\partial\psi$ `[L]`, summed over batch and heads.
    pub feature: Vec<f32>,
    /// A piecewise bias's $\partial\nu$ `[L]`, summed over batch and heads.
    pub row_scale: Vec<f32>,
    /// $\partial g$ of the query table, `[B, H, L, R]`.
    pub query_table: Vec<f32>,
    /// $\partial g'$ of the key table, `[B, H, L, R]`.
    pub key_table: Vec<f32>,
    /// $\partial \hat q$ of the relative keys, in `[B, L, H, D]` memory.
    pub distance_queries: Vec<f32>,
    /// $\partial \rho$, `[H, L, D]`.
    pub distance_keys: Vec<f32>,
    /// $\partial p^Q$, `[H, L, D]`.
    pub untied_queries: Vec<f32>,
    /// $\partial p^K$, `[H, L, D]`.
    pub untied_keys: Vec<f32>,
    /// $\partial a^V$ of the relative values, `[R, D]`.
    pub values: Vec<f32>,
    /// $\partial e$ of CoPE's embeddings, `[P, D]`, summed over batch and heads.
    pub contextual: Vec<f32>,
}

/// Per-thread buffers of the backward pass.
struct BackwardScratch {
    p: Vec<f32>,
    dp: Vec<f32>,
    /// `[TILE, L]`: the relative keys' products, then their gradient.
    g: Vec<f32>,
    /// `[L]`: one row's bias (piecewise).
    bias: Vec<f32>,
    /// `[TILE, R]`: the relative values' output gradient per table row, then the weights'
    /// sums per table row.
    sums: Vec<f32>,
    /// CoPE's gates, counts, $T$ and $\partial T$ of the tile.
    cope: ContextualScratch,
}

/// The gradients one head accumulates for objects it does not write in place (empty where
/// absent): its bias's, its tables' `[L, R]`, its relative keys' (rows reversed) and untied
/// terms' `[L, D]`, and the relative values' table `[R, D]`.
#[derive(Default)]
struct HeadGrads {
    bias: Vec<f32>,
    query_table: Vec<f32>,
    key_table: Vec<f32>,
    distance_keys: Vec<f32>,
    untied_queries: Vec<f32>,
    untied_keys: Vec<f32>,
    values: Vec<f32>,
    contextual: Vec<f32>,
}

/// Backward pass of one head, writing its rows of `dq`, `dk`, `dv` and of the relative
/// queries' gradient `dqhat` (interleaved row stride) and returning the rest.
///
/// # Safety
/// Every pointer covers the head's `L` rows of `D` at its stride.
#[allow(clippy::too_many_arguments)]
unsafe fn attention_head_backward(
    (q, k, v): (HeadRows, HeadRows, HeadRows),
    (out, dout, lse): (HeadRows, HeadRows, &[f32]),
    terms: &HeadTerms,
    scale: f32,
    dims: &AttentionDims,
    (dq, dk, dv, dqhat): (HeadRowsMut, HeadRowsMut, HeadRowsMut, HeadRowsMut),
    want: BiasGrads,
    scratch: &mut BackwardScratch,
) -> HeadGrads {
    let want_bias = want.any();
    let (l, d) = (dims.len, dims.dim);
    let zeros = |on: bool, n: usize| if on { vec![0.0f32; n] } else { Vec::new() };
    let table_len = |t: &Option<HeadTable>| t.map_or(0, |t| l * t.rows);
    let mut grads = HeadGrads {
        bias: zeros(want_bias, terms.bias_grad_len(l, want.feature)),
        query_table: zeros(true, table_len(&terms.query_table)),
        key_table: zeros(true, table_len(&terms.key_table)),
        distance_keys: zeros(terms.distance.is_some(), l * d),
        untied_queries: zeros(terms.untied.is_some(), l * d),
        untied_keys: zeros(terms.untied.is_some(), l * d),
        values: zeros(true, terms.values.map_or(0, |rv| rv.rows * d)),
        contextual: zeros(true, terms.contextual.map_or(0, |cx| cx.positions * d)),
    };
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
        // p, dp and g hold m x n.
        // rebuild P from the raw scores and the saved log-sum-exp
        unsafe { tile_scores((q, k), terms, (i0, m, l, d), p, &mut scratch.g) };
        match &terms.contextual {
            None => {
                for r in 0..m {
                    let i = i0 + r;
                    let b = terms.bias_row(i, l, &mut scratch.bias);
                    probs_row(&mut p[r * n..(r + 1) * n], b, scale, i + 1, lse[i]);
                }
            }
            Some(cx) => {
                // the weights from a + z; T, the gates and the counts kept for the gradients
                // SAFETY: q covers the tile's rows; p holds m x n.
                unsafe {
                    contextual_logits(
                        cx,
                        q,
                        terms,
                        (i0, m, l, d),
                        scale,
                        p,
                        &mut scratch.bias,
                        &mut scratch.cope,
                    );
                }
                for r in 0..m {
                    let i = i0 + r;
                    probs_row(&mut p[r * n..(r + 1) * n], None, 1.0, i + 1, lse[i]);
                }
                scratch.cope.grads[..m * cx.positions].fill(0.0);
            }
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
        if let Some(rv) = &terms.values {
            let rows = rv.rows;
            let sums = &mut scratch.sums[..m * rows];
            // dP_ij += dO_i . a^V_{index}: G = dO_tile a^V^T [m, R], gathered per row
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
                rv.add_to_row(i, l, g, &mut dp[r * n..r * n + i + 1]);
            }
            // d a^V += S^T dO_tile with S the weights summed per table row
            rv.band_sums(p, (i0, m, n, l), sums);
            // SAFETY: S^T is R x m (sums read transposed), dout m x D, the gradient R x D.
            unsafe {
                product(
                    (rows, d, m),
                    (grads.values.as_mut_ptr(), d, 1),
                    true,
                    (sums.as_ptr(), 1, rows),
                    (dout.0.add(i0 * dout.1), dout.1, 1),
                    1.0,
                );
            }
        }
        // dS = P (dP - delta), delta_i = dO_i . O_i; then the terms' gradients of each row
        for r in 0..m {
            let i = i0 + r;
            // SAFETY: row i of dout and out is in bounds.
            let delta = dot_rows(unsafe { row(dout, i, d) }, unsafe { row(out, i, d) });
            let ds = &mut dp[r * n..(r + 1) * n];
            score_grad_row(ds, &p[r * n..(r + 1) * n], delta, i + 1);
            if let Some(cx) = &terms.contextual {
                // d(a + z) -> da, and dT of the row
                let (np, cope) = (cx.positions, &mut scratch.cope);
                position_grad_row(
                    &mut ds[..=i],
                    (
                        &cope.gates[r * n..=r * n + i],
                        &cope.counts[r * n..=r * n + i],
                    ),
                    &cope.positions[r * np..(r + 1) * np],
                    &mut cope.grads[r * np..(r + 1) * np],
                );
            }
            if want_bias {
                terms.bias_grad(i, l, ds, &mut grads.bias);
            }
            terms.gathered_grads(
                i,
                l,
                ds,
                scale,
                (&mut grads.query_table, &mut grads.key_table),
            );
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
            if let Some(cx) = &terms.contextual {
                // dQ_tile += dT e; de += dT^T Q_tile
                let dt = &scratch.cope.grads[..m * cx.positions];
                cx.tile_grads((q, dq), (i0, m, d), dt, &mut grads.contextual);
            }
            // dV[0..n] += P^T dO_tile
            product(
                (n, d, m),
                (dv.0, dv.1, 1),
                true,
                (p.as_ptr(), 1, n),
                (dout.0.add(i0 * dout.1), dout.1, 1),
                1.0,
            );
            if let Some((pq, pk)) = terms.untied {
                // dP^Q_tile = c dS P^K[0..n]; dP^K[0..n] += c dS^T P^Q_tile
                product(
                    (m, d, n),
                    (grads.untied_queries.as_mut_ptr().add(i0 * d), d, 1),
                    false,
                    (dp.as_ptr(), n, 1),
                    (pk.as_ptr(), d, 1),
                    scale,
                );
                product(
                    (n, d, m),
                    (grads.untied_keys.as_mut_ptr(), d, 1),
                    true,
                    (dp.as_ptr(), 1, n),
                    (pq.as_ptr().add(i0 * d), d, 1),
                    scale,
                );
            }
            if let Some(dk_terms) = &terms.distance {
                // dG[r, n-1-i+j] = dS_ij for j <= i, 0 before: the adjoint of the row's read
                let g = &mut scratch.g[..m * n];
                for r in 0..m {
                    let i = i0 + r;
                    let from = r * n + n - 1 - i;
                    g[r * n..from].fill(0.0);
                    g[from..from + i + 1].copy_from_slice(&dp[r * n..r * n + i + 1]);
                }
                let keys = dk_terms.keys.as_ptr().add((l - n) * d);
                let qhat = dk_terms.queries;
                // dQ^_tile = c dG rho[n-1..0]
                product(
                    (m, d, n),
                    (dqhat.0.add(i0 * dqhat.1), dqhat.1, 1),
                    false,
                    (g.as_ptr(), n, 1),
                    (keys, d, 1),
                    scale,
                );
                // d rho[n-1..0] += c dG^T Q^_tile (rows reversed like the keys)
                product(
                    (n, d, m),
                    (grads.distance_keys.as_mut_ptr().add((l - n) * d), d, 1),
                    true,
                    (g.as_ptr(), 1, n),
                    (qhat.0.add(i0 * qhat.1), qhat.1, 1),
                    scale,
                );
            }
        }
    }
    if want_bias {
        terms.finish_bias_grad(&mut grads.bias);
    }
    if let Some(t) = terms.key_table.filter(|t| t.transposed()) {
        // [R, L] -> [L, R]
        let transposed = std::mem::take(&mut grads.key_table);
        transpose(&transposed, t.rows, l, &mut grads.key_table);
    }
    grads
}

/// $\sum_b x_{b h \dots}$ of per-(batch, head) blocks of `size` values, `[H, size]`.
fn sum_over_batch(per_head: &[HeadGrads], pick: fn(&HeadGrads) -> &[f32], h: usize) -> Vec<f32> {
    let size = per_head.first().map_or(0, |g| pick(g).len());
    let mut total = vec![0.0f32; h * size];
    total
        .par_chunks_mut(size.max(1))
        .enumerate()
        .for_each(|(head, dst)| {
            for g in per_head.iter().skip(head).step_by(h.max(1)) {
                for (x, &y) in dst.iter_mut().zip(pick(g)) {
                    *x += y;
                }
            }
        });
    total
}

/// $\sum_{b,h} x_{bh}$ of per-(batch, head) blocks of `size` values: the gradient of an object
/// every head shares.
fn sum_over_heads(per_head: &[HeadGrads], pick: fn(&HeadGrads) -> &[f32], size: usize) -> Vec<f32> {
    let mut total = vec![0.0f32; size];
    for g in per_head {
        for (t, &x) in total.iter_mut().zip(pick(g)) {
            *t += x;
        }
    }
    total
}

/// Blocks of `block` values reversed within each of the `[.., len * block]` groups.
fn unreversed(v: Vec<f32>, len: usize, block: usize) -> Vec<f32> {
    if len * block == 0 {
        return v;
    }
    v.chunks(len * block)
        .flat_map(|g| g.chunks(block).rev().flatten().copied().collect::<Vec<_>>())
        .collect()
}

/// Backward pass of [`super::attention_forward`] from the output gradient `dout`, the forward
/// output and its log-sum-exp (`out` and `dout` in any [`HeadLayout`]); the bias's gradients
/// only as `want_bias` asks.
///
/// # Panics
/// When a buffer does not cover its layout, a term does not match `dims`, or the terms have a
/// [`super::Window`] (evaluation only).
pub fn attention_backward(
    (q, k, v): (Heads<'_>, Heads<'_>, Heads<'_>),
    (out, dout, lse): (Heads<'_>, Heads<'_>, &[f32]),
    terms: &Terms<'_>,
    scale: f32,
    dims: AttentionDims,
    want_bias: BiasGrads,
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
    terms.check(&dims);
    assert!(
        terms.window.is_none(),
        "attention: the two-pass window is for evaluation; it has no backward pass"
    );
    let prepared = terms.prepare(&dims);
    let value_rows = terms.values.map_or(0, |rv| rv.rows);
    let (h, l, d) = (dims.heads, dims.len, dims.dim);
    let heads = dims.batch * h;
    assert!(lse.len() >= heads * l, "attention: log-sum-exp too short");
    let grad_layout = HeadLayout::interleaved(&dims);
    let n = heads * l * d;
    let with_distance = terms.distance.is_some();
    // written by the heads (no zero fill first): dQ and dQ^ by each tile's product, dK and
    // dV zeroed row by row and then accumulated
    let mut dq: Vec<f32> = Vec::with_capacity(n);
    let mut dk: Vec<f32> = Vec::with_capacity(n);
    let mut dv: Vec<f32> = Vec::with_capacity(n);
    let mut dqhat: Vec<f32> = Vec::with_capacity(if with_distance { n } else { 0 });
    let uninit = |v: &mut Vec<f32>| SharedMut(v.spare_capacity_mut().as_mut_ptr().cast::<f32>());
    let ptrs = (
        uninit(&mut dq),
        uninit(&mut dk),
        uninit(&mut dv),
        uninit(&mut dqhat),
    );
    let want = match terms.bias {
        Bias::None => BiasGrads::default(),
        Bias::Distance(_) => BiasGrads {
            feature: false,
            ..want_bias
        },
        Bias::Piecewise(_) => want_bias,
    };
    let per_head: Vec<HeadGrads> = (0..heads)
        .into_par_iter()
        .map_init(
            || BackwardScratch {
                p: vec![0.0; TILE * l],
                dp: vec![0.0; TILE * l],
                g: vec![0.0; if with_distance { TILE * l } else { 0 }],
                bias: vec![0.0; l],
                sums: vec![0.0; TILE * value_rows],
                cope: ContextualScratch::new(terms.contextual.as_ref(), TILE, l),
            },
            |scratch, bh| {
                let ptrs = &ptrs;
                let at = grad_layout.start(bh, &dims);
                let stride = grad_layout.row;
                let mut head_terms = terms.head(&prepared, bh, &dims);
                // the key table as the rows read it (its gradient too, until the end of the
                // head)
                let mut key_table = Vec::new();
                head_terms.key_table = head_terms.key_table.map(|t| t.for_rows(l, &mut key_table));
                // without relative keys dQ^ is never written: any pointer will do
                let qhat_at = if with_distance { at } else { 0 };
                // SAFETY: the layouts were checked; head bh writes only its own rows of dq,
                // dk, dv and dq^.
                unsafe {
                    attention_head_backward(
                        (q.head(bh, &dims), k.head(bh, &dims), v.head(bh, &dims)),
                        (
                            out.head(bh, &dims),
                            dout.head(bh, &dims),
                            &lse[bh * l..(bh + 1) * l],
                        ),
                        &head_terms,
                        scale,
                        &dims,
                        (
                            (ptrs.0 .0.add(at), stride),
                            (ptrs.1 .0.add(at), stride),
                            (ptrs.2 .0.add(at), stride),
                            (ptrs.3 .0.add(qhat_at), stride),
                        ),
                        want,
                        scratch,
                    )
                }
            },
        )
        .collect();
    // SAFETY: every head wrote all its rows of dq, dk, dv (and dq^ with relative keys), and
    // the heads cover the buffers.
    unsafe {
        dq.set_len(n);
        dk.set_len(n);
        dv.set_len(n);
        if with_distance {
            dqhat.set_len(n);
        }
    }
    let concat = |pick: fn(&HeadGrads) -> &[f32]| -> Vec<f32> {
        let mut all = Vec::with_capacity(per_head.iter().map(|g| pick(g).len()).sum());
        for g in &per_head {
            all.extend_from_slice(pick(g));
        }
        all
    };
    let (mut bias, mut slopes) = (Vec::new(), Vec::new());
    let (mut feature, mut row_scale) = (Vec::new(), Vec::new());
    match terms.bias {
        Bias::None => {}
        Bias::Distance(_) => {
            if want.bias {
                bias = unreversed(sum_over_batch(&per_head, |g| &g.bias, h), l, 1);
            }
        }
        Bias::Piecewise(f) if want.any() => {
            // [H, 2P (+ 2L)] -> intercepts [H, P], slopes [H, P] (and dpsi, dnu summed)
            let all = sum_over_batch(&per_head, |g| &g.bias, h);
            let p = f.pieces();
            let per_head = all.len() / h.max(1);
            if want.feature {
                (feature, row_scale) = (vec![0.0; l], vec![0.0; l]);
            }
            for head in all.chunks(per_head.max(1)) {
                if want.bias {
                    bias.extend_from_slice(&head[..p]);
                    slopes.extend_from_slice(&head[p..2 * p]);
                }
                if want.feature {
                    let (dpsi, dnu) = head[2 * p..].split_at(l);
                    for (x, &y) in feature.iter_mut().zip(dpsi) {
                        *x += y;
                    }
                    for (x, &y) in row_scale.iter_mut().zip(dnu) {
                        *x += y;
                    }
                }
            }
            feature.reverse();
        }
        Bias::Piecewise(_) => {}
    }
    let values = terms.values.map_or(Vec::new(), |rv| {
        sum_over_heads(&per_head, |g| &g.values, rv.rows * d)
    });
    let contextual = terms.contextual.map_or(Vec::new(), |cx| {
        sum_over_heads(&per_head, |g| &g.contextual, cx.positions * d)
    });
    AttentionGrads {
        q: dq,
        k: dk,
        v: dv,
        bias,
        slopes,
        feature,
        row_scale,
        query_table: concat(|g| &g.query_table),
        key_table: concat(|g| &g.key_table),
        distance_queries: dqhat,
        distance_keys: unreversed(sum_over_batch(&per_head, |g| &g.distance_keys, h), l, d),
        untied_queries: sum_over_batch(&per_head, |g| &g.untied_queries, h),
        untied_keys: sum_over_batch(&per_head, |g| &g.untied_keys, h),
        values,
        contextual,
    }
}

#[cfg(test)]
mod tests {
    use super::super::forward::attention_forward;
    use super::super::naive::cases;
    use super::*;
    use crate::lm::ops::fused::testing::{assert_close, from_interleaved, heads, store, values};

    /// [`attention_backward`] against the naive loop's gradients of $q, k, v$ and of every
    /// position term (objects shared by the batch: summed over it), from a seeded
    /// $\partial o$, for every case of [`super::super::naive::cases`], inputs and $\partial o$
    /// contiguous and in `[B, L, H, D]` memory; the bias's gradients (a piecewise bias's
    /// pieces and its feature's factors, the rows below and above its threshold) each only
    /// when asked for. Relative error at most 1e-5 (absolute where the gradient's scale is below
    /// one).
    #[test]
    fn backward_matches_naive_gradients() {
        for case in cases() {
            let dims = case.dims;
            let dout = values(case.q.len(), 7, 1.0);
            let want = case.backward(&dout);
            for interleaved in [false, true] {
                let what = format!("{} interleaved {interleaved}", case.name());
                let (q, k, v) = (
                    store(&case.q, &dims, interleaved),
                    store(&case.k, &dims, interleaved),
                    store(&case.v, &dims, interleaved),
                );
                let qhat = case.qhat.as_ref().map(|x| store(x, &dims, interleaved));
                let terms = case.terms(qhat.as_ref().map(heads));
                let qkv = (heads(&q), heads(&k), heads(&v));
                let (out, lse) = attention_forward(qkv, &terms, case.scale, dims);
                let out = (out, HeadLayout::interleaved(&dims));
                let dout = store(&dout, &dims, interleaved);
                for (bias, feature) in [(true, true), (true, false), (false, true), (false, false)]
                {
                    let want_bias = BiasGrads { bias, feature };
                    let g = attention_backward(
                        qkv,
                        (heads(&out), heads(&dout), &lse),
                        &terms,
                        case.scale,
                        dims,
                        want_bias,
                    );
                    let grad = |x: &[f32]| from_interleaved(x, &dims);
                    let got = [
                        ("dq", grad(&g.q)),
                        ("dk", grad(&g.k)),
                        ("dv", grad(&g.v)),
                        (
                            "dq^",
                            if g.distance_queries.is_empty() {
                                Vec::new()
                            } else {
                                grad(&g.distance_queries)
                            },
                        ),
                        ("drho", g.distance_keys.clone()),
                        ("dp^Q", g.untied_queries.clone()),
                        ("dp^K", g.untied_keys.clone()),
                        ("dg", g.query_table.clone()),
                        ("dg'", g.key_table.clone()),
                        ("da^V", g.values.clone()),
                        ("de", g.contextual.clone()),
                    ];
                    for ((name, got), want) in got.iter().zip(&want.inputs) {
                        assert_close(&format!("{name} {what}"), got, want, 1e-5);
                    }
                    if bias {
                        assert_close(&format!("dbias {what}"), &g.bias, &want.bias, 1e-5);
                        assert_close(&format!("dslopes {what}"), &g.slopes, &want.slopes, 1e-5);
                    } else {
                        assert!(g.bias.is_empty() && g.slopes.is_empty(), "dbias {what}");
                    }
                    if feature {
                        let (f, nu) = (&want.feature, &want.row_scale);
                        assert_close(&format!("dpsi {what}"), &g.feature, f, 1e-5);
                        assert_close(&format!("dnu {what}"), &g.row_scale, nu, 1e-5);
                    } else {
                        assert!(
                            g.feature.is_empty() && g.row_scale.is_empty(),
                            "dpsi {what}"
                        );
                    }
                }
            }
        }
    }
}
