//! # Sinusoidal absolute position encoding
//!
//! Vaswani et al. 2017, "Attention Is All You Need" (<https://arxiv.org/abs/1706.03762>), §3.5.
//!
//! Each position $p$ gets a fixed vector of sines and cosines whose frequencies fall
//! geometrically from 1 to $1/\text{base}$ across the dimensions. Low dimensions turn fast
//! (they tell neighbours apart), high ones slowly (they tell far-apart regions apart), like
//! the hands of a clock. Because $\sin$ and $\cos$ of $(p+k)\omega$ are a rotation of those of
//! $p\omega$, the encoding of $p+k$ is a fixed linear map of the encoding of $p$
//! ([`offset_rotation`]), and $\mathrm{PE}(p)\cdot\mathrm{PE}(q)$ depends only on $p-q$.
//!
//! With $\omega_i = \text{base}^{-2i/d}$, $i = 0..d/2$, the **interleaved** layout (the paper's) is
//!
//! ```math
//! \mathrm{PE}(p, 2i) = \sin(p\ \omega_i), \qquad \mathrm{PE}(p, 2i+1) = \cos(p\ \omega_i)
//! ```
//!
//! and the **concatenated** layout of Transformer-XL (fairseq's layout too, with
//! $\omega_i = 10000^{-i/(d/2-1)}$) is
//! $[\sin(p\ \omega_0), \dots, \sin(p\ \omega_{d/2-1}), \cos(p\ \omega_0), \dots]$.
//!
//! Derived step by step, checked and plotted in `notebooks/01_absolute.ipynb`.

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::{ensure_queries_fit, PositionScheme};
use crate::error::{ensure, ensure_even, ensure_shape, Result};

/// The paper's base, 10000.
pub const DEFAULT_BASE: f64 = 10_000.0;

/// How the sines and cosines are laid out along the feature axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum SinusoidalLayout {
    /// $[\sin p\omega_0, \cos p\omega_0, \sin p\omega_1, \cos p\omega_1, \dots]$ (Vaswani et al.).
    #[default]
    Interleaved,
    /// $[\sin p\omega_0, \dots, \sin p\omega_{d/2-1}, \cos p\omega_0, \dots]$ (Transformer-XL, fairseq).
    Concatenated,
}

impl SinusoidalLayout {
    /// Both layouts.
    pub const ALL: [SinusoidalLayout; 2] = [
        SinusoidalLayout::Interleaved,
        SinusoidalLayout::Concatenated,
    ];

    /// One line on the layout, for help texts.
    pub fn summary(&self) -> &'static str {
        match self {
            SinusoidalLayout::Interleaved => {
                "[sin, cos, sin, cos, ...] per frequency (Vaswani et al.)"
            }
            SinusoidalLayout::Concatenated => "[sin ..., cos ...] halves (Transformer-XL, fairseq)",
        }
    }

    /// `interleaved` or `concatenated`.
    pub fn name(&self) -> &'static str {
        match self {
            SinusoidalLayout::Interleaved => "interleaved",
            SinusoidalLayout::Concatenated => "concatenated",
        }
    }
}

crate::named::named!(SinusoidalLayout, "layout");

/// Frequencies $\omega_i = \text{base}^{-2i/d}$ for $i = 0..d/2$.
///
/// # Errors
/// When `dim` is odd or zero, or `base` is not above 1.
pub fn frequencies(dim: usize, base: f64) -> Result<Vec<f64>> {
    ensure_even("dim", dim)?;
    ensure(
        base.is_finite() && base > 1.0,
        "base",
        base,
        "a finite number > 1",
    )?;
    Ok((0..dim / 2)
        .map(|i| base.powf(-((2 * i) as f64) / dim as f64))
        .collect())
}

