//! LayerNorm over the last axis of `x [rows, d]`, parallel over blocks of rows:
//!
//! ```math
//! y = \hat x \gamma + \beta, \quad \hat x = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}}, \qquad
//! \partial x = \frac{1}{\sigma}\Big(\gamma \partial y - \overline{\gamma \partial y}
//!   - \hat x \, \overline{\gamma \partial y \, \hat x}\Big),
//! ```
//!
//! $\partial \gamma = \sum_{\text{rows}} \partial y\, \hat x$,
//! $\partial \beta = \sum_{\text{rows}} \partial y$, with the biased variance $\sigma^2$ and
//! $\bar{\cdot}$ the mean over the row; the forward keeps $(\mu, 1/\sigma)$ of every row.

use rayon::prelude::*;

use super::parallel::ROWS;
use super::simd::{multiversion, sum, sum_squared_deviations, LANES};

multiversion! {
    /// One LayerNorm row: writes $\hat x \gamma + \beta$ and returns
    /// $(\mu, 1/\sigma)$.
    fn layer_norm_row(x: &[f32], gamma: &[f32], beta: &[f32], eps: f32, y: &mut [f32]) -> (f32, f32) {
        let n = x.len() as f32;
        let mean = sum(x) / n;
        let var = sum_squared_deviations(x, mean) / n;
        let rstd = 1.0 / (var + eps).sqrt();
        for (((y, &x), &g), &b) in y.iter_mut().zip(x).zip(gamma).zip(beta) {
            *y = ((x - mean) * rstd).mul_add(g, b);
        }
        (mean, rstd)
    }
}

/// LayerNorm over the last axis of `x [rows, d]`:
/// $y = \frac{x - \mu}{\sqrt{\sigma^2 + \epsilon}} \gamma + \beta$ with the biased variance.
/// Returns `y` and the per-row $(\mu, 1/\sigma)$ as `[rows, 2]`.
pub fn layer_norm_forward(
    x: &[f32],
    gamma: &[f32],
    beta: &[f32],
    eps: f32,
) -> (Vec<f32>, Vec<f32>) {
    let d = gamma.len().max(1);
    let mut y = vec![0.0f32; x.len()];
    let mut stats = vec![0.0f32; 2 * (x.len() / d)];
    y.par_chunks_mut(d)
        .zip(x.par_chunks(d))
        .zip(stats.par_chunks_mut(2))
        .for_each(|((y, x), st)| {
            let (mean, rstd) = layer_norm_row(x, gamma, beta, eps, y);
            st[0] = mean;
            st[1] = rstd;
        });
    (y, stats)
}

multiversion! {
    /// One LayerNorm row backward: writes $\partial x$ and adds to the running
    /// $\partial\gamma$, $\partial\beta$.
    fn layer_norm_backward_row(
        x: &[f32],
        dy: &[f32],
        gamma: &[f32],
        stats: (f32, f32),
        dx: &mut [f32],
        dgamma: &mut [f32],
        dbeta: &mut [f32],
    ) {
        let (mean, rstd) = stats;
        let n = x.len() as f32;
        // a = mean(g dy), b = mean(g dy xhat), over LANES partial sums each
        let len = x.len();
        let (dy, gamma) = (&dy[..len], &gamma[..len]);
        let (dgamma, dbeta) = (&mut dgamma[..len], &mut dbeta[..len]);
        let mut acc_a = [0.0f32; LANES];
        let mut acc_b = [0.0f32; LANES];
        let full = len / LANES * LANES;
        for c in (0..full).step_by(LANES) {
            for l in 0..LANES {
                let i = c + l;
                let xhat = (x[i] - mean) * rstd;
                let gdy = gamma[i] * dy[i];
                acc_a[l] += gdy;
                acc_b[l] = gdy.mul_add(xhat, acc_b[l]);
                dgamma[i] = dy[i].mul_add(xhat, dgamma[i]);
                dbeta[i] += dy[i];
            }
        }
        let (mut a, mut b) = (sum(&acc_a), sum(&acc_b));
        for i in full..len {
            let xhat = (x[i] - mean) * rstd;
            let gdy = gamma[i] * dy[i];
            a += gdy;
            b = gdy.mul_add(xhat, b);
            dgamma[i] = dy[i].mul_add(xhat, dgamma[i]);
            dbeta[i] += dy[i];
        }
        a /= n;
        b /= n;
        for (((dx, &x), &dy), &g) in dx.iter_mut().zip(x).zip(dy).zip(gamma) {
            let xhat = (x - mean) * rstd;
            *dx = rstd * (g * dy - a - xhat * b);
        }
    }
}

