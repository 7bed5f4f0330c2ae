//! The forward pass of the tiled attention: per tile of query rows, the raw scores with the
//! relative terms ([`super::tile_scores`]), the causal softmax of every row with its bias,
//! $O = P V$ (and $O \mathrel{+}= \bar P a^V$ with the weights summed per table row, for
//! relative values), and the log-sum-exp of every row
//! $\text{lse}_i = \log \sum_{j \le i} e^{s_{ij}}$. With CoPE, the logits of a row are
//! finished first (scale and bias), its contextual positions added
//! ([`super::contextual::add_positions_row`]), and the softmax taken of the sum.

use rayon::prelude::*;

use super::contextual::ContextualScratch;
use super::terms::HeadTerms;
use super::{contextual_logits, tile_scores, Terms, TILE};
use crate::lm::ops::fused::heads::{AttentionDims, HeadLayout, HeadRows, HeadRowsMut, Heads};
use crate::lm::ops::fused::parallel::{product, SharedMut};
use crate::lm::ops::fused::softmax::softmax_row;

/// Per-thread buffers of the forward pass.
struct ForwardScratch {
    /// `[TILE, L]`: the tile's scores, then its weights.
    s: Vec<f32>,
    /// `[TILE, L]`: the relative keys' products, or the second pass's (empty without them).
    g: Vec<f32>,
    /// `[L]`: one row's bias (piecewise).
    bias: Vec<f32>,
    /// `[TILE, R]`: the weights summed per relative-value row.
    sums: Vec<f32>,
    /// CoPE's gates, counts and $T$ of the tile.
    cope: ContextualScratch,
}

/// Forward pass of one head: its output rows (through `out`, row stride `out.1`) and the
/// log-sum-exp of every row `lse [L]`.
///
/// # Safety
/// The pointers cover the head's `L` rows of `D` at their strides.
unsafe fn attention_head_forward(
    (q, k, v): (HeadRows, HeadRows, HeadRows),
    terms: &HeadTerms,
    scale: f32,
    dims: &AttentionDims,
    out: HeadRowsMut,
    lse: &mut [f32],
    scratch: &mut ForwardScratch,
) {
    let (l, d) = (dims.len, dims.dim);
    for i0 in (0..l).step_by(TILE) {
        let m = TILE.min(l - i0);
        // keys 0..n can be seen by some row of the tile
        let n = i0 + m;
        let s = &mut scratch.s[..m * n];
        // SAFETY: q, k and the terms cover their rows (caller's contract); g holds m x n.
        unsafe { tile_scores((q, k), terms, (i0, m, l, d), s, &mut scratch.g) };
        match &terms.contextual {
            None => {
                for r in 0..m {
                    let i = i0 + r;
                    let bias = terms.bias_row(i, l, &mut scratch.bias);
                    lse[i] = softmax_row(&mut s[r * n..(r + 1) * n], bias, scale, i + 1);
                }
            }
            Some(cx) => {
                // SAFETY: q covers the tile's rows; s holds m x n.
                unsafe {
                    contextual_logits(
                        cx,
                        q,
                        terms,
                        (i0, m, l, d),
                        scale,
                        s,
                        &mut scratch.bias,
                        &mut scratch.cope,
                    );
                }
                // the softmax of a + z
                for r in 0..m {
                    let i = i0 + r;
                    lse[i] = softmax_row(&mut s[r * n..(r + 1) * n], None, 1.0, i + 1);
                }
            }
        }
        // O_tile = P V[0..n], [m, d]
        // SAFETY: s is m x n, v covers n rows, out covers rows i0..i0+m.
        unsafe {
            product(
                (m, d, n),
                (out.0.add(i0 * out.1), out.1, 1),
                false,
                (s.as_ptr(), n, 1),
                (v.0, v.1, 1),
                1.0,
            );
        }
        if let Some(rv) = &terms.values {
            // O_tile += S a^V with S the weights summed per table row, [m, R]
            let sums = &mut scratch.sums[..m * rv.rows];
            rv.band_sums(s, (i0, m, n, l), sums);
            // SAFETY: sums is m x R, the table R x D, out covers rows i0..i0+m.
            unsafe {
                product(
                    (m, d, rv.rows),
                    (out.0.add(i0 * out.1), out.1, 1),
                    true,
                    (sums.as_ptr(), rv.rows, 1),
                    (rv.table.as_ptr(), d, 1),
                    1.0,
                );
            }
        }
    }
}

