//! # Learned absolute position embeddings
//!
//! Devlin et al. 2018, "BERT: Pre-training of Deep Bidirectional Transformers for Language
//! Understanding" (<https://arxiv.org/abs/1810.04805>); Radford et al. 2019 (GPT-2) use the same
//! scheme. Gehring et al. 2017 (<https://arxiv.org/abs/1705.03122>) introduced it for
//! convolutional seq2seq.
//!
//! Instead of a fixed formula, every position $p < P$ owns a free vector $e_p$, a row of a
//! `[P, d]` table trained like a word embedding. The model can learn any shape it likes (BERT's
//! rows end up looking like smooth, sinusoid-like curves), but nothing ties row 600 to row 599:
//! a table of $P$ rows simply has no answer for position $P$, so the scheme cannot extrapolate
//! beyond the training length. Rows start as Gaussian noise $\mathcal N(0, \sigma^2)$
//! (GPT-2: $\sigma = 0.01$, BERT: $0.02$).
//!
//! ```math
//! x'_p = x_p + e_p, \qquad e_p = E_{p,:}, \quad E \in \mathbb R^{P\times d},
//! \quad E_{p,c} \sim \mathcal N(0, \sigma^2) \text{ at initialisation}
//! ```
//!
//! Derived step by step, checked and plotted in `notebooks/01_absolute.ipynb`.

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_positive, ensure_shape, Error, Result};

/// BERT's initialisation standard deviation, 0.02.
pub const DEFAULT_STD: f32 = 0.02;

/// A learned table of absolute position embeddings $E \in \mathbb R^{P\times d}$: position $p$
/// adds row $E_{p,:}$ to q and k (with identity projections, like
/// [`SinusoidalAbsolute`](crate::encodings::sinusoidal::SinusoidalAbsolute)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LearnedAbsolute {
    /// The table $E$, `[max_positions, dim]`; row $p$ is the embedding of position $p$.
    pub table: Array2<f32>,
}

impl LearnedAbsolute {
    /// A table of `max_positions` rows of width `dim`, entries drawn i.i.d. from
    /// $\mathcal N(0, \text{std}^2)$ with a ChaCha RNG (`StdRng`) seeded by `seed`: the same seed
    /// gives the same table.
    ///
    /// # Errors
    /// When `max_positions` or `dim` is zero, their product overflows, or `std` is not a finite
    /// number > 0.
    ///
    /// # Examples
    /// ```
    /// use posenc::prelude::*;
    /// let pe = LearnedAbsolute::new(512, 8, 0, 0.02)?;
    /// assert_eq!(pe.table.dim(), (512, 8));
    /// assert_eq!(pe, LearnedAbsolute::new(512, 8, 0, 0.02)?); // seeded: reproducible
    /// // position 512 is past the table
    /// assert!(pe.lookup(&[3, 512]).is_err());
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn new(max_positions: usize, dim: usize, seed: u64, std: f32) -> Result<Self> {
        ensure(max_positions >= 1, "max_positions", max_positions, ">= 1")?;
        ensure(dim >= 1, "dim", dim, ">= 1")?;
        ensure(
            max_positions.checked_mul(dim).is_some(),
            "max_positions * dim",
            format!("{max_positions} * {dim}"),
            "a product that fits in usize",
        )?;
        ensure_positive("std", std)?;
        // E_{p,c} ~ N(0, std^2), [P, d]
        let table = Seeded::new(seed).normal((max_positions, dim), std)?;
        Ok(Self { table })
    }

    /// Wraps a given (e.g. trained) table `[max_positions, dim]`.
    ///
    /// # Errors
    /// When the table has no rows or no columns, or holds a non-finite value.
    pub fn from_table(table: Array2<f32>) -> Result<Self> {
        let (p, d) = table.dim();
        ensure(
            p >= 1 && d >= 1,
            "table shape",
            format!("[{p}, {d}]"),
            "at least one row and one column",
        )?;
        ensure(
            table.iter().all(|x| x.is_finite()),
            "table",
            "a non-finite entry",
            "finite values only",
        )?;
        Ok(Self { table })
    }

    /// Number of positions $P$ the table covers (valid positions are `0..P`).
    pub fn max_positions(&self) -> usize {
        self.table.nrows()
    }

    /// Width $d$ of each embedding.
    pub fn dim(&self) -> usize {
        self.table.ncols()
    }

    /// The rows $E_{p,:}$ for the given positions, `[positions.len(), dim]`.
    ///
    /// # Errors
    /// [`Error::PositionOutOfRange`] for the first position $\ge P$.
    pub fn lookup(&self, positions: &[usize]) -> Result<Array2<f32>> {
        let len = self.max_positions();
        if let Some(&position) = positions.iter().find(|&&p| p >= len) {
            return Err(Error::PositionOutOfRange {
                context: "learned absolute table",
                position,
                len,
            });
        }
        // E[positions, :], [n, d]
        Ok(self.table.select(ndarray::Axis(0), positions))
    }
}

impl PositionScheme for LearnedAbsolute {
    fn name(&self) -> String {
        "learned absolute".into()
    }

