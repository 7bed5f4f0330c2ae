//! The relative-position gather of every `[L, R]` matrix of `a [BH, L, R]` by one index
//! `[L, L]`, and its gradient (a scatter-add), parallel over the `BH` matrices:
//!
//! ```math
//! y_{ij} = a_{i,\,\text{index}_{ij}}, \qquad
//! \partial a_{ic} = \sum_{j:\ \text{index}_{ij} = c} \partial y_{ij}
//! ```
//!
//! (or $y_{ij} = a_{j,\,\text{index}_{ij}}$ with the sum over $i$, transposed).

use rayon::prelude::*;

use super::parallel::written_by;

/// The relative-position gather of every `[L, R]` matrix of `a [BH, L, R]` by one
/// `index [L, L]` (every entry below `R`), `[BH, L, L]`:
///
/// ```math
/// y_{ij} = a_{i,\,\text{index}_{ij}} \quad\text{(rows)}, \qquad
/// y_{ij} = a_{j,\,\text{index}_{ij}} \quad\text{(transposed)}.
/// ```
///
/// DeBERTa's c2p term is the first form of $a = Q K^{r\top}$, its p2c term the second of
/// $a = K Q^{r\top}$; Transformer-XL's shifted term is the first with
/// $\text{index}_{ij} = L - 1 - i + j$. Parallel over the `BH` matrices.
pub fn relative_gather(
    a: &[f32],
    index: &[usize],
    (l, r): (usize, usize),
    transposed: bool,
) -> Vec<f32> {
    let (ll, lr) = (l * l, l * r);
    let heads = a.len().checked_div(lr).unwrap_or(0);
    // SAFETY: every matrix's L x L entries are written below.
    unsafe {
        written_by(heads * ll, |out| {
            out.par_chunks_mut(ll.max(1))
                .zip(a.par_chunks(lr.max(1)))
                .for_each(|(out, a)| {
                    for (i, (out, idx)) in out.chunks_mut(l).zip(index.chunks(l)).enumerate() {
                        for (j, (y, &c)) in out.iter_mut().zip(idx).enumerate() {
                            let row = if transposed { j } else { i };
                            y.write(a[row * r + c]);
                        }
                    }
                });
        })
    }
}

/// The gradient of [`relative_gather`] with respect to `a`, `[BH, L, R]`:
/// $\partial a_{i c} = \sum_{j:\ \text{index}_{ij} = c} \partial y_{ij}$ (rows), or
/// $\partial a_{j c} = \sum_{i:\ \text{index}_{ij} = c} \partial y_{ij}$ (transposed).
pub fn relative_gather_backward(
    dy: &[f32],
    index: &[usize],
    (l, r): (usize, usize),
    transposed: bool,
) -> Vec<f32> {
    let (ll, lr) = (l * l, l * r);
    let heads = dy.len().checked_div(ll).unwrap_or(0);
    let mut da = vec![0.0f32; heads * lr];
    da.par_chunks_mut(lr.max(1))
        .zip(dy.par_chunks(ll.max(1)))
        .for_each(|(da, dy)| {
            for (i, (dy, idx)) in dy.chunks(l).zip(index.chunks(l)).enumerate() {
                for (j, (&g, &c)) in dy.iter().zip(idx).enumerate() {
                    let row = if transposed { j } else { i };
                    da[row * r + c] += g;
                }
            }
        });
    da
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_close, values};
    use super::*;

    /// [`relative_gather`] and [`relative_gather_backward`] against the naive loops, both
    /// directions, an index with repeated and unused columns, `R` below, equal to and above
    /// `L`, six matrices. The gather copies (exactly equal); the scatter adds in `f32` in
    /// the kernel and `f64` in the loop: relative error at most 1e-6.
    #[test]
    fn gather_and_scatter_match_naive_loops() {
        let heads = 6;
        for (l, r) in [(5, 3), (33, 33), (9, 40)] {
            let index: Vec<usize> = (0..l * l)
                .map(|e| ((e / l) * 7 + (e % l) * 3) % r)
                .collect();
            let a = values(heads * l * r, 1, 1.0);
            let dy = values(heads * l * l, 2, 1.0);
            for transposed in [false, true] {
                let mut y = vec![0.0f32; heads * l * l];
                let mut da = vec![0.0f64; heads * l * r];
                for m in 0..heads {
                    for i in 0..l {
                        for j in 0..l {
                            let row = if transposed { j } else { i };
                            let at = (m * l + row) * r + index[i * l + j];
                            y[(m * l + i) * l + j] = a[at];
                            da[at] += f64::from(dy[(m * l + i) * l + j]);
                        }
                    }
                }
                let what = format!("L {l} R {r} transposed {transposed}");
                assert_eq!(
                    relative_gather(&a, &index, (l, r), transposed),
                    y,
                    "gather {what}"
                );
                let got = relative_gather_backward(&dy, &index, (l, r), transposed);
                assert_close(&format!("scatter {what}"), &got, &da, 1e-6);
            }
        }
    }
}