/// Causal attention of every head with the position terms of `terms`, parallel over
/// (batch, head):
///
/// ```math
/// o_i = \sum_{j \le i} \operatorname{softmax}_j\!\big(c\,(q_i \cdot k_j + t_{ij}) + b_{ij}\big)
///   \big(v_j + a^V_{\text{index}(i-j)}\big)
/// ```
///
/// `q, k, v` in any [`HeadLayout`]. Returns `out` in `[B, L, H, D]` memory
/// ([`HeadLayout::interleaved`]: the input layout of the output projection) and the
/// log-sum-exp of every row `[B, H, L]` (what the backward pass needs to rebuild the weights).
/// No `[L, L]` matrix is kept: each thread holds one tile of `TILE x L` scores.
///
/// # Panics
/// When a buffer does not cover its layout or a term does not match `dims`.
pub fn attention_forward(
    (q, k, v): (Heads<'_>, Heads<'_>, Heads<'_>),
    terms: &Terms<'_>,
    scale: f32,
    dims: AttentionDims,
) -> (Vec<f32>, Vec<f32>) {
    q.check(&dims, "q");
    k.check(&dims, "k");
    v.check(&dims, "v");
    terms.check(&dims);
    let prepared = terms.prepare(&dims);
    let l = dims.len;
    let value_rows = terms.values.map_or(0, |rv| rv.rows);
    let heads = dims.batch * dims.heads;
    let out_layout = HeadLayout::interleaved(&dims);
    let n = heads * l * dims.dim;
    // written row by row by the heads' P V products (no zero fill first)
    let mut out: Vec<f32> = Vec::with_capacity(n);
    let mut lse = vec![0.0f32; heads * l];
    let out_ptr = SharedMut(out.spare_capacity_mut().as_mut_ptr().cast::<f32>());
    lse.par_chunks_mut(l.max(1)).enumerate().for_each_init(
        || {
            let with_g = terms.distance.is_some() || terms.window.is_some();
            let scratch = ForwardScratch {
                s: vec![0.0; TILE * l],
                g: vec![0.0; if with_g { TILE * l } else { 0 }],
                bias: vec![0.0; l],
                sums: vec![0.0; TILE * value_rows],
                cope: ContextualScratch::new(terms.contextual.as_ref(), TILE, l),
            };
            // and the head's key table as the rows read it
            (scratch, Vec::new())
        },
        |(scratch, key_table), (bh, lse)| {
            // the whole wrapper moves into the closure (not its raw-pointer field)
            let out_ptr = &out_ptr;
            let mut head_terms = terms.head(&prepared, bh, &dims);
            head_terms.key_table = head_terms.key_table.map(|t| t.for_rows(l, key_table));
            // SAFETY: the layouts were checked to lie within their buffers; head bh writes only
            // its own rows of `out`.
            unsafe {
                attention_head_forward(
                    (q.head(bh, &dims), k.head(bh, &dims), v.head(bh, &dims)),
                    &head_terms,
                    scale,
                    &dims,
                    (out_ptr.0.add(out_layout.start(bh, &dims)), out_layout.row),
                    lse,
                    scratch,
                );
            }
        },
    );
    // SAFETY: every head wrote all its L rows of D values (the P V product of each tile
    // writes the tile's rows), and the heads cover the buffer.
    unsafe { out.set_len(n) };
    (out, lse)
}

#[cfg(test)]
mod tests {
    use super::super::naive::cases;
    use super::*;
    use crate::lm::ops::fused::testing::{assert_close, from_interleaved, heads, store};

    /// [`attention_forward`] against the naive loop: output and log-sum-exp of every row, for
    /// every case of [`super::super::naive::cases`] (lengths 1, 33, 64, 70 against the
    /// 32-row tile; head dimensions 4 to 16; every position term alone and the schemes'
    /// combinations), inputs contiguous and in `[B, L, H, D]` memory at an offset. Relative
    /// error at most 1e-5.
    #[test]
    fn forward_matches_naive_attention() {
        for case in cases() {
            let (_, want_out, want_lse) = case.forward();
            for interleaved in [false, true] {
                let what = format!("{} interleaved {interleaved}", case.name());
                let (q, k, v) = (
                    store(&case.q, &case.dims, interleaved),
                    store(&case.k, &case.dims, interleaved),
                    store(&case.v, &case.dims, interleaved),
                );
                let qhat = case
                    .qhat
                    .as_ref()
                    .map(|x| store(x, &case.dims, interleaved));
                let (out, lse) = attention_forward(
                    (heads(&q), heads(&k), heads(&v)),
                    &case.terms(qhat.as_ref().map(heads)),
                    case.scale,
                    case.dims,
                );
                let out = from_interleaved(&out, &case.dims);
                assert_close(&format!("output {what}"), &out, &want_out, 1e-5);
                assert_close(&format!("lse {what}"), &lse, &want_lse, 1e-5);
            }
        }
    }
}
