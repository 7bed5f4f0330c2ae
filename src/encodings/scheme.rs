//! What a position scheme changes in attention ([`PositionScheme`]) and where queries sit
//! ([`query_position`]): the interface every encoding implements and the reference
//! [`crate::attention::attention`] composes.
//!
//! **Position convention.** Keys sit at positions $0..L_k$ and queries at the *last* $L_q$
//! positions, $L_k - L_q + i$ (as with a cache or Transformer-XL memory).

use ndarray::{Array2, ArrayView2};

use crate::error::{ensure, Result};

/// Position of query row `i` when `lq` queries attend to `lk` keys (queries aligned to the end).
pub fn query_position(i: usize, lq: usize, lk: usize) -> usize {
    lk - lq + i
}

/// Checks that `lq` queries fit the `lk` keys they attend to: the queries are the last `lq`
/// of the `lk` positions ([`query_position`]), so $L_q \le L_k$.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] naming `Lq` when `lq > lk`.
pub(crate) fn ensure_queries_fit(lq: usize, lk: usize) -> Result<()> {
    ensure(
        lq <= lk,
        "Lq",
        lq,
        &format!("at most Lk = {lk} (queries are the last Lq positions)"),
    )
}

/// What a position scheme changes in attention. Every method has a "no change" default, so a
/// scheme implements only its difference.
pub trait PositionScheme {
    /// A short human-readable name, e.g. `"rope (half)"`.
    fn name(&self) -> String;

    /// $q'_i, k'_j$ from $q_i, k_j$: add an absolute encoding, rotate, or (default) nothing.
    ///
    /// # Errors
    /// When the shapes do not fit the scheme (e.g. a RoPE dimension mismatch).
    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        Ok((q.to_owned(), k.to_owned()))
    }

    /// The scale $c$ applied to content (and content-dependent position) scores; default
    /// $1/\sqrt{d}$.
    fn score_scale(&self, head_dim: usize) -> f32 {
        1.0 / (head_dim as f32).sqrt()
    }

    /// $t_{ij}$, a position score `[Lq, Lk]` scaled like $q \cdot k$ (content-dependent, or not as
    /// TUPE's).
    ///
    /// # Errors
    /// When the shapes do not fit the scheme.
    fn score_term(
        &self,
        _head: usize,
        _q: ArrayView2<f32>,
        _k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        Ok(None)
    }

    /// $b_{ij}$, a content-free bias `[Lq, Lk]` added after scaling.
    ///
    /// # Errors
    /// When `head` is out of range or the lengths are not supported.
    fn score_bias(&self, _head: usize, _lq: usize, _lk: usize) -> Result<Option<Array2<f32>>> {
        Ok(None)
    }

    /// $\sum_j \alpha_{ij} a^V_{ij}$, a position term added to the output `[Lq, d_v]`.
    ///
    /// # Errors
    /// When the shapes do not fit the scheme.
    fn value_term(&self, _head: usize, _probs: ArrayView2<f32>) -> Result<Option<Array2<f32>>> {
        Ok(None)
    }
}
