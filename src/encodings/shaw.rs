//! # Shaw et al. relative position representations
//!
//! Shaw, Uszkoreit, Vaswani 2018, "Self-Attention with Relative Position Representations"
//! (<https://arxiv.org/abs/1803.02155>); reference code: tensor2tensor
//! `_generate_relative_positions_matrix`, `_relative_attention_inner`.
//!
//! Instead of telling each token where it is, every *pair* $(i, j)$ gets learned vectors that
//! depend only on the clipped offset $j - i$: $a^K_{ij}$ joins the key and $a^V_{ij}$ the value.
//! Offsets beyond $\pm k$ share the edge vectors, on the hypothesis that precise relative
//! position stops mattering beyond some distance; this also makes the model accept any length.
//!
//! ```math
//! \text{idx}_{ij} = \operatorname{clip}(j - i, -k, k) + k, \qquad
//! a^K_{ij} = w^K_{\text{idx}_{ij}}, \quad a^V_{ij} = w^V_{\text{idx}_{ij}}
//! ```
//!
//! ```math
//! e_{ij} = \frac{q_i \cdot (k_j + a^K_{ij})}{\sqrt d}, \qquad
//! z_i = \sum_j \alpha_{ij} (v_j + a^V_{ij})
//! ```
//!
//! with $w^K, w^V \in \mathbb{R}^{(2k+1) \times d}$.
//!
//! Derived step by step, checked and plotted in `notebooks/03_shaw.ipynb`.

use ndarray::{Array2, Array3, ArrayView2};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_positive, ensure_shape, invalid, Result};

/// $\text{idx}_{ij} = \operatorname{clip}(j - i, -k, k) + k$, `[Lq, Lk]`, queries at the last
/// `lq` of `lk` positions. Entries lie in $0..=2k$.
///
/// # Errors
/// When `lq > lk`.
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// let idx = relative_index_matrix(3, 3, 1)?;
/// assert_eq!(idx, array![[1, 2, 2], [0, 1, 2], [0, 0, 1]]);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn relative_index_matrix(lq: usize, lk: usize, max_relative: usize) -> Result<Array2<usize>> {
    ensure_queries_fit(lq, lk)?;
    Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
        relative_index(j as i64 - query_position(i, lq, lk) as i64, max_relative)
    }))
}

/// $\operatorname{clip}(r, -k, k) + k$ of one relative position $r = j - i$ (key − query):
/// the table row of [`relative_index_matrix`].
///
/// # Examples
/// ```
/// use posenc::encodings::shaw::relative_index;
/// assert_eq!(relative_index(-1, 1), 0);
/// assert_eq!(relative_index(-9, 4), 0);
/// assert_eq!(relative_index(2, 4), 6);
/// ```
pub fn relative_index(relative_position: i64, max_relative: usize) -> usize {
    let k = max_relative as i64;
    (relative_position.clamp(-k, k) + k) as usize
}

/// Gathers table rows by an index matrix: $A_{ij} = w_{\text{idx}_{ij}}$, `[Lq, Lk, d]`.
///
/// # Errors
/// When an index is out of the table's range.
pub fn gather_relative(table: ArrayView2<f32>, index: &Array2<usize>) -> Result<Array3<f32>> {
    let rows = table.nrows();
    if let Some(&bad) = index.iter().find(|&&r| r >= rows) {
        return Err(invalid("relative index", bad, format!("0..{rows}")));
    }
    let (lq, lk) = index.dim();
    Ok(Array3::from_shape_fn(
        (lq, lk, table.ncols()),
        |(i, j, c)| table[[index[[i, j]], c]],
    ))
}

/// Shaw et al. relative keys and values for one head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShawRelative {
    /// Clipping distance $k \ge 1$.
    pub max_relative: usize,
    /// $w^K$, `[2k+1, d]`.
    pub keys: Array2<f32>,
    /// $w^V$, `[2k+1, d_v]`.
    pub values: Array2<f32>,
}

