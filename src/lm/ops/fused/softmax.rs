//! The causal softmax of one row of attention scores, forward and backward, in place: the
//! row kernels of the tiled attention ([`super::attention`]).
//!
//! ```math
//! s_j = c\, x_j + b_j, \quad p_j = \frac{e^{s_j - \max_k s_k}}{\sum_{k < n} e^{s_k - \max_k s_k}}
//! \ (j < n), \qquad \partial s_j = p_j\,(\partial p_j - \delta),
//! ```
//!
//! with $n$ the keys a query sees, zeros from $n$ on, and $\delta = \sum_j p_j\,\partial p_j$
//! (which attention computes as $\partial o_i \cdot o_i$).

use super::simd::{exp, exp_shifted_in_place, max, multiversion};

/// $s_j = c\,x_j + b_j$ in place over `live`.
#[inline(always)]
fn scale_and_bias(live: &mut [f32], bias: Option<&[f32]>, scale: f32) {
    match bias {
        Some(b) => {
            let b = &b[..live.len()];
            for (s, &b) in live.iter_mut().zip(b) {
                *s = s.mul_add(scale, b);
            }
        }
        None => {
            for s in live.iter_mut() {
                *s *= scale;
            }
        }
    }
}

multiversion! {
    /// The logits of one causal row in place, before their softmax: `row[j] = scale row[j] +
    /// bias[j]` for `j < valid` (what [`softmax_row`] does first; the rest of the row is left
    /// as it is).
    #[inline]
    pub(super) fn logits_row(row: &mut [f32], bias: Option<&[f32]>, scale: f32, valid: usize) {
        scale_and_bias(&mut row[..valid], bias, scale);
    }
}

multiversion! {
    /// One causal softmax row in place: `row[j] = scale row[j] + bias[j]` for `j < valid`,
    /// then $p_j = e^{s_j - \max} / \sum$, zeros from `valid` on. Returns
    /// $\log \sum_j e^{s_j}$.
    #[inline]
    pub(super) fn softmax_row(row: &mut [f32], bias: Option<&[f32]>, scale: f32, valid: usize) -> f32 {
        let (live, dead) = row.split_at_mut(valid);
        scale_and_bias(live, bias, scale);
        let max = max(live);
        let sum = exp_shifted_in_place(live, max);
        let inv = 1.0 / sum;
        for s in live.iter_mut() {
            *s *= inv;
        }
        dead.fill(0.0);
        max + sum.ln()
    }
}

multiversion! {
    /// The probabilities of one row from its raw products and log-sum-exp:
    /// $p_j = e^{\text{scale}\, s_j + b_j - \text{lse}}$ for `j < valid`, zeros after.
    #[inline]
    pub(super) fn probs_row(row: &mut [f32], bias: Option<&[f32]>, scale: f32, valid: usize, lse: f32) {
        let (live, dead) = row.split_at_mut(valid);
        match bias {
            Some(b) => {
                for (s, &b) in live.iter_mut().zip(&b[..valid]) {
                    *s = exp(s.mul_add(scale, b) - lse);
                }
            }
            None => {
                for s in live.iter_mut() {
                    *s = exp(s.mul_add(scale, -lse));
                }
            }
        }
        dead.fill(0.0);
    }
}

multiversion! {
    /// $\partial s_j = p_j (\partial p_j - \delta)$ in place of `dp`, for `j < valid`; zeros after.
    #[inline]
    pub(super) fn score_grad_row(dp: &mut [f32], p: &[f32], delta: f32, valid: usize) {
        let (live, dead) = dp.split_at_mut(valid);
        for (g, &p) in live.iter_mut().zip(&p[..valid]) {
            *g = p * (*g - delta);
        }
        dead.fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_close, values};
    use super::*;

    /// The naive causal softmax of a row in `f64`: $p_j$ for $j < n$, zeros after, and
    /// $\log\sum_{j<n} e^{s_j}$.
    fn naive(x: &[f32], bias: Option<&[f32]>, scale: f32, n: usize) -> (Vec<f64>, f64) {
        let s: Vec<f64> = (0..n)
            .map(|j| f64::from(scale) * f64::from(x[j]) + bias.map_or(0.0, |b| f64::from(b[j])))
            .collect();
        let lse = s.iter().map(|v| v.exp()).sum::<f64>().ln();
        let mut p: Vec<f64> = s.iter().map(|v| (v - lse).exp()).collect();
        p.resize(x.len(), 0.0);
        (p, lse)
    }

    /// [`softmax_row`], [`probs_row`] (from the log-sum-exp) and [`score_grad_row`] against
    /// the naive loop, rows of 1 to 45 entries (across the 16 lanes of the reductions), every
    /// valid length of a causal row, with and without a bias. Relative error at most 1e-6
    /// (the log-sum-exp: absolute 1e-6 on values of order 10).
    #[test]
    fn row_kernels_match_naive_softmax() {
        for len in [1, 16, 17, 45] {
            let x = values(len, len as u64, 4.0);
            let b = values(len, 100 + len as u64, 3.0);
            let dp = values(len, 200 + len as u64, 1.0);
            for valid in 1..=len {
                for bias in [None, Some(&b[..])] {
                    let what = format!("len {len} valid {valid} bias {}", bias.is_some());
                    let (want, lse) = naive(&x, bias, 0.7, valid);
                    let mut row = x.clone();
                    let got_lse = softmax_row(&mut row, bias, 0.7, valid);
                    assert_close(&format!("softmax {what}"), &row, &want, 1e-6);
                    assert!((f64::from(got_lse) - lse).abs() <= 1e-6 * lse.abs().max(1.0));
                    let mut rebuilt = x.clone();
                    probs_row(&mut rebuilt, bias, 0.7, valid, got_lse);
                    assert_close(&format!("probs {what}"), &rebuilt, &want, 1e-6);
                    // dS_j = p_j (dP_j - delta), delta = sum_j p_j dP_j
                    let delta: f64 = (0..valid).map(|j| want[j] * f64::from(dp[j])).sum();
                    let want_ds: Vec<f64> = (0..len)
                        .map(|j| {
                            if j < valid {
                                want[j] * (f64::from(dp[j]) - delta)
                            } else {
                                0.0
                            }
                        })
                        .collect();
                    let mut ds = dp.clone();
                    score_grad_row(&mut ds, &row, delta as f32, valid);
                    assert_close(&format!("score gradient {what}"), &ds, &want_ds, 1e-6);
                }
            }
        }
    }
}
