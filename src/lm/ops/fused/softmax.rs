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

multiversion! {
    /// One causal softmax row in place: `row[j] = scale row[j] + bias[j]` for `j < valid`,
    /// then $p_j = e^{s_j - \max} / \sum$, zeros from `valid` on. Returns
    /// $\log \sum_j e^{s_j}$.
    pub(super) fn softmax_row(row: &mut [f32], bias: Option<&[f32]>, scale: f32, valid: usize) -> f32 {
        let (live, dead) = row.split_at_mut(valid);
        match bias {
            Some(b) => {
                for (s, &b) in live.iter_mut().zip(&b[..valid]) {
                    *s = s.mul_add(scale, b);
                }
            }
            None => {
                for s in live.iter_mut() {
                    *s *= scale;
                }
            }
        }
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
    pub(super) fn score_grad_row(dp: &mut [f32], p: &[f32], delta: f32, valid: usize) {
        let (live, dead) = dp.split_at_mut(valid);
        for (g, &p) in live.iter_mut().zip(&p[..valid]) {
            *g = p * (*g - delta);
        }
        dead.fill(0.0);
    }
}
