//! RoPE written as matrices: the block-diagonal rotation $R_m$, the slow reference of
//! [`apply_rope`](super::apply_rope), and Su et al.'s bound on how the score can decay with
//! the distance.
//!
//! ```math
//! R_m = \operatorname{diag}\big(R(m\theta_0), \dots, R(m\theta_{d/2-1})\big), \qquad
//! \frac{1}{d/2}\sum_{j=1}^{d/2} \lvert S_j \rvert, \quad S_j = \sum_{i<j} e^{\mathrm{i}\delta\theta_i}
//! ```
//!
//! Nobody builds $R_m$ in practice (it is mostly zeros), but it states what the elementwise
//! code computes; `notebooks/07_rope.ipynb` checks both layouts against it and draws the bound.

use ndarray::Array2;

use super::{RopeFrequencies, RopeLayout};

/// The block-diagonal rotation $R_m$ at position `m`, `[d, d]`, times the attention factor:
/// block $i$ is $R(m\theta_i) = \begin{pmatrix}\cos & -\sin\\ \sin & \cos\end{pmatrix}$ on the
/// coordinates of pair $i$ in `layout` ($2i, 2i+1$ interleaved; $i, i + d/2$ half). A row
/// vector $x$ is rotated as $x R_m^\top$, which is what [`apply_rope`](super::apply_rope)
/// computes elementwise. The angle is computed in `f64` and rounded once, as there.
///
/// # Examples
/// ```
/// use posenc::encodings::rope::{rotation_matrix, RopeConfig, RopeLayout};
/// let freqs = RopeConfig::new(2, 10_000.0)?.frequencies(None)?; // one pair, theta = 1
/// let r = rotation_matrix(0.5, &freqs, RopeLayout::Half);
/// assert_eq!(r[[0, 1]], -(0.5f64.sin() as f32));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn rotation_matrix(m: f64, freqs: &RopeFrequencies, layout: RopeLayout) -> Array2<f32> {
    let half = freqs.inv_freq.len();
    let a = f64::from(freqs.attention_factor);
    let mut r = Array2::zeros((2 * half, 2 * half));
    for (i, &theta) in freqs.inv_freq.iter().enumerate() {
        // the two coordinates of pair i
        let (u, v) = match layout {
            RopeLayout::Interleaved => (2 * i, 2 * i + 1),
            RopeLayout::Half => (i, i + half),
        };
        // m theta_i
        let angle = m * f64::from(theta);
        let (c, s) = ((angle.cos() * a) as f32, (angle.sin() * a) as f32);
        r[[u, u]] = c;
        r[[u, v]] = -s;
        r[[v, u]] = s;
        r[[v, v]] = c;
    }
    r
}

/// Su et al.'s relative upper bound on the RoPE score at distance $\delta$ (RoFormer §3.4.3):
/// $\frac{1}{d/2}\sum_{j=1}^{d/2}\lvert S_j\rvert$ with $S_j = \sum_{i<j} e^{\mathrm{i}\delta\theta_i}$.
/// By summation by parts $\lvert q_m \cdot k_n\rvert \le \max_i\lvert h_{i+1} - h_i\rvert
/// \sum_j \lvert S_j\rvert$ with $h_i = \tilde q_i \overline{\tilde k_i}$ (and $h_{d/2} = 0$),
/// so this factor, which depends only on $\delta$ and the frequencies, caps how large a score
/// can be at that distance. It is $(d/2 + 1)/2$ at $\delta = 0$; empty frequencies give 0.
///
/// # Examples
/// ```
/// use posenc::encodings::rope::decay_bound;
/// assert_eq!(decay_bound(0.0, &[1.0, 0.1, 0.01]), 2.0); // (3 + 1) / 2
/// assert!(decay_bound(100.0, &[1.0, 0.1, 0.01]) < 2.0);
/// ```
pub fn decay_bound(delta: f64, inv_freq: &[f32]) -> f64 {
    if inv_freq.is_empty() {
        return 0.0;
    }
    let (mut re, mut im, mut total) = (0f64, 0f64, 0f64);
    for &theta in inv_freq {
        // S_{j+1} = S_j + e^{i delta theta_j}
        re += (delta * f64::from(theta)).cos();
        im += (delta * f64::from(theta)).sin();
        total += re.hypot(im);
    }
    total / inv_freq.len() as f64
}

#[cfg(test)]
mod tests {
    use super::super::{apply_rope, interleaved_to_half, RopeConfig};
    use super::*;
    use crate::encodings::init::seeded_normal as random;

