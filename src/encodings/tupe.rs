//! # TUPE — Transformer with untied positional encoding
//!
//! Ke et al. 2020, "Rethinking Positional Encoding in Language Pre-training"
//! (<https://arxiv.org/abs/2006.15595>).
//!
//! BERT adds position embeddings to word embeddings, so one projection serves both and
//! $(x_i + p_i)W^Q \big((x_j + p_j)W^K\big)^\top$ expands into four terms: content-content,
//! position-position and two mixed content-position terms. The paper finds the mixed terms carry
//! little beyond noise, and that words and positions are different kinds of information that
//! should not share a projection. TUPE therefore **unties** them: the position-position term gets
//! its own projections $U^Q, U^K$, the mixed terms are dropped, both remaining terms are scaled by
//! $1/\sqrt{2d}$ to keep the variance of the sum, and a T5-style relative bucket bias is added:
//!
//! ```math
//! \alpha_{ij} = \frac{1}{\sqrt{2d}}\ (x_i W^Q)(x_j W^K)^\top
//! + \frac{1}{\sqrt{2d}}\ (p_i U^Q)(p_j U^K)^\top + b_{j-i}.
//! ```
//!
//! The paper also unties the `[CLS]` token from positions: in the position term, the row of
//! `[CLS]` (at position 0) and the column of every token attending to it are replaced by two
//! learned scalars, so that `[CLS]`, which summarises the whole sequence, is not drawn to its
//! neighbours ([`reset_cls`]). A causal byte model has no `[CLS]`, so [`Tupe`] itself leaves the
//! reset out, as it does per-head $U$ (one pair of projections serves every head here).
//!
//! Derived step by step, checked and plotted in `notebooks/06_deberta_tupe.ipynb`.

use ndarray::{s, Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, PositionScheme};
use crate::encodings::t5::T5Bias;
use crate::error::{ensure, ensure_shape, Error, Result};

/// TUPE's position term $(p_i U^Q)(p_j U^K)^\top$ with an optional T5 bias $b_{j-i}$.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tupe {
    /// Absolute position embeddings $p$, `[max_len, d_model]`; row $i$ is position $i$.
    pub positions: Array2<f32>,
    /// Query projection of positions $U^Q$, `[d_model, d]` ($d$ the head width).
    pub u_q: Array2<f32>,
    /// Key projection of positions $U^K$, `[d_model, d]`.
    pub u_k: Array2<f32>,
    /// The relative bias $b_{j-i}$ (T5 buckets), if any.
    pub bias: Option<T5Bias>,
}

impl Tupe {
    /// TUPE with random parameters from a ChaCha RNG seeded by `seed`:
    /// $p \sim \mathcal N(0, 1)$ (like a layer-normalised embedding) and
    /// $U^Q, U^K \sim \mathcal N(0, 1/d_\text{model})$, so each entry of $pU$ has unit variance
    /// and the position term the same scale as the content term $q\cdot k$.
    ///
    /// # Errors
    /// When `max_len`, `d_model` or `head_dim` is zero.
    ///
    /// # Examples
    /// ```
    /// use posenc::prelude::*;
    /// let tupe = Tupe::new(64, 16, 8, 0, Some(T5Bias::new(32, 128, true, 2, 0)?))?;
    /// assert_eq!(tupe.position_term(3, 5)?.dim(), (3, 5));
    /// assert_eq!(tupe.score_scale(8), 0.25); // 1 / sqrt(2 * 8)
    /// assert!(tupe.position_term(3, 65).is_err()); // past the 64 positions
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn new(
        max_len: usize,
        d_model: usize,
        head_dim: usize,
        seed: u64,
        relative_bias: Option<T5Bias>,
    ) -> Result<Self> {
        ensure(max_len >= 1, "max_len", max_len, ">= 1")?;
        ensure(d_model >= 1, "d_model", d_model, ">= 1")?;
        ensure(head_dim >= 1, "head_dim", head_dim, ">= 1")?;
        let mut init = Seeded::new(seed);
        // p ~ N(0, 1), [max_len, d_model]
        let positions = init.normal((max_len, d_model), 1.0)?;
        // U ~ N(0, 1/d_model), [d_model, d]
        let std_u = 1.0 / (d_model as f32).sqrt();
        let u_q = init.normal((d_model, head_dim), std_u)?;
        let u_k = init.normal((d_model, head_dim), std_u)?;
        Self::from_parts(positions, u_q, u_k, relative_bias)
    }