/// The encoding of arbitrary (possibly fractional or negative) positions, `[positions, dim]`.
///
/// # Errors
/// When `dim` is odd or zero, or `base` is not above 1.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// // position 2, d = 4: (sin 2, cos 2, sin 0.02, cos 0.02)
/// let pe = sinusoidal_embedding(&[2.0], 4, 10_000.0, SinusoidalLayout::Interleaved)?;
/// assert!((pe[[0, 2]] - 0.02f32.sin()).abs() < 1e-7);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn sinusoidal_embedding(
    positions: &[f64],
    dim: usize,
    base: f64,
    layout: SinusoidalLayout,
) -> Result<Array2<f32>> {
    let omega = frequencies(dim, base)?;
    let half = dim / 2;
    let mut table = Array2::zeros((positions.len(), dim));
    for (row, &p) in positions.iter().enumerate() {
        for (i, &w) in omega.iter().enumerate() {
            // p * omega_i
            let angle = p * w;
            let (sin_col, cos_col) = match layout {
                SinusoidalLayout::Interleaved => (2 * i, 2 * i + 1),
                SinusoidalLayout::Concatenated => (i, half + i),
            };
            table[[row, sin_col]] = angle.sin() as f32;
            table[[row, cos_col]] = angle.cos() as f32;
        }
    }
    Ok(table)
}

/// The paper's table for positions `0..positions`: interleaved layout, base 10000,
/// `[positions, dim]`.
///
/// # Errors
/// When `dim` is odd or zero.
pub fn sinusoidal_table(positions: usize, dim: usize) -> Result<Array2<f32>> {
    let p: Vec<f64> = (0..positions).map(|p| p as f64).collect();
    sinusoidal_embedding(&p, dim, DEFAULT_BASE, SinusoidalLayout::Interleaved)
}

/// The fixed linear map $M_k$ with $\mathrm{PE}(p+k) = M_k\ \mathrm{PE}(p)$ for every $p$
/// (interleaved layout): block-diagonal, one $2\times2$ block per frequency,
///
/// ```math
/// \begin{pmatrix}\sin (p+k)\omega \\ \cos (p+k)\omega\end{pmatrix} =
/// \begin{pmatrix}\cos k\omega & \sin k\omega \\ -\sin k\omega & \cos k\omega\end{pmatrix}
/// \begin{pmatrix}\sin p\omega \\ \cos p\omega\end{pmatrix}.
/// ```
///
/// # Errors
/// When `dim` is odd or zero, or `base` is not above 1.
pub fn offset_rotation(k: f64, dim: usize, base: f64) -> Result<Array2<f32>> {
    let omega = frequencies(dim, base)?;
    let mut m = Array2::zeros((dim, dim));
    for (i, &w) in omega.iter().enumerate() {
        let (s, c) = ((k * w).sin() as f32, (k * w).cos() as f32);
        m[[2 * i, 2 * i]] = c;
        m[[2 * i, 2 * i + 1]] = s;
        m[[2 * i + 1, 2 * i]] = -s;
        m[[2 * i + 1, 2 * i + 1]] = c;
    }
    Ok(m)
}

/// Sinusoidal absolute encoding as an attention scheme: with identity projections,
/// $q'_i = q_i + \mathrm{PE}(i)$ and $k'_j = k_j + \mathrm{PE}(j)$ (positions per the
/// convention of [`query_position`](super::query_position)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SinusoidalAbsolute {
    /// Model (and head) width $d$; even.
    pub dim: usize,
    /// Frequency base; default 10000.
    pub base: f64,
    /// Feature layout; default interleaved.
    pub layout: SinusoidalLayout,
}

impl SinusoidalAbsolute {
    /// The paper's configuration for width `dim`.
    ///
    /// # Errors
    /// When `dim` is odd or zero.
    pub fn new(dim: usize) -> Result<Self> {
        frequencies(dim, DEFAULT_BASE)?;
        Ok(Self {
            dim,
            base: DEFAULT_BASE,
            layout: SinusoidalLayout::Interleaved,
        })
    }

    /// The table for positions `0..len`.
    ///
    /// # Errors
    /// When the configuration is invalid.
    pub fn table(&self, len: usize) -> Result<Array2<f32>> {
        let p: Vec<f64> = (0..len).map(|p| p as f64).collect();
        sinusoidal_embedding(&p, self.dim, self.base, self.layout)
    }
}

