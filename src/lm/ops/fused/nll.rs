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

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_close, values};
    use super::*;

    /// [`nll_forward`] and [`nll_backward`] against the naive loops in `f64`, 130 rows (three
    /// parallel blocks of 64) of 259 logits in $[-8, 8]$, targets at both ends of the row.
    /// Relative error at most 1e-6 (losses and log-sum-exps of order 10: absolute 1e-5).
    #[test]
    fn nll_matches_naive_log_softmax() {
        let (rows, vocab) = (130, 259);
        let x = values(rows * vocab, 1, 8.0);
        let targets: Vec<usize> = (0..rows)
            .map(|r| (r * 37) % vocab)
            .chain([0, vocab - 1])
            .collect();
        let x: Vec<f32> = x.into_iter().chain(values(2 * vocab, 2, 8.0)).collect();
        let dnll = values(targets.len(), 3, 1.0);
        let (mut nll, mut lse, mut dx) = (Vec::new(), Vec::new(), Vec::new());
        for (r, &t) in targets.iter().enumerate() {
            let row: Vec<f64> = x[r * vocab..(r + 1) * vocab]
                .iter()
                .map(|&v| f64::from(v))
                .collect();
            let z = row.iter().map(|v| v.exp()).sum::<f64>().ln();
            lse.push(z);
            nll.push(z - row[t]);
            for (j, v) in row.iter().enumerate() {
                let one_hot = if j == t { 1.0 } else { 0.0 };
                dx.push(f64::from(dnll[r]) * ((v - z).exp() - one_hot));
            }
        }
        let (got_nll, got_lse) = nll_forward(&x, &targets, vocab);
        assert_close("nll", &got_nll, &nll, 1e-6);
        assert_close("nll lse", &got_lse, &lse, 1e-6);
        let got_dx = nll_backward(&x, &targets, &got_lse, &dnll, vocab);
        assert_close("nll dlogits", &got_dx, &dx, 1e-6);
    }
}
