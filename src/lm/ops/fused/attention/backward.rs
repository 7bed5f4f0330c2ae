//! The backward pass of the tiled attention, per tile of query rows: the weights rebuilt
//! from $Q K^\top$ and the saved log-sum-exp, $p_{ij} = e^{c\, q_i \cdot k_j + b_{ij} -
//! \text{lse}_i}$, then
//!
//! ```math
//! \partial s_{ij} = p_{ij}\big(\partial o_i \cdot (v_j + a^V_{\text{index}_{ij}})
//!   - \partial o_i \cdot o_i\big), \quad
//! \partial q_i = c \sum_j \partial s_{ij} k_j, \quad \partial k_j = c \sum_i \partial s_{ij} q_i,
//! \quad \partial v_j = \sum_i p_{ij} \partial o_i,
//! ```
//!
//! $\partial b_{ij} = \partial s_{ij}$ and $\partial a^V_r = \sum_{(i, j):\ \text{index}_{ij} = r}
//! p_{ij}\, \partial o_i$.

use rayon::prelude::*;

use super::{tile_bias, tile_products, Bias, RelativeValues, TILE};
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

/// Gradients of [`attention_forward`] with respect to its inputs.
#[derive(Debug, Clone)]
pub struct AttentionGrads {
    /// $\partial q$, in `[B, L, H, D]` memory ([`HeadLayout::interleaved`]).
    pub q: Vec<f32>,
    /// $\partial k$, likewise.
    pub k: Vec<f32>,
    /// $\partial v$, likewise.
    pub v: Vec<f32>,
    /// $\partial b$ in the bias's own shape (`[H, L, L]` summed over the batch, or
    /// `[B, H, L, L]`); empty without a bias.
    pub bias: Vec<f32>,
    /// $\partial a^V$ of the relative values, `[R, D]`; empty without them.
    pub values: Vec<f32>,
}

/// Per-thread buffers of the backward pass.
struct BackwardScratch {
    p: Vec<f32>,
    dp: Vec<f32>,
    /// `[TILE, R]`: the relative values' output gradient per table row, then the weights'
    /// sums per table row.
    sums: Vec<f32>,
}

/// Backward pass of one head, writing its rows of `dq`, `dk`, `dv` (interleaved row stride).
/// `dbias` is the head's `[L, L]` bias gradient, if wanted.
///
/// # Safety
/// Every pointer covers the head's `L` rows of `D` at its stride.
#[allow(clippy::too_many_arguments)]
unsafe fn attention_head_backward(
    (q, k, v): (HeadRows, HeadRows, HeadRows),
    (out, dout, lse): (HeadRows, HeadRows, &[f32]),
    (bias, values): (Option<&[f32]>, Option<RelativeValues<'_>>),
    scale: f32,
    dims: &AttentionDims,
    (dq, dk, dv): (HeadRowsMut, HeadRowsMut, HeadRowsMut),
    (mut dbias, mut dvalues): (Option<&mut [f32]>, Option<&mut [f32]>),
    scratch: &mut BackwardScratch,
) {
    let (l, d) = (dims.len, dims.dim);
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
        // p and dp hold m x n.
        // rebuild P from Q_tile K^T and the saved log-sum-exp
        unsafe { tile_products((q, k), (i0, m, d), p) };
        for r in 0..m {
            let i = i0 + r;
            let b = tile_bias(bias, i, l, n);
            probs_row(&mut p[r * n..(r + 1) * n], b, scale, i + 1, lse[i]);
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
        if let (Some(rv), Some(dtable)) = (values, dvalues.as_deref_mut()) {
            let rows = rv.rows;
            let sums = &mut scratch.sums[..m * rows];
            // dP_ij += dO_i . a^V_{index_ij}: G = dO_tile a^V^T [m, R], gathered per row
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
                for (dp, &c) in dp[r * n..r * n + i + 1]
                    .iter_mut()
                    .zip(&rv.index[i * l..i * l + i + 1])
                {
                    *dp += g[c];
                }
            }
            // d a^V += S^T dO_tile with S the weights summed per table row
            rv.band_sums(p, (i0, m, n, l), sums);
            // SAFETY: S^T is R x m (sums read transposed), dout m x D, dtable R x D.
            unsafe {
                product(
                    (rows, d, m),
                    (dtable.as_mut_ptr(), d, 1),
                    true,
                    (sums.as_ptr(), 1, rows),
                    (dout.0.add(i0 * dout.1), dout.1, 1),
                    1.0,
                );
            }
        }
        // dS = P (dP - delta), delta_i = dO_i . O_i
        for r in 0..m {
            let i = i0 + r;
            // SAFETY: row i of dout and out is in bounds.
            let delta = dot_rows(unsafe { row(dout, i, d) }, unsafe { row(out, i, d) });
            score_grad_row(
                &mut dp[r * n..(r + 1) * n],
                &p[r * n..(r + 1) * n],
                delta,
                i + 1,
            );
            if let Some(db) = dbias.as_deref_mut() {
                db[i * l..i * l + n].copy_from_slice(&dp[r * n..(r + 1) * n]);
                db[i * l + n..(i + 1) * l].fill(0.0);
            }
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
            // dV[0..n] += P^T dO_tile
            product(
                (n, d, m),
                (dv.0, dv.1, 1),
                true,
                (p.as_ptr(), 1, n),
                (dout.0.add(i0 * dout.1), dout.1, 1),
                1.0,
            );
        }
    }
}

