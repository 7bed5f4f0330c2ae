//! Log-softmax with the negative log-likelihood of a target per row of `logits [rows, V]`,
//! parallel over blocks of rows:
//!
//! ```math
//! \ell_r = \log \sum_j e^{x_{rj}} - x_{r t_r}, \qquad
//! \partial x_{rj} = \partial \ell_r \big(\operatorname{softmax}(x_r)_j - [j = t_r]\big),
//! ```
//!
//! the forward keeping the log-sum-exp of every row for the backward.

use rayon::prelude::*;

use super::parallel::ROWS;
use super::simd::{exp, exp_shifted_sum, max, multiversion};

multiversion! {
    /// $\log \sum_j e^{x_j}$ of one row.
    fn log_sum_exp_row(x: &[f32]) -> f32 {
        let max = max(x);
        max + exp_shifted_sum(x, max).ln()
    }
}

multiversion! {
    /// $\partial x_j = g\,(e^{x_j - \text{lse}} - [j = t])$ for one row.
    fn nll_backward_row(x: &[f32], lse: f32, target: usize, g: f32, dx: &mut [f32]) {
        for (dx, &x) in dx.iter_mut().zip(x) {
            *dx = g * exp(x - lse);
        }
        dx[target] -= g;
    }
}

/// Negative log-likelihood of `targets [rows]` under `logits [rows, V]`:
/// $\ell_r = \log\sum_j e^{x_{rj}} - x_{r t_r}$. Returns `nll [rows]` and the row's
/// log-sum-exp `[rows]`. Targets must be below `V` (checked by the caller).
pub fn nll_forward(logits: &[f32], targets: &[usize], vocab: usize) -> (Vec<f32>, Vec<f32>) {
    let rows = targets.len();
    let mut nll = vec![0.0f32; rows];
    let mut lse = vec![0.0f32; rows];
    nll.par_chunks_mut(ROWS)
        .zip(lse.par_chunks_mut(ROWS))
        .enumerate()
        .for_each(|(c, (nll, lse))| {
            for r in 0..nll.len() {
                let row = c * ROWS + r;
                let x = &logits[row * vocab..(row + 1) * vocab];
                lse[r] = log_sum_exp_row(x);
                nll[r] = lse[r] - x[targets[row]];
            }
        });
    (nll, lse)
}

/// $\partial x_{rj} = \partial\ell_r \,\big(\operatorname{softmax}(x_r)_j - [j = t_r]\big)$.
pub fn nll_backward(
    logits: &[f32],
    targets: &[usize],
    lse: &[f32],
    dnll: &[f32],
    vocab: usize,
) -> Vec<f32> {
    let mut dx = vec![0.0f32; logits.len()];
    dx.par_chunks_mut(vocab.max(1) * ROWS)
        .enumerate()
        .for_each(|(c, dx)| {
            for (r, dx) in dx.chunks_mut(vocab.max(1)).enumerate() {
                let row = c * ROWS + r;
                nll_backward_row(
                    &logits[row * vocab..(row + 1) * vocab],
                    lse[row],
                    targets[row],
                    dnll[row],
                    dx,
                );
            }
        });
    dx
}