impl PositionScheme for SinusoidalAbsolute {
    fn name(&self) -> String {
        "sinusoidal".into()
    }

    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        ensure_shape("sinusoidal: q width", &[self.dim], &[q.ncols()])?;
        ensure_shape("sinusoidal: k width", &[self.dim], &[k.ncols()])?;
        let (lq, lk) = (q.nrows(), k.nrows());
        ensure_queries_fit(lq, lk)?;
        let pe = self.table(lk)?;
        let q = &q + &pe.slice(ndarray::s![lk - lq.., ..]);
        let k = &k + &pe;
        Ok((q, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn worked_example_position_2_dim_4() {
        let pe = sinusoidal_table(3, 4).unwrap();
        let expected = [2f32.sin(), 2f32.cos(), 0.02f32.sin(), 0.02f32.cos()];
        for (c, e) in expected.iter().enumerate() {
            assert!((pe[[2, c]] - e).abs() < 1e-7, "column {c}");
        }
        // position 0 is (0, 1, 0, 1)
        assert_eq!(pe.row(0).to_vec(), vec![0.0, 1.0, 0.0, 1.0]);
    }

    #[test]
    fn layouts_hold_the_same_numbers() {
        let p = [0.0, 1.0, 5.5, -3.0];
        let a = sinusoidal_embedding(&p, 8, 10_000.0, SinusoidalLayout::Interleaved).unwrap();
        let b = sinusoidal_embedding(&p, 8, 10_000.0, SinusoidalLayout::Concatenated).unwrap();
        for r in 0..p.len() {
            for i in 0..4 {
                assert_eq!(a[[r, 2 * i]], b[[r, i]]);
                assert_eq!(a[[r, 2 * i + 1]], b[[r, 4 + i]]);
            }
        }
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(sinusoidal_table(4, 7).is_err());
        assert!(sinusoidal_table(4, 0).is_err());
        assert!(frequencies(4, 1.0).is_err());
        assert!(frequencies(4, f64::NAN).is_err());
        assert!(SinusoidalAbsolute::new(5).is_err());
        // more queries than keys, or keys of another width: errors, not a broadcast panic
        let pe = SinusoidalAbsolute::new(4).unwrap();
        let (q3, k2, k_wide) = (
            Array2::zeros((3, 4)),
            Array2::zeros((2, 4)),
            Array2::zeros((3, 6)),
        );
        assert!(pe.transform_qk(q3.view(), k2.view()).is_err());
        assert!(pe.transform_qk(q3.view(), k_wide.view()).is_err());
        assert!(pe.transform_qk(k2.view(), q3.view()).is_ok());
    }

    proptest! {
        #[test]
        fn dot_product_depends_only_on_offset(p in 0.0f64..2000.0, q in 0.0f64..2000.0, shift in -500.0f64..500.0) {
            let pe = sinusoidal_embedding(&[p, q, p + shift, q + shift], 64, 10_000.0, SinusoidalLayout::Interleaved).unwrap();
            let d1 = pe.row(0).dot(&pe.row(1));
            let d2 = pe.row(2).dot(&pe.row(3));
            prop_assert!((d1 - d2).abs() < 1e-3, "{} vs {}", d1, d2);
        }

        #[test]
        fn shifted_encoding_is_a_fixed_linear_map(p in -1000.0f64..1000.0, k in -300.0f64..300.0) {
            let pe = sinusoidal_embedding(&[p, p + k], 32, 10_000.0, SinusoidalLayout::Interleaved).unwrap();
            let m = offset_rotation(k, 32, 10_000.0).unwrap();
            let mapped = m.dot(&pe.row(0));
            for (a, b) in mapped.iter().zip(pe.row(1).iter()) {
                prop_assert!((a - b).abs() < 1e-4, "{} vs {}", a, b);
            }
        }
    }
}
