//! # ALiBi — attention with linear biases
//!
//! Press, Smith, Lewis 2022, "Train Short, Test Long: Attention with Linear Biases Enables
//! Input Length Extrapolation" (<https://arxiv.org/abs/2108.12409>); reference code:
//! ofirpress/attention_with_linear_biases (`get_slopes`), Hugging Face
//! `models/bloom` (`build_alibi_tensor`).
//!
//! No position vectors at all: each head subtracts from every logit a penalty proportional to
//! the distance, with a head-specific slope $m_h$. Slopes form a geometric sequence, so some
//! heads look far and some only at their neighbours; nothing in the bias depends on the
//! training length, which is why the model keeps working on longer inputs.
//!
//! For $n$ heads, a power of two, $m_h = 2^{-8h/n}$ for $h = 1..n$. Otherwise, with
//! $c = 2^{\lfloor \log_2 n \rfloor}$, the first $c$ slopes are those for $c$ heads and the
//! remaining $n - c$ are the odd-indexed ones ($h = 1, 3, 5, \dots$) of the slopes for $2c$
//! heads. The bias is
//!
//! ```math
//! b^{(h)}_{ij} = -m_h\ |i - j|
//! ```
//!
//! (for causal attention, $-m_h (i - j)$; Bloom adds $m_h\ j$ instead, which differs by a
//! per-row constant and so gives the same softmax).
//!
//! Derived step by step, checked and plotted in `notebooks/09_alibi_and_beyond.ipynb`.

use ndarray::{Array2, Array3};
use serde::{Deserialize, Serialize};

use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, Result};

/// Most heads [`alibi_slopes`] computes slopes for (a bound that keeps a typo from running for
/// hours or allocating gigabytes).
pub const MAX_HEADS: usize = 65_536;

/// The slope base for a power-of-two head count $c$: $2^{-8/c}$, rounded to `f32` first
/// as Bloom does.
fn power_of_two_base(c: usize) -> f32 {
    let exponent = -(2f64.powf(-((c as f64).log2() - 3.0)));
    2f64.powf(exponent) as f32
}

/// ALiBi slopes $m_1, \dots, m_n$ for `heads` heads (any count, power of two or not).
///
/// # Errors
/// When `heads` is 0 or above [`MAX_HEADS`].
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// assert_eq!(alibi_slopes(8)?, vec![0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625]);
/// assert_eq!(alibi_slopes(3)?.len(), 3);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn alibi_slopes(heads: usize) -> Result<Vec<f32>> {
    ensure(
        (1..=MAX_HEADS).contains(&heads),
        "heads",
        heads,
        &format!("1 to {MAX_HEADS}"),
    )?;
    // c = 2^floor(log2 n)
    let closest = 1usize << (usize::BITS - 1 - heads.leading_zeros());
    let base = power_of_two_base(closest);
    // m_h = base^h, h = 1..c
    let mut slopes: Vec<f32> = (1..=closest).map(|h| base.powf(h as f32)).collect();
    if closest != heads {
        // odd powers of the base for 2c heads
        let extra_base = power_of_two_base(2 * closest);
        let remaining = heads - closest;
        slopes.extend((0..remaining).map(|i| extra_base.powf((2 * i + 1) as f32)));
    }
    Ok(slopes)
}

/// The bias of every head, $b^{(h)}_{ij} = -m_h |i - j|$, `[H, Lq, Lk]`.
///
/// # Errors
/// When `heads` is 0 or above [`MAX_HEADS`], or `lq > lk`.
pub fn alibi_bias(heads: usize, lq: usize, lk: usize) -> Result<Array3<f32>> {
    let alibi = Alibi::new(heads)?;
    ensure_queries_fit(lq, lk)?;
    Ok(Array3::from_shape_fn((heads, lq, lk), |(h, i, j)| {
        alibi.bias_at(h, query_position(i, lq, lk), j)
    }))
}

/// ALiBi as an attention scheme.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alibi {
    /// $m_h$ per head.
    pub slopes: Vec<f32>,
}

impl Alibi {
    /// The paper's slopes for `heads` heads.
    ///
    /// # Errors
    /// When `heads` is 0 or above [`MAX_HEADS`].
    pub fn new(heads: usize) -> Result<Self> {
        Ok(Self {
            slopes: alibi_slopes(heads)?,
        })
    }