    /// TUPE with given (e.g. trained) parameters.
    ///
    /// # Errors
    /// When a dimension is zero or the shapes do not fit (`positions` `[max_len, d_model]`,
    /// `u_q` and `u_k` `[d_model, d]`).
    pub fn from_parts(
        positions: Array2<f32>,
        u_q: Array2<f32>,
        u_k: Array2<f32>,
        bias: Option<T5Bias>,
    ) -> Result<Self> {
        let tupe = Self {
            positions,
            u_q,
            u_k,
            bias,
        };
        tupe.validate()?;
        Ok(tupe)
    }

    /// Checks the shapes (fields are public, e.g. for deserialisation).
    ///
    /// # Errors
    /// As [`Tupe::from_parts`].
    pub fn validate(&self) -> Result<()> {
        let (max_len, d_model) = self.positions.dim();
        ensure(max_len >= 1, "max_len", max_len, ">= 1")?;
        ensure(d_model >= 1, "d_model", d_model, ">= 1")?;
        ensure(self.head_dim() >= 1, "head_dim", self.head_dim(), ">= 1")?;
        ensure_shape("tupe: u_q", &[d_model, self.head_dim()], self.u_q.shape())?;
        ensure_shape("tupe: u_k", &[d_model, self.head_dim()], self.u_k.shape())
    }

    /// Number of positions the table covers (valid positions are `0..max_len`).
    pub fn max_len(&self) -> usize {
        self.positions.nrows()
    }

    /// Head width $d$.
    pub fn head_dim(&self) -> usize {
        self.u_q.ncols()
    }

    /// The unscaled position term $(p_i U^Q)(p_j U^K)^\top$, `[lq, lk]`, queries at
    /// $L_k - L_q + i$ and keys at $j$ (the convention of [`query_position`](super::query_position)).
    ///
    /// # Errors
    /// [`Error::PositionOutOfRange`] when `lk > max_len`; also when `lq > lk` or the shapes are
    /// invalid.
    pub fn position_term(&self, lq: usize, lk: usize) -> Result<Array2<f32>> {
        self.validate()?;
        ensure_queries_fit(lq, lk)?;
        if lk > self.max_len() {
            return Err(Error::PositionOutOfRange {
                context: "TUPE position table",
                position: lk - 1,
                len: self.max_len(),
            });
        }
        // p_i U^Q for the last lq positions, [Lq, d]
        let pq = self.positions.slice(s![lk - lq..lk, ..]).dot(&self.u_q);
        // p_j U^K, [Lk, d]
        let pk = self.positions.slice(s![..lk, ..]).dot(&self.u_k);
        // (p_i U^Q)(p_j U^K)^T, [Lq, Lk]
        Ok(pq.dot(&pk.t()))
    }
}

/// TUPE's `[CLS]` reset of a square position term $v$ (queries and keys at the same positions,
/// `[CLS]` at position 0): its row becomes $\theta_1$ (`[CLS]` attending to every token), the
/// rest of its column $\theta_2$ (every other token attending to `[CLS]`):
///
/// ```math
/// \operatorname{reset}_\theta(v)_{ij} = \begin{cases} \theta_1 & i = 0 \\
/// \theta_2 & i \ne 0,\ j = 0 \\ v_{ij} & \text{otherwise.} \end{cases}
/// ```
///
/// # Errors
/// When `term` is empty or not square.
///
/// # Examples
/// ```
/// use posenc::encodings::tupe::reset_cls;
/// let v = ndarray::array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]];
/// let reset = reset_cls(v.view(), -1.0, -2.0)?;
/// assert_eq!(reset, ndarray::array![[-1.0, -1.0, -1.0], [-2.0, 5.0, 6.0], [-2.0, 8.0, 9.0]]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn reset_cls(term: ArrayView2<f32>, theta_1: f32, theta_2: f32) -> Result<Array2<f32>> {
    let (lq, lk) = term.dim();
    ensure(
        lq >= 1 && lq == lk,
        "position term",
        format!("[{lq}, {lk}]"),
        "a square matrix (queries and keys at the same positions, [CLS] first)",
    )?;
    let mut reset = term.to_owned();
    // theta_1 on the [CLS] row, theta_2 on the rest of its column
    reset.row_mut(0).fill(theta_1);
    reset.slice_mut(s![1.., 0]).fill(theta_2);
    Ok(reset)
}