    fn freqs(dim: usize) -> RopeFrequencies {
        RopeConfig::new(dim, 10_000.0)
            .unwrap()
            .frequencies(None)
            .unwrap()
    }

    fn max_abs(a: &Array2<f32>, b: &Array2<f32>) -> f32 {
        (a - b).iter().fold(0.0, |m, v| m.max(v.abs()))
    }

    #[test]
    fn rows_times_the_transposed_matrix_equal_the_elementwise_rotation_in_both_layouts() {
        let f = freqs(8);
        let x = random(1, 8, 3);
        for layout in [RopeLayout::Interleaved, RopeLayout::Half] {
            for m in [0.0, 1.0, 7.0, 1000.0] {
                let fast = apply_rope(x.view(), &[m], &f, layout).unwrap();
                let by_matrix = x.dot(&rotation_matrix(m, &f, layout).t());
                assert!(max_abs(&fast, &by_matrix) < 1e-5, "{layout:?} at {m}");
            }
        }
    }

    #[test]
    fn the_layouts_are_one_matrix_permuted() {
        let f = freqs(8);
        let pi = interleaved_to_half(8).unwrap();
        let inter = rotation_matrix(3.0, &f, RopeLayout::Interleaved);
        let half = rotation_matrix(3.0, &f, RopeLayout::Half);
        let permuted = inter
            .select(ndarray::Axis(0), &pi)
            .select(ndarray::Axis(1), &pi);
        assert_eq!(permuted, half);
    }

    #[test]
    fn rotations_compose_and_keep_lengths() {
        let f = freqs(16);
        let (rm, rn) = (
            rotation_matrix(5.0, &f, RopeLayout::Half),
            rotation_matrix(12.0, &f, RopeLayout::Half),
        );
        let relative = rotation_matrix(7.0, &f, RopeLayout::Half);
        assert!(max_abs(&rm.t().dot(&rn), &relative) < 1e-5);
        assert!(max_abs(&rm.t().dot(&rm), &Array2::eye(16)) < 1e-6);
    }

    #[test]
    fn the_attention_factor_scales_the_matrix() {
        let mut f = freqs(4);
        let plain = rotation_matrix(2.0, &f, RopeLayout::Interleaved);
        f.attention_factor = 1.5;
        let scaled = rotation_matrix(2.0, &f, RopeLayout::Interleaved);
        assert!(max_abs(&(plain * 1.5), &scaled) < 1e-6);
    }

    #[test]
    fn the_bound_starts_at_its_closed_form_and_is_flat_for_equal_frequencies() {
        let f = freqs(128);
        assert!((decay_bound(0.0, &f.inv_freq) - 32.5).abs() < 1e-12);
        // all pairs at one frequency never fall out of phase: |S_j| = j at every distance
        for delta in [1.0, 17.0, 3000.0] {
            assert!((decay_bound(delta, &[0.3; 8]) - 4.5).abs() < 1e-9);
        }
        assert_eq!(decay_bound(5.0, &[]), 0.0);
    }

    #[test]
    fn the_bound_holds_for_random_queries_and_keys() {
        let f = freqs(32);
        let (q, k) = (random(1, 32, 7), random(1, 32, 8));
        // h_i = q~_i conj(k~_i) in the interleaved layout, h_16 = 0
        let h: Vec<(f64, f64)> = (0..16)
            .map(|i| {
                let (a, b) = (f64::from(q[[0, 2 * i]]), f64::from(q[[0, 2 * i + 1]]));
                let (c, e) = (f64::from(k[[0, 2 * i]]), f64::from(k[[0, 2 * i + 1]]));
                (a * c + b * e, b * c - a * e)
            })
            .chain(std::iter::once((0.0, 0.0)))
            .collect();
        let max_dh = h
            .windows(2)
            .map(|w| (w[1].0 - w[0].0).hypot(w[1].1 - w[0].1))
            .fold(0.0, f64::max);
        for delta in (0..2000).step_by(7) {
            let qm = apply_rope(q.view(), &[delta as f64], &f, RopeLayout::Interleaved).unwrap();
            let score = f64::from(qm.row(0).dot(&k.row(0)));
            let bound = max_dh * 16.0 * decay_bound(delta as f64, &f.inv_freq);
            assert!(
                score.abs() <= bound * (1.0 + 1e-5),
                "{delta}: {score} > {bound}"
            );
        }
    }
}