    /// Given slopes (e.g. learned ones).
    ///
    /// # Errors
    /// When there is no slope or one is negative or not finite.
    pub fn from_slopes(slopes: Vec<f32>) -> Result<Self> {
        ensure(!slopes.is_empty(), "heads", 0, "at least 1")?;
        for &m in &slopes {
            ensure(
                m.is_finite() && m >= 0.0,
                "slope",
                m,
                "a finite number >= 0",
            )?;
        }
        Ok(Self { slopes })
    }

    /// $-m_h |p_q - p_k|$ for a query at position `query` and a key at `key`.
    fn bias_at(&self, head: usize, query: usize, key: usize) -> f32 {
        -self.slopes[head] * query.abs_diff(key) as f32
    }

    /// The bias of every head at every distance $d = 0..L$ from a query to an earlier key,
    /// $-m_h d$, `[H, L]`: all that causal attention needs, linear in $L$.
    ///
    /// # Examples
    /// ```
    /// use posenc::prelude::*;
    /// let alibi = Alibi::new(2)?;
    /// // slopes 2^(-8/2) = 1/16 and 2^(-16/2) = 1/256
    /// let expected = array![[0.0, -0.0625, -0.125], [0.0, -0.00390625, -0.0078125]];
    /// assert_eq!(alibi.distance_bias(3), expected);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn distance_bias(&self, len: usize) -> Array2<f32> {
        Array2::from_shape_fn((self.slopes.len(), len), |(h, d)| self.bias_at(h, d, 0))
    }

    /// $b^{(h)}_{ij}$ for one head, `[Lq, Lk]`.
    ///
    /// # Errors
    /// When `head` is out of range or `lq > lk`.
    pub fn bias(&self, head: usize, lq: usize, lk: usize) -> Result<Array2<f32>> {
        let heads = self.slopes.len();
        ensure(head < heads, "head", head, &format!("0..{heads}"))?;
        ensure_queries_fit(lq, lk)?;
        Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
            self.bias_at(head, query_position(i, lq, lk), j)
        }))
    }
}

impl PositionScheme for Alibi {
    fn name(&self) -> String {
        "alibi".into()
    }

    fn score_bias(&self, head: usize, lq: usize, lk: usize) -> Result<Option<Array2<f32>>> {
        self.bias(head, lq, lk).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn slopes_for_non_powers_of_two_interleave() {
        // 6 heads: 4-head slopes, then 8-head slopes 1 and 3
        let s6 = alibi_slopes(6).unwrap();
        let s4 = alibi_slopes(4).unwrap();
        let s8 = alibi_slopes(8).unwrap();
        assert_eq!(&s6[..4], &s4[..]);
        assert_eq!(s6[4], s8[0]);
        assert_eq!(s6[5], s8[2]);
        assert_eq!(alibi_slopes(1).unwrap(), vec![2f32.powi(-8)]);
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(alibi_slopes(0).is_err());
        assert_eq!(alibi_slopes(MAX_HEADS).unwrap().len(), MAX_HEADS);
        for heads in [MAX_HEADS + 1, 1 << 32, usize::MAX] {
            let e = alibi_slopes(heads).unwrap_err().to_string();
            assert!(e.contains(&format!("1 to {MAX_HEADS}")), "{e}");
        }
        assert!(alibi_bias(2, 3, 2).is_err());
        assert!(Alibi::from_slopes(vec![]).is_err());
        assert!(Alibi::from_slopes(vec![-0.5]).is_err());
        assert!(Alibi::new(2).unwrap().bias(2, 1, 1).is_err());
    }

    proptest! {
        #[test]
        fn bias_is_minus_slope_times_distance(heads in 1usize..48, lq in 1usize..12, extra in 0usize..6) {
            let lk = lq + extra;
            let slopes = alibi_slopes(heads).unwrap();
            let bias = alibi_bias(heads, lq, lk).unwrap();
            for ((h, i, j), &b) in bias.indexed_iter() {
                let d = ((extra + i) as f32 - j as f32).abs();
                prop_assert_eq!(b, -slopes[h] * d);
            }
            // slopes are positive, below 1, and distinct
            for (a, m) in slopes.iter().enumerate() {
                prop_assert!(*m > 0.0 && *m < 1.0);
                prop_assert!(slopes[a + 1..].iter().all(|x| x != m));
            }
        }
    }
}
