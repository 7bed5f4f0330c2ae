//! Exact (erf) GELU, elementwise, parallel over chunks of the tensor:
//!
//! ```math
//! y = x\, \Phi(x) = \tfrac{x}{2}\big(1 + \operatorname{erf}(x / \sqrt 2)\big), \qquad
//! \partial x = \partial y\, \big(\Phi(x) + x \varphi(x)\big), \quad
//! \varphi(x) = e^{-x^2/2} / \sqrt{2\pi},
//! ```
//!
//! the forward keeping $\Phi(x)$ for the backward.

use std::mem::MaybeUninit;

use rayon::prelude::*;

use super::parallel::{par_collect, CHUNK};
use super::simd::{exp, multiversion, normal_cdf, FRAC_1_SQRT_2PI};

multiversion! {
    /// GELU of a slice, $y = x \Phi(x)$, and $\Phi(x)$ (kept for the backward), written
    /// into uninitialised outputs.
    fn gelu_slice(x: &[f32], y: &mut [MaybeUninit<f32>], cdf: &mut [MaybeUninit<f32>]) {
        for ((y, c), &x) in y.iter_mut().zip(cdf.iter_mut()).zip(x) {
            let p = normal_cdf(x);
            c.write(p);
            y.write(x * p);
        }
    }
}

multiversion! {
    /// GELU's backward on a slice from the saved $\Phi(x)$: $g\,(\Phi(x) + x \varphi(x))$,
    /// $\varphi(x) = e^{-x^2/2} / \sqrt{2\pi}$.
    fn gelu_backward_slice(x: &[f32], cdf: &[f32], g: &[f32], dx: &mut [MaybeUninit<f32>]) {
        for (((dx, &x), &c), &g) in dx.iter_mut().zip(x).zip(cdf).zip(g) {
            let pdf = FRAC_1_SQRT_2PI * exp(-0.5 * x * x);
            dx.write(g * x.mul_add(pdf, c));
        }
    }
}

/// Exact (erf) GELU, $\text{GELU}(x) = x \Phi(x) = \tfrac{x}{2}\big(1 + \operatorname{erf}(x/\sqrt2)\big)$.
/// Returns $y$ and $\Phi(x)$.
pub fn gelu_forward(x: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let n = x.len();
    let mut y: Vec<f32> = Vec::with_capacity(n);
    let mut cdf: Vec<f32> = Vec::with_capacity(n);
    y.spare_capacity_mut()[..n]
        .par_chunks_mut(CHUNK)
        .zip(cdf.spare_capacity_mut()[..n].par_chunks_mut(CHUNK))
        .zip(x.par_chunks(CHUNK))
        .for_each(|((y, c), x)| gelu_slice(x, y, c));
    // SAFETY: gelu_slice wrote every element of every chunk of both.
    unsafe {
        y.set_len(n);
        cdf.set_len(n);
    }
    (y, cdf)
}

/// $\partial x = \partial y \, \big(\Phi(x) + x\varphi(x)\big)$, from the forward's $\Phi(x)$.
pub fn gelu_backward(x: &[f32], cdf: &[f32], dy: &[f32]) -> Vec<f32> {
    par_collect(x.len(), |i, dx| {
        let at = i * CHUNK..(i * CHUNK + dx.len());
        gelu_backward_slice(&x[at.clone()], &cdf[at.clone()], &dy[at], dx);
    })
}

#[cfg(test)]
mod tests {
    use super::super::testing::{assert_close, erfc, values};
    use super::*;

    /// [`gelu_forward`] and [`gelu_backward`] against $x\,\tfrac12\operatorname{erfc}(-x/\sqrt2)$
    /// and $\partial y\,(\Phi(x) + x\varphi(x))$ in `f64`, on $2 \cdot$ `CHUNK` $+ 77$ values
    /// over $[-8, 8]$ (the last parallel chunk partial). Error at most 1e-6 of the largest
    /// value (the CDF's own absolute error is below $3.5 \cdot 10^{-7}$).
    #[test]
    fn gelu_matches_erf_formula() {
        let n = 2 * CHUNK + 77;
        let x = values(n, 1, 8.0);
        let dy = values(n, 2, 1.0);
        let cdf: Vec<f64> = x
            .iter()
            .map(|&x| 0.5 * erfc(-f64::from(x) / std::f64::consts::SQRT_2))
            .collect();
        let want_y: Vec<f64> = x.iter().zip(&cdf).map(|(&x, c)| f64::from(x) * c).collect();
        let want_dx: Vec<f64> = x
            .iter()
            .zip(&cdf)
            .zip(&dy)
            .map(|((&x, c), &g)| {
                let x = f64::from(x);
                let pdf = (-0.5 * x * x).exp() / (2.0 * std::f64::consts::PI).sqrt();
                f64::from(g) * (c + x * pdf)
            })
            .collect();
        let (y, got_cdf) = gelu_forward(&x);
        assert_close("gelu", &y, &want_y, 1e-6);
        assert_close("gelu cdf", &got_cdf, &cdf, 1e-6);
        let dx = gelu_backward(&x, &got_cdf, &dy);
        assert_close("gelu dx", &dx, &want_dx, 1e-6);
    }
}