/// Backward pass of [`attention_forward`] from the output gradient `dout`, the forward output
/// and its log-sum-exp (`out` and `dout` in any [`HeadLayout`]):
///
/// ```math
/// \partial s_{ij} = p_{ij}\big(\partial o_i \cdot v_j - \partial o_i \cdot o_i\big), \quad
/// \partial q_i = c \sum_j \partial s_{ij} k_j, \quad \partial k_j = c \sum_i \partial s_{ij} q_i,
/// \quad \partial v_j = \sum_i p_{ij} \partial o_i, \quad \partial b_{ij} = \partial s_{ij}.
/// ```
///
/// # Panics
/// When a buffer does not cover its layout or a bias does not match `dims`.
#[allow(clippy::too_many_arguments)]
pub fn attention_backward(
    (q, k, v): (Heads<'_>, Heads<'_>, Heads<'_>),
    (out, dout, lse): (Heads<'_>, Heads<'_>, &[f32]),
    (bias, values): (Bias<'_>, Option<RelativeValues<'_>>),
    scale: f32,
    dims: AttentionDims,
    want_bias_grad: bool,
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
    bias.check(&dims);
    if let Some(rv) = &values {
        rv.check(&dims);
    }
    let value_rows = values.map_or(0, |rv| rv.rows);
    let l = dims.len;
    let ll = l * l;
    let heads = dims.batch * dims.heads;
    assert!(lse.len() >= heads * l, "attention: log-sum-exp too short");
    let grad_layout = HeadLayout::interleaved(&dims);
    let n = heads * l * dims.dim;
    // written by the heads (no zero fill first): dQ by each tile's product, dK and dV zeroed
    // row by row and then accumulated
    let (mut dq, mut dk, mut dv): (Vec<f32>, Vec<f32>, Vec<f32>) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let uninit = |v: &mut Vec<f32>| SharedMut(v.spare_capacity_mut().as_mut_ptr().cast::<f32>());
    let ptrs = (uninit(&mut dq), uninit(&mut dk), uninit(&mut dv));
    let with_bias = want_bias_grad && !matches!(bias, Bias::None);
    // dS of every head (summed over the batch afterwards for a per-head bias)
    let mut ds = if with_bias {
        vec![0.0f32; heads * ll]
    } else {
        Vec::new()
    };
    let mut ds_chunks: Vec<Option<&mut [f32]>> = if with_bias {
        ds.chunks_mut(ll.max(1)).map(Some).collect()
    } else {
        (0..heads).map(|_| None).collect()
    };
    // d a^V of every head, summed afterwards
    let table_size = value_rows * dims.dim;
    let mut dvalues = vec![
        0.0f32;
        if values.is_some() {
            heads * table_size
        } else {
            0
        }
    ];
    let mut dv_chunks: Vec<Option<&mut [f32]>> = if values.is_some() {
        dvalues.chunks_mut(table_size.max(1)).map(Some).collect()
    } else {
        (0..heads).map(|_| None).collect()
    };
    ds_chunks
        .par_iter_mut()
        .zip(dv_chunks.par_iter_mut())
        .enumerate()
        .for_each_init(
            || BackwardScratch {
                p: vec![0.0f32; TILE * l],
                dp: vec![0.0f32; TILE * l],
                sums: vec![0.0f32; TILE * value_rows],
            },
            |scratch, (bh, (dbias, dtable))| {
                let ptrs = &ptrs;
                let at = grad_layout.start(bh, &dims);
                let stride = grad_layout.row;
                // SAFETY: the layouts were checked; head bh writes only its own rows of dq, dk, dv.
                unsafe {
                    attention_head_backward(
                        (q.head(bh, &dims), k.head(bh, &dims), v.head(bh, &dims)),
                        (
                            out.head(bh, &dims),
                            dout.head(bh, &dims),
                            &lse[bh * l..(bh + 1) * l],
                        ),
                        (bias.of_head(bh, &dims), values),
                        scale,
                        &dims,
                        (
                            (ptrs.0 .0.add(at), stride),
                            (ptrs.1 .0.add(at), stride),
                            (ptrs.2 .0.add(at), stride),
                        ),
                        (dbias.as_deref_mut(), dtable.as_deref_mut()),
                        scratch,
                    );
                }
            },
        );
    drop(ds_chunks);
    drop(dv_chunks);
    let values_grad = if values.is_some() {
        let mut total = vec![0.0f32; table_size];
        for head in dvalues.chunks(table_size.max(1)) {
            for (t, &g) in total.iter_mut().zip(head) {
                *t += g;
            }
        }
        total
    } else {
        Vec::new()
    };
    // SAFETY: every head wrote all its rows of dq, dk and dv, and the heads cover the buffers.
    unsafe {
        dq.set_len(n);
        dk.set_len(n);
        dv.set_len(n);
    }
    let bias_grad = match bias {
        Bias::Heads(_) if with_bias => {
            // sum over the batch, parallel over (head, row)
            let mut summed = vec![0.0f32; dims.heads * ll];
            summed
                .par_chunks_mut(l.max(1))
                .enumerate()
                .for_each(|(row, dst)| {
                    let (h, i) = (row / l, row % l);
                    for b in 0..dims.batch {
                        let at = (b * dims.heads + h) * ll + i * l;
                        for (x, &y) in dst.iter_mut().zip(&ds[at..at + l]) {
                            *x += y;
                        }
                    }
                });
            summed
        }
        _ => ds,
    };
    AttentionGrads {
        q: dq,
        k: dk,
        v: dv,
        bias: bias_grad,
        values: values_grad,
    }
}

#[cfg(test)]
mod tests {
    use super::super::forward::attention_forward;
    use super::super::naive::{cases, BiasKind};
    use super::*;
    use crate::lm::ops::fused::testing::{assert_close, from_interleaved, heads, store, values};

    /// [`attention_backward`] against the naive loop's gradients of $q, k, v$, the bias (per
    /// head: summed over the batch) and the relative values' table, from a seeded $\partial o$,
    /// for every case of [`super::super::naive::cases`], inputs and $\partial o$ contiguous
    /// and in `[B, L, H, D]` memory; without the bias gradient when it is not asked for.
    /// Relative error at most 1e-5 (absolute where the gradient's scale is below one).
    #[test]
    fn backward_matches_naive_gradients() {
        for case in cases() {
            let dims = case.dims;
            let dout = values(case.q.len(), 7, 1.0);
            let (dq, dk, dv, db, dtable) = case.backward(&dout);
            for interleaved in [false, true] {
                let what = format!(
                    "{dims:?} {:?} values {} interleaved {interleaved}",
                    case.kind,
                    case.values.is_some()
                );
                let (q, k, v) = (
                    store(&case.q, &dims, interleaved),
                    store(&case.k, &dims, interleaved),
                    store(&case.v, &dims, interleaved),
                );
                let qkv = (heads(&q), heads(&k), heads(&v));
                let rv = case.relative_values();
                let (out, lse) = attention_forward(qkv, (case.bias(), rv), case.scale, dims);
                let out = (out, HeadLayout::interleaved(&dims));
                let dout = store(&dout, &dims, interleaved);
                for want_bias in [true, false] {
                    let g = attention_backward(
                        qkv,
                        (heads(&out), heads(&dout), &lse),
                        (case.bias(), rv),
                        case.scale,
                        dims,
                        want_bias,
                    );
                    let grad = |x: &[f32]| from_interleaved(x, &dims);
                    assert_close(&format!("dq {what}"), &grad(&g.q), &dq, 1e-5);
                    assert_close(&format!("dk {what}"), &grad(&g.k), &dk, 1e-5);
                    assert_close(&format!("dv {what}"), &grad(&g.v), &dv, 1e-5);
                    if want_bias && case.kind != BiasKind::None {
                        assert_close(&format!("dbias {what}"), &g.bias, &db, 1e-5);
                    } else {
                        assert!(g.bias.is_empty(), "dbias {what}: not asked for");
                    }
                    assert_close(&format!("dtable {what}"), &g.values, &dtable, 1e-5);
                }
            }
        }
    }
}