impl ShawRelative {
    /// Tables drawn from $\mathcal N(0, \sigma^2)$ with `seed`.
    ///
    /// # Errors
    /// `max_relative == 0`, `dim == 0`, or `std` not positive and finite.
    pub fn new(max_relative: usize, dim: usize, std: f32, seed: u64) -> Result<Self> {
        let rows = Self::table_rows(max_relative)?;
        ensure(dim >= 1, "dim", dim, "at least 1")?;
        ensure_positive("std", std)?;
        let mut init = Seeded::new(seed);
        let keys = init.normal((rows, dim), std)?;
        let values = init.normal((rows, dim), std)?;
        Self::from_tables(max_relative, keys, values)
    }

    /// The $2k+1$ rows of a table with clipping distance $k$ = `max_relative`.
    ///
    /// # Errors
    /// `max_relative == 0`, or $2k+1$ past `usize`.
    fn table_rows(max_relative: usize) -> Result<usize> {
        ensure(
            max_relative >= 1,
            "max_relative",
            max_relative,
            "at least 1",
        )?;
        max_relative
            .checked_mul(2)
            .and_then(|r| r.checked_add(1))
            .ok_or_else(|| invalid("max_relative", max_relative, "2k+1 rows that fit in usize"))
    }

    /// Given tables.
    ///
    /// # Errors
    /// When a table does not have $2k+1$ rows or has no column, or `max_relative == 0`.
    pub fn from_tables(
        max_relative: usize,
        keys: Array2<f32>,
        values: Array2<f32>,
    ) -> Result<Self> {
        let rows = Self::table_rows(max_relative)?;
        ensure_shape("Shaw key table rows", &[rows], &[keys.nrows()])?;
        ensure_shape("Shaw value table rows", &[rows], &[values.nrows()])?;
        ensure(
            keys.ncols() >= 1 && values.ncols() >= 1,
            "table width",
            0,
            "at least 1",
        )?;
        Ok(Self {
            max_relative,
            keys,
            values,
        })
    }

    /// $q_i \cdot a^K_{ij}$, `[Lq, Lk]`, computed fast: $(q\ {w^K}^\top)_{i,\text{idx}_{ij}}$.
    ///
    /// # Errors
    /// When q's width differs from the key table's, or `lq > lk`.
    pub fn key_scores(&self, q: ArrayView2<f32>, lk: usize) -> Result<Array2<f32>> {
        ensure_shape("Shaw: q width", &[self.keys.ncols()], &[q.ncols()])?;
        let index = relative_index_matrix(q.nrows(), lk, self.max_relative)?;
        // q w^K^T, [Lq, 2k+1]
        let qw = q.dot(&self.keys.t());
        Ok(Array2::from_shape_fn(index.dim(), |(i, j)| {
            qw[[i, index[[i, j]]]]
        }))
    }

    /// The same as [`key_scores`](Self::key_scores) written as the einsum
    /// `ld,lmd->lm` over the gathered tensor $A^K$ `[Lq, Lk, d]`: a batched dot product, one
    /// batch per query $i$.
    ///
    /// # Errors
    /// As [`key_scores`](Self::key_scores).
    pub fn key_scores_einsum(&self, q: ArrayView2<f32>, lk: usize) -> Result<Array2<f32>> {
        ensure_shape("Shaw: q width", &[self.keys.ncols()], &[q.ncols()])?;
        let index = relative_index_matrix(q.nrows(), lk, self.max_relative)?;
        let a_k = gather_relative(self.keys.view(), &index)?;
        let mut out = Array2::zeros(index.dim());
        for (i, mut row) in out.outer_iter_mut().enumerate() {
            // [Lk, d] . [d] -> [Lk]
            row.assign(&a_k.index_axis(ndarray::Axis(0), i).dot(&q.row(i)));
        }
        Ok(out)
    }

    /// $\sum_j \alpha_{ij} a^V_{ij}$, `[Lq, d_v]`, computed by summing the weights per
    /// clipped offset first: $\sum_r \big(\sum_{j: \text{idx}_{ij}=r} \alpha_{ij}\big) w^V_r$.
    ///
    /// # Errors
    /// When `probs` has more rows than columns.
    pub fn value_output(&self, probs: ArrayView2<f32>) -> Result<Array2<f32>> {
        let (lq, lk) = probs.dim();
        let index = relative_index_matrix(lq, lk, self.max_relative)?;
        // weight per offset bucket, [Lq, 2k+1]
        let mut per_offset = Array2::<f32>::zeros((lq, self.values.nrows()));
        for ((i, j), &r) in index.indexed_iter() {
            per_offset[[i, r]] += probs[[i, j]];
        }
        Ok(per_offset.dot(&self.values))
    }
}