/// LayerNorm backward:
///
/// ```math
/// \partial x = \frac{1}{\sigma}\Big(\gamma \partial y - \overline{\gamma \partial y}
///   - \hat x \, \overline{\gamma \partial y \, \hat x}\Big), \quad
/// \partial \gamma = \sum_{\text{rows}} \partial y \, \hat x, \quad
/// \partial \beta = \sum_{\text{rows}} \partial y .
/// ```
///
/// Returns $(\partial x, \partial\gamma, \partial\beta)$.
pub fn layer_norm_backward(
    x: &[f32],
    dy: &[f32],
    gamma: &[f32],
    stats: &[f32],
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let d = gamma.len().max(1);
    let mut dx = vec![0.0f32; x.len()];
    let partial: Vec<(Vec<f32>, Vec<f32>)> = dx
        .par_chunks_mut(d * ROWS)
        .zip(x.par_chunks(d * ROWS))
        .zip(dy.par_chunks(d * ROWS))
        .zip(stats.par_chunks(2 * ROWS))
        .map(|(((dx, x), dy), st)| {
            let mut dgamma = vec![0.0f32; d];
            let mut dbeta = vec![0.0f32; d];
            for (r, dx) in dx.chunks_mut(d).enumerate() {
                layer_norm_backward_row(
                    &x[r * d..(r + 1) * d],
                    &dy[r * d..(r + 1) * d],
                    gamma,
                    (st[2 * r], st[2 * r + 1]),
                    dx,
                    &mut dgamma,
                    &mut dbeta,
                );
            }
            (dgamma, dbeta)
        })
        .collect();
    let mut dgamma = vec![0.0f32; d];
    let mut dbeta = vec![0.0f32; d];
    for (g, b) in partial {
        for (acc, v) in dgamma.iter_mut().zip(g) {
            *acc += v;
        }
        for (acc, v) in dbeta.iter_mut().zip(b) {
            *acc += v;
        }
    }
    (dx, dgamma, dbeta)
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_close, values};
    use super::*;

    /// [`layer_norm_forward`] and [`layer_norm_backward`] against the naive loops in `f64`
    /// (mean, biased variance, normalised row; the gradient from the chain rule of the formula
    /// in the module doc), 130 rows (three parallel blocks of 64, the last partial) of 37 values
    /// (two groups of 16 lanes and a rest of 5), and one row of 1. Relative error at most 1e-5.
    #[test]
    fn layer_norm_matches_naive_loop() {
        let eps = 1e-5f32;
        for (rows, d) in [(130, 37), (3, 1)] {
            let x = values(rows * d, 1, 3.0);
            let gamma: Vec<f32> = values(d, 2, 0.5).iter().map(|g| 1.0 + g).collect();
            let beta = values(d, 3, 0.5);
            let dy = values(rows * d, 4, 1.0);
            let (mut y, mut stats) = (Vec::new(), Vec::new());
            let (mut dx, mut dgamma, mut dbeta) = (Vec::new(), vec![0.0; d], vec![0.0; d]);
            for r in 0..rows {
                let x = &x[r * d..(r + 1) * d];
                let dy = &dy[r * d..(r + 1) * d];
                let mean = x.iter().map(|&v| f64::from(v)).sum::<f64>() / d as f64;
                let var = x
                    .iter()
                    .map(|&v| (f64::from(v) - mean).powi(2))
                    .sum::<f64>()
                    / d as f64;
                let rstd = 1.0 / (var + f64::from(eps)).sqrt();
                stats.extend([mean, rstd]);
                let xhat: Vec<f64> = x.iter().map(|&v| (f64::from(v) - mean) * rstd).collect();
                let gdy: Vec<f64> = (0..d).map(|c| f64::from(gamma[c] * dy[c])).collect();
                let a = gdy.iter().sum::<f64>() / d as f64;
                let b = gdy.iter().zip(&xhat).map(|(g, h)| g * h).sum::<f64>() / d as f64;
                for c in 0..d {
                    y.push(xhat[c] * f64::from(gamma[c]) + f64::from(beta[c]));
                    dx.push(rstd * (gdy[c] - a - xhat[c] * b));
                    dgamma[c] += f64::from(dy[c]) * xhat[c];
                    dbeta[c] += f64::from(dy[c]);
                }
            }
            let (got_y, got_stats) = layer_norm_forward(&x, &gamma, &beta, eps);
            let what = format!("{rows} x {d}");
            assert_close(&format!("layer norm {what}"), &got_y, &y, 1e-5);
            assert_close(
                &format!("layer norm stats {what}"),
                &got_stats,
                &stats,
                1e-5,
            );
            let (got_dx, got_dgamma, got_dbeta) = layer_norm_backward(&x, &dy, &gamma, &got_stats);
            assert_close(&format!("layer norm dx {what}"), &got_dx, &dx, 1e-5);
            assert_close(
                &format!("layer norm dgamma {what}"),
                &got_dgamma,
                &dgamma,
                1e-5,
            );
            assert_close(
                &format!("layer norm dbeta {what}"),
                &got_dbeta,
                &dbeta,
                1e-5,
            );
        }
    }
}