    /// $q'_i = q_i + e_{L_k - L_q + i}$, $k'_j = k_j + e_j$.
    fn transform_qk(
        &self,
        q: ArrayView2<f32>,
        k: ArrayView2<f32>,
    ) -> Result<(Array2<f32>, Array2<f32>)> {
        ensure_shape("learned absolute: q width", &[self.dim()], &[q.ncols()])?;
        ensure_shape("learned absolute: k width", &[self.dim()], &[k.ncols()])?;
        let (lq, lk) = (q.nrows(), k.nrows());
        ensure_queries_fit(lq, lk)?;
        let key_positions: Vec<usize> = (0..lk).collect();
        let query_positions: Vec<usize> = (0..lq).map(|i| query_position(i, lq, lk)).collect();
        let q = &q + &self.lookup(&query_positions)?;
        let k = &k + &self.lookup(&key_positions)?;
        Ok((q, k))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::array;
    use proptest::prelude::*;

    #[test]
    fn same_seed_same_table_different_seed_different_table() {
        let a = LearnedAbsolute::new(16, 4, 7, 0.02).unwrap();
        let b = LearnedAbsolute::new(16, 4, 7, 0.02).unwrap();
        let c = LearnedAbsolute::new(16, 4, 8, 0.02).unwrap();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn large_table_has_the_requested_mean_and_std() {
        let std = 0.5f32;
        let pe = LearnedAbsolute::new(1000, 64, 3, std).unwrap();
        let n = pe.table.len() as f64;
        let mean = pe.table.iter().map(|&x| x as f64).sum::<f64>() / n;
        let var = pe
            .table
            .iter()
            .map(|&x| (x as f64 - mean).powi(2))
            .sum::<f64>()
            / n;
        // 64000 samples: the sample std is within ~0.3% of sigma; allow 2%.
        assert!(mean.abs() < 0.01, "mean {mean}");
        assert!(
            (var.sqrt() / std as f64 - 1.0).abs() < 0.02,
            "std {}",
            var.sqrt()
        );
    }

    #[test]
    fn lookup_returns_rows_and_rejects_positions_past_the_table() {
        let pe =
            LearnedAbsolute::from_table(array![[1.0f32, 2.0], [3.0, 4.0], [5.0, 6.0]]).unwrap();
        assert_eq!(
            pe.lookup(&[2, 0]).unwrap(),
            array![[5.0f32, 6.0], [1.0, 2.0]]
        );
        let e = pe.lookup(&[1, 3]).unwrap_err();
        assert_eq!(
            e,
            Error::PositionOutOfRange {
                context: "learned absolute table",
                position: 3,
                len: 3
            }
        );
        assert_eq!(
            e.to_string(),
            "position 3 is out of range for learned absolute table: it covers positions 0..3 (0 to 2)"
        );
    }

    #[test]
    fn transform_adds_rows_with_queries_aligned_to_the_end() {
        let pe =
            LearnedAbsolute::from_table(array![[1.0f32, 0.0], [0.0, 1.0], [2.0, 2.0]]).unwrap();
        let q = Array2::<f32>::zeros((1, 2));
        let k = Array2::<f32>::zeros((3, 2));
        let (q2, k2) = pe.transform_qk(q.view(), k.view()).unwrap();
        // the single query sits at position 2
        assert_eq!(q2, array![[2.0f32, 2.0]]);
        assert_eq!(k2, pe.table);
        // Lk = 4 > P = 3: the same error as lookup
        let long = Array2::<f32>::zeros((4, 2));
        assert!(matches!(
            pe.transform_qk(q.view(), long.view()),
            Err(Error::PositionOutOfRange {
                position: 3,
                len: 3,
                ..
            })
        ));
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(LearnedAbsolute::new(0, 4, 0, 0.02).is_err());
        assert!(LearnedAbsolute::new(4, 0, 0, 0.02).is_err());
        assert!(LearnedAbsolute::new(usize::MAX, 2, 0, 0.02).is_err());
        assert!(LearnedAbsolute::new(4, 4, 0, 0.0).is_err());
        assert!(LearnedAbsolute::new(4, 4, 0, -1.0).is_err());
        assert!(LearnedAbsolute::new(4, 4, 0, f32::NAN).is_err());
        assert!(LearnedAbsolute::from_table(Array2::zeros((0, 4))).is_err());
        assert!(LearnedAbsolute::from_table(Array2::zeros((4, 0))).is_err());
        assert!(LearnedAbsolute::from_table(array![[f32::INFINITY]]).is_err());
        let pe = LearnedAbsolute::new(4, 4, 0, 0.02).unwrap();
        let wrong = Array2::<f32>::zeros((2, 3));
        assert!(pe.transform_qk(wrong.view(), wrong.view()).is_err());
        let q = Array2::<f32>::zeros((3, 4));
        let k = Array2::<f32>::zeros((2, 4));
        assert!(pe.transform_qk(q.view(), k.view()).is_err());
    }

    proptest! {
        #[test]
        fn lookup_equals_row_indexing(seed in 0u64..1000, positions in proptest::collection::vec(0usize..32, 0..10)) {
            let pe = LearnedAbsolute::new(32, 6, seed, 1.0).unwrap();
            let rows = pe.lookup(&positions).unwrap();
            for (r, &p) in positions.iter().enumerate() {
                prop_assert_eq!(rows.row(r), pe.table.row(p));
            }
        }
    }
}