impl PositionScheme for ShawRelative {
    fn name(&self) -> String {
        format!("shaw (k={})", self.max_relative)
    }

    fn score_term(
        &self,
        _head: usize,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<Option<Array2<f32>>> {
        self.key_scores(q, k.nrows()).map(Some)
    }

    fn value_term(&self, _head: usize, probs: ArrayView2<f32>) -> Result<Option<Array2<f32>>> {
        self.value_output(probs).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention;
    use proptest::prelude::*;

    use crate::encodings::init::seeded_normal as random;

    #[test]
    fn index_matrix_for_length_4_before_and_after_the_shift() {
        let idx = relative_index_matrix(4, 4, 3).unwrap();
        // j - i + 3
        let expected = ndarray::array![[3, 4, 5, 6], [2, 3, 4, 5], [1, 2, 3, 4], [0, 1, 2, 3]];
        assert_eq!(idx, expected);
    }

    #[test]
    fn fast_einsum_and_loop_agree() {
        let shaw = ShawRelative::new(2, 5, 1.0, 7).unwrap();
        let q = random(6, 5, 1);
        let fast = shaw.key_scores(q.view(), 6).unwrap();
        let einsum = shaw.key_scores_einsum(q.view(), 6).unwrap();
        for i in 0..6 {
            for j in 0..6 {
                let r = (j as i64 - i as i64).clamp(-2, 2) + 2;
                let naive: f32 = (0..5).map(|c| q[[i, c]] * shaw.keys[[r as usize, c]]).sum();
                assert!((fast[[i, j]] - naive).abs() < 1e-5);
                assert!((einsum[[i, j]] - naive).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn attention_with_shaw_matches_the_formula() {
        let shaw = ShawRelative::new(1, 4, 0.5, 3).unwrap();
        let (q, k, v) = (random(3, 4, 1), random(3, 4, 2), random(3, 4, 3));
        let out = attention(q.view(), k.view(), v.view(), &shaw, 0, false).unwrap();
        let idx = relative_index_matrix(3, 3, 1).unwrap();
        for i in 0..3 {
            let mut z = ndarray::Array1::<f32>::zeros(4);
            for j in 0..3 {
                let a_k = shaw.keys.row(idx[[i, j]]);
                let e = q.row(i).dot(&(&k.row(j) + &a_k)) / 2.0;
                assert!((out.scores[[i, j]] - e).abs() < 1e-5);
                z += &((&v.row(j) + &shaw.values.row(idx[[i, j]])) * out.probs[[i, j]]);
            }
            for c in 0..4 {
                assert!((out.output[[i, c]] - z[c]).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(ShawRelative::new(0, 4, 1.0, 0).is_err());
        assert!(ShawRelative::new(2, 0, 1.0, 0).is_err());
        assert!(ShawRelative::new(2, 4, -1.0, 0).is_err());
        assert!(
            ShawRelative::from_tables(2, Array2::zeros((4, 3)), Array2::zeros((5, 3))).is_err()
        );
        let shaw = ShawRelative::new(2, 4, 1.0, 0).unwrap();
        assert!(shaw.key_scores(Array2::zeros((2, 3)).view(), 2).is_err());
        assert!(relative_index_matrix(3, 2, 1).is_err());
        assert!(gather_relative(shaw.keys.view(), &ndarray::array![[5usize]]).is_err());
    }

    proptest! {
        #[test]
        fn indices_saturate_at_plus_minus_k(lq in 1usize..20, extra in 0usize..20, k in 1usize..8) {
            let lk = lq + extra;
            let idx = relative_index_matrix(lq, lk, k).unwrap();
            for ((i, j), &r) in idx.indexed_iter() {
                let offset = j as i64 - (lk - lq + i) as i64;
                prop_assert!(r <= 2 * k);
                if offset >= k as i64 { prop_assert_eq!(r, 2 * k); }
                if offset <= -(k as i64) { prop_assert_eq!(r, 0); }
                if offset.abs() < k as i64 { prop_assert_eq!(r as i64, offset + k as i64); }
            }
        }
    }
}