/// The scale of content and position scores, $1/\sqrt{2d}$ for content and position term alike.
pub fn score_scale(head_dim: usize) -> f32 {
    1.0 / (2.0 * head_dim as f32).sqrt()
}

impl PositionScheme for Tupe {
    fn name(&self) -> String {
        match self.bias {
            Some(_) => "tupe (+ t5 bias)".into(),
            None => "tupe".into(),
        }
    }

    /// [`score_scale`].
    fn score_scale(&self, head_dim: usize) -> f32 {
        score_scale(head_dim)
    }

    fn score_term(
        &self,
        _head: usize,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        // the scale 1/sqrt(2d) uses q's width: it must be the d of U
        ensure_shape("tupe: q width", &[self.head_dim()], &[q.ncols()])?;
        self.position_term(q.nrows(), k.nrows()).map(Some)
    }

    fn score_bias(&self, head: usize, lq: usize, lk: usize) -> Result<Option<Array2<f32>>> {
        self.bias.as_ref().map(|b| b.bias(head, lq, lk)).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reset_cls_replaces_the_cls_row_and_column_only() {
        let term = Array2::from_shape_fn((4, 4), |(i, j)| (10 * i + j) as f32);
        let reset = reset_cls(term.view(), 0.5, -0.5).unwrap();
        for ((i, j), &v) in reset.indexed_iter() {
            let want = if i == 0 {
                0.5
            } else if j == 0 {
                -0.5
            } else {
                term[[i, j]]
            };
            assert_eq!(v, want, "({i}, {j})");
        }
        assert!(reset_cls(Array2::<f32>::zeros((2, 3)).view(), 0.0, 0.0).is_err());
        assert!(reset_cls(Array2::<f32>::zeros((0, 0)).view(), 0.0, 0.0).is_err());
    }
    use crate::attention::attention;
    use crate::encodings::init::seeded_normal;

    /// Oracle: $\sum_{a,b,c} p_{ia} U^Q_{ac}\  p_{jb} U^K_{bc}$.
    fn naive_position_term(t: &Tupe, lq: usize, lk: usize) -> Array2<f32> {
        let (d_model, d) = t.u_q.dim();
        let mut out = Array2::zeros((lq, lk));
        for i in 0..lq {
            let pi = lk - lq + i;
            for j in 0..lk {
                let mut acc = 0.0f64;
                for c in 0..d {
                    let (mut qc, mut kc) = (0.0f64, 0.0f64);
                    for a in 0..d_model {
                        qc += (t.positions[[pi, a]] * t.u_q[[a, c]]) as f64;
                        kc += (t.positions[[j, a]] * t.u_k[[a, c]]) as f64;
                    }
                    acc += qc * kc;
                }
                out[[i, j]] = acc as f32;
            }
        }
        out
    }

    fn random((rows, cols): (usize, usize), seed: u64) -> Array2<f32> {
        seeded_normal(rows, cols, seed)
    }

    #[test]
    fn position_term_equals_the_loop() {
        let t = Tupe::new(20, 12, 4, 1, None).unwrap();
        for (lq, lk) in [(7, 7), (2, 9), (1, 20)] {
            let (a, b) = (
                t.position_term(lq, lk).unwrap(),
                naive_position_term(&t, lq, lk),
            );
            for (x, y) in a.iter().zip(b.iter()) {
                assert!(
                    (x - y).abs() < 1e-4 * (1.0 + y.abs()),
                    "{lq}x{lk}: {x} vs {y}"
                );
            }
        }
    }

    #[test]
    fn attention_scores_equal_the_hand_assembled_formula() {
        let d = 8;
        let t5 = T5Bias::new(16, 64, true, 3, 2).unwrap();
        let t = Tupe::new(32, 16, d, 3, Some(t5.clone())).unwrap();
        let (q, k, v) = (random((4, d), 4), random((6, d), 5), random((6, d), 6));
        for causal in [false, true] {
            let out = attention(q.view(), k.view(), v.view(), &t, 2, causal).unwrap();
            let c = 1.0 / (2.0 * d as f32).sqrt();
            // content / sqrt(2d) + position / sqrt(2d) + b_{j-i}
            let expected =
                q.dot(&k.t()) * c + t.position_term(4, 6).unwrap() * c + t5.bias(2, 4, 6).unwrap();
            for ((i, j), &s) in out.scores.indexed_iter() {
                if causal && j > 2 + i {
                    assert_eq!(s, f32::NEG_INFINITY);
                } else {
                    assert!(
                        (s - expected[[i, j]]).abs() < 1e-4,
                        "({i}, {j}): {s} vs {}",
                        expected[[i, j]]
                    );
                }
            }
        }
    }

    #[test]
    fn projected_positions_have_unit_variance() {
        let t = Tupe::new(256, 256, 64, 9, None).unwrap();
        let pu = t.positions.dot(&t.u_q);
        let var = pu.iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / pu.len() as f64;
        assert!((var - 1.0).abs() < 0.1, "variance {var}");
    }

    #[test]
    fn without_bias_only_the_position_term_is_added() {
        let t = Tupe::new(8, 4, 2, 0, None).unwrap();
        assert_eq!(t.score_bias(0, 3, 3).unwrap(), None);
        assert_eq!(t.name(), "tupe");
        assert_eq!(Tupe::new(8, 4, 2, 0, None).unwrap(), t); // seeded
        assert_ne!(Tupe::new(8, 4, 2, 1, None).unwrap(), t);
    }

    proptest::proptest! {
        #[test]
        fn fewer_queries_give_the_last_rows(seed in 0u64..100, lk in 1usize..16, drop in 0usize..16) {
            let t = Tupe::new(16, 6, 3, seed, None).unwrap();
            let lq = lk - drop.min(lk - 1);
            let full = t.position_term(lk, lk).unwrap();
            let part = t.position_term(lq, lk).unwrap();
            for (x, y) in part.iter().zip(full.slice(s![lk - lq.., ..]).iter()) {
                proptest::prop_assert!((x - y).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(Tupe::new(0, 4, 2, 0, None).is_err());
        assert!(Tupe::new(8, 0, 2, 0, None).is_err());
        assert!(Tupe::new(8, 4, 0, 0, None).is_err());
        let t = Tupe::new(8, 4, 2, 0, Some(T5Bias::new(8, 16, true, 1, 0).unwrap())).unwrap();
        assert_eq!(
            t.position_term(2, 9).unwrap_err(),
            Error::PositionOutOfRange {
                context: "TUPE position table",
                position: 8,
                len: 8
            }
        );
        assert!(t.position_term(4, 3).is_err());
        let q = Array2::<f32>::zeros((2, 3));
        assert!(t.score_term(0, q.view(), q.view()).is_err());
        assert!(t.score_bias(1, 2, 2).is_err()); // the T5 bias has one head
        let p = Array2::<f32>::zeros((8, 4));
        let parts = |u_q: (usize, usize), u_k: (usize, usize)| {
            Tupe::from_parts(p.clone(), Array2::zeros(u_q), Array2::zeros(u_k), None)
        };
        // U^K of another height, of another width, no column
        assert!(parts((4, 2), (3, 2)).is_err());
        assert!(parts((4, 2), (4, 3)).is_err());
        assert!(parts((4, 0), (4, 0)).is_err());
        assert!(parts((4, 2), (4, 2)).is_ok());
    }
}
