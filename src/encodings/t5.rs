//! # T5 relative position bias
//!
//! Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
//! Transformer" (<https://arxiv.org/abs/1910.10683>), §2.1; reference code: Hugging Face
//! `T5Attention._relative_position_bucket`.
//!
//! T5 adds to each attention logit a learned scalar per head that depends only on the
//! relative position $r = j - i$ (key minus query, the HF convention), after mapping $r$ to
//! one of a few buckets: small distances get a bucket each, larger ones share buckets whose
//! boundaries are spaced logarithmically up to `max_distance` (so their widths grow roughly
//! geometrically), and everything beyond shares the last bucket. Bidirectional attention
//! spends half the buckets on each sign.
//!
//! With $n$ buckets (halved to $n' = n/2$ and offset by $n'$ for $r > 0$ when bidirectional;
//! causal attention uses $a = \max(-r, 0)$, bidirectional $a = |r|$), $e = n'/2$ exact buckets:
//!
//! ```math
//! \text{bucket}(a) = \begin{cases} a & a < e \\
//! \min\Big(n'-1,\  e + \big\lfloor \frac{\ln(a/e)}{\ln(\text{max\_distance}/e)}\ (n'-e)
//! \big\rfloor\Big) & a \ge e \end{cases}
//! ```
//!
//! and the score bias is $b_{ij} = B[\text{bucket}(j - i), h]$ for a table
//! $B \in \mathbb{R}^{n \times H}$. The logarithm is computed in `f32` as the reference does, so
//! buckets agree exactly.
//!
//! Derived step by step, checked and plotted in `notebooks/05_t5_bias.ipynb`.

use ndarray::{Array2, Array3};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, invalid, Result};

/// Bucket hyper-parameters of T5, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct T5Buckets {
    /// Number of buckets $n$ (T5 default 32). Bidirectional: even and at least 4.
    pub num_buckets: usize,
    /// Distance where the log formula reaches one past the last bucket (T5 default 128; above
    /// the exact range): every distance from it on is in the last bucket, which starts earlier
    /// (at 91 for 32 buckets bidirectional, 113 causal; [`T5Buckets::log_bucket_start`]).
    pub max_distance: usize,
    /// Encoder (both signs) or decoder (causal, only $r \le 0$ matters).
    pub bidirectional: bool,
}

impl T5Buckets {
    /// Validates the parameters.
    ///
    /// # Errors
    /// `num_buckets` below 2 (causal) or odd / below 4 (bidirectional); `max_distance` not
    /// above the number of exact buckets.
    pub fn new(num_buckets: usize, max_distance: usize, bidirectional: bool) -> Result<Self> {
        if bidirectional {
            ensure(
                num_buckets >= 4 && num_buckets.is_multiple_of(2),
                "num_buckets",
                num_buckets,
                "an even number >= 4 for bidirectional attention (half the buckets per sign)",
            )?;
        } else {
            ensure(num_buckets >= 2, "num_buckets", num_buckets, "at least 2")?;
        }
        let buckets = Self {
            num_buckets,
            max_distance,
            bidirectional,
        };
        let exact = buckets.max_exact();
        if max_distance <= exact {
            return Err(invalid(
                "max_distance",
                max_distance,
                format!("above the exact range, i.e. > {exact} for num_buckets = {num_buckets}"),
            ));
        }
        Ok(buckets)
    }

    /// Buckets per sign, $n' = n/2$ if bidirectional else $n$.
    pub fn buckets_per_sign(&self) -> usize {
        if self.bidirectional {
            self.num_buckets / 2
        } else {
            self.num_buckets
        }
    }

    /// Number of exact (one distance each) buckets, $e = n'/2$.
    pub fn max_exact(&self) -> usize {
        self.buckets_per_sign() / 2
    }

    /// The bucket of relative position $r$ = key − query.
    pub fn bucket(&self, relative_position: i64) -> usize {
        let n = self.buckets_per_sign();
        let (offset, distance) = if self.bidirectional {
            // r > 0 -> upper half
            let offset = if relative_position > 0 { n } else { 0 };
            (offset, relative_position.unsigned_abs())
        } else {
            // only the past counts: a = max(-r, 0)
            (0, relative_position.min(0).unsigned_abs())
        };
        let exact = self.max_exact() as u64;
        if distance < exact {
            return offset + distance as usize;
        }
        // e + ln(a/e) / ln(max_distance/e) * (n'-e), in f32 as torch computes it
        let log_ratio = (distance as f32 / exact as f32).ln();
        let log_range = (self.max_distance as f64 / exact as f64).ln() as f32;
        let large = exact as f32 + log_ratio / log_range * (n - exact as usize) as f32;
        // truncation toward zero as `.to(torch.long)`, then clip to the last bucket
        let large = (large as i64).min(n as i64 - 1) as usize;
        offset + large
    }

    /// The bucket of $j - (L_k - L_q + i)$ (key − query) for every query $i$ and key $j$, with
    /// the queries at the last `lq` of `lk` positions ([`query_position`]), `[Lq, Lk]`.
    ///
    /// # Errors
    /// `lq > lk`.
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::t5::T5Buckets;
    /// let causal = T5Buckets::new(32, 128, false)?;
    /// // key - query = 0 on the diagonal, -1 below it; the future shares bucket 0
    /// assert_eq!(causal.matrix(2, 2)?, ndarray::array![[0, 0], [1, 0]]);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn matrix(&self, lq: usize, lk: usize) -> Result<Array2<usize>> {
        ensure_queries_fit(lq, lk)?;
        Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
            // r = key - query
            self.bucket(j as i64 - query_position(i, lq, lk) as i64)
        }))
    }

    /// The relative positions `from..=to` grouped into runs of one bucket, in order: each run is
    /// `(first, last, bucket)`. Scanned, not derived: the table of which positions share a
    /// bucket, as the bucket function itself decides it.
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::t5::T5Buckets;
    /// let encoder = T5Buckets::new(32, 128, true)?;
    /// // keys 8..15 positions back (r = -15..=-8): two buckets of four distances each
    /// assert_eq!(encoder.runs(-15, -8), vec![(-15, -12, 9), (-11, -8, 8)]);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn runs(&self, from: i64, to: i64) -> Vec<(i64, i64, usize)> {
        let mut runs: Vec<(i64, i64, usize)> = Vec::new();
        for r in from..=to {
            let b = self.bucket(r);
            match runs.last_mut() {
                Some(run) if run.2 == b => run.1 = r,
                _ => runs.push((r, r, b)),
            }
        }
        runs
    }

    /// Where log bucket `bucket` starts on the distance axis, in closed form: the distance $a$
    /// at which $e + \ln(a/e)/\ln(\text{max\_distance}/e)\,(n'-e)$ reaches `bucket`,
    ///
    /// ```math
    /// a_b = e\,\Big(\frac{\text{max\_distance}}{e}\Big)^{(b-e)/(n'-e)},
    /// ```
    ///
    /// so the first integer distance in it is $\lceil a_b \rceil$. For bidirectional buckets
    /// `bucket` counts within one side ($0..n'$). `None` for an exact bucket ($b < e$) or past
    /// the last ($b \ge n'$).
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::t5::T5Buckets;
    /// let encoder = T5Buckets::new(32, 128, true)?;
    /// // the last bucket starts at 8 * 16^(7/8) = 90.5, not at max_distance = 128
    /// let last = encoder.log_bucket_start(15).unwrap();
    /// assert!((last - 90.51).abs() < 0.01);
    /// assert_eq!(encoder.bucket(-91), 15);
    /// assert_eq!(encoder.bucket(-90), 14);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn log_bucket_start(&self, bucket: usize) -> Option<f64> {
        let (n, e) = (self.buckets_per_sign(), self.max_exact());
        if bucket < e || bucket >= n {
            return None;
        }
        let ratio = self.max_distance as f64 / e as f64;
        // e (max_distance / e)^((b - e) / (n' - e))
        Some(e as f64 * ratio.powf((bucket - e) as f64 / (n - e) as f64))
    }
}

/// `_relative_position_bucket` of Hugging Face's T5, for one relative position
/// (key − query).
///
/// # Errors
/// As [`T5Buckets::new`].
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// assert_eq!(relative_position_bucket(-3, true, 32, 128)?, 3);
/// assert_eq!(relative_position_bucket(3, true, 32, 128)?, 19);
/// assert_eq!(relative_position_bucket(-1000, true, 32, 128)?, 15);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn relative_position_bucket(
    relative_position: i64,
    bidirectional: bool,
    num_buckets: usize,
    max_distance: usize,
) -> Result<usize> {
    Ok(T5Buckets::new(num_buckets, max_distance, bidirectional)?.bucket(relative_position))
}

/// The T5 bias: buckets plus a table of one learned scalar per bucket and head.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct T5Bias {
    /// Bucket hyper-parameters.
    pub buckets: T5Buckets,
    /// $B$, `[num_buckets, heads]`.
    pub table: Array2<f32>,
}

impl T5Bias {
    /// A bias with a table drawn from $\mathcal N(0, 1)$ with `seed`.
    ///
    /// # Errors
    /// As [`T5Buckets::new`], and `heads == 0`.
    pub fn new(
        num_buckets: usize,
        max_distance: usize,
        bidirectional: bool,
        heads: usize,
        seed: u64,
    ) -> Result<Self> {
        ensure(heads >= 1, "heads", heads, "at least 1")?;
        let buckets = T5Buckets::new(num_buckets, max_distance, bidirectional)?;
        let table = Seeded::new(seed).normal((num_buckets, heads), 1.0)?;
        Ok(Self { buckets, table })
    }

    /// A bias with a given table `[num_buckets, heads]`.
    ///
    /// # Errors
    /// When the table's rows differ from `buckets.num_buckets` or it has no column.
    pub fn from_table(buckets: T5Buckets, table: Array2<f32>) -> Result<Self> {
        ensure(table.ncols() >= 1, "heads", table.ncols(), "at least 1")?;
        ensure_shape(
            "T5 bias table rows",
            &[buckets.num_buckets],
            &[table.nrows()],
        )?;
        Ok(Self { buckets, table })
    }

    /// Number of heads $H$.
    pub fn heads(&self) -> usize {
        self.table.ncols()
    }

    /// Bucket indices `[Lq, Lk]` for queries at the last `lq` of `lk` positions
    /// ([`T5Buckets::matrix`]).
    ///
    /// # Errors
    /// `lq > lk`.
    pub fn bucket_matrix(&self, lq: usize, lk: usize) -> Result<Array2<usize>> {
        self.buckets.matrix(lq, lk)
    }

    /// $b_{ij} = B[\text{bucket}(j - i), h]$, `[Lq, Lk]`.
    ///
    /// # Errors
    /// When `head` is out of range or `lq > lk`.
    pub fn bias(&self, head: usize, lq: usize, lk: usize) -> Result<Array2<f32>> {
        self.check(head, lq, lk)?;
        Ok(self.bucket_matrix(lq, lk)?.mapv(|b| self.table[[b, head]]))
    }

    /// The bias of every head, `[H, Lq, Lk]` (as Hugging Face's `compute_bias`, without
    /// its batch axis).
    ///
    /// # Errors
    /// When `lq > lk`.
    pub fn bias_all_heads(&self, lq: usize, lk: usize) -> Result<Array3<f32>> {
        self.check(0, lq, lk)?;
        let buckets = self.bucket_matrix(lq, lk)?;
        Ok(Array3::from_shape_fn(
            (self.heads(), lq, lk),
            |(h, i, j)| self.table[[buckets[[i, j]], h]],
        ))
    }

    fn check(&self, head: usize, lq: usize, lk: usize) -> Result<()> {
        ensure(
            head < self.heads(),
            "head",
            head,
            &format!("0..{} (the table has {} heads)", self.heads(), self.heads()),
        )?;
        ensure_queries_fit(lq, lk)
    }
}

impl PositionScheme for T5Bias {
    fn name(&self) -> String {
        "t5".into()
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
    fn small_distances_get_their_own_bucket() {
        let b = T5Buckets::new(32, 128, true).unwrap();
        for r in 0..8 {
            assert_eq!(b.bucket(-r), r as usize);
        }
        assert_eq!(b.bucket(1), 17);
        let causal = T5Buckets::new(32, 128, false).unwrap();
        for r in 0..16 {
            assert_eq!(causal.bucket(-r), r as usize);
        }
        // the future is bucket 0 for a decoder
        assert_eq!(causal.bucket(5), 0);
        assert_eq!(causal.bucket(-1000), 31);
        // the farthest past, without overflow
        assert_eq!(causal.bucket(i64::MIN), 31);
        assert_eq!(b.bucket(i64::MIN), 15);
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(T5Buckets::new(1, 128, false).is_err());
        assert!(T5Buckets::new(31, 128, true).is_err());
        assert!(T5Buckets::new(2, 128, true).is_err());
        // exact range of (32, bidirectional) is 8: max_distance must exceed it
        let e = T5Buckets::new(32, 8, true).unwrap_err();
        assert!(e.to_string().contains("> 8"), "{e}");
        assert!(T5Buckets::new(32, 9, true).is_ok());
        assert!(T5Bias::new(32, 128, true, 0, 0).is_err());
        let bias = T5Bias::new(32, 128, true, 2, 0).unwrap();
        assert!(bias.bias(2, 3, 3).is_err());
        assert!(bias.bias(0, 4, 3).is_err());
        assert!(T5Bias::from_table(bias.buckets, Array2::zeros((31, 2))).is_err());
    }

    #[test]
    fn bias_reads_the_table_at_the_bucket() {
        let buckets = T5Buckets::new(8, 16, true).unwrap();
        let table = Array2::from_shape_fn((8, 2), |(b, h)| (10 * h + b) as f32);
        let t5 = T5Bias::from_table(buckets, table).unwrap();
        let bias = t5.bias(1, 3, 3).unwrap();
        assert_eq!(bias[[2, 0]], 10.0 + buckets.bucket(-2) as f32);
        assert_eq!(bias[[0, 2]], 10.0 + buckets.bucket(2) as f32);
        let all = t5.bias_all_heads(3, 3).unwrap();
        assert_eq!(all.index_axis(ndarray::Axis(0), 1), bias);
    }

    proptest! {
        #[test]
        fn buckets_are_monotone_in_distance_and_in_range(
            (nb, md) in prop_oneof![Just((32usize, 128usize)), Just((16, 64)), Just((64, 256)), Just((8, 20))],
            bidirectional in any::<bool>(),
            a in 0i64..5000,
        ) {
            let b = T5Buckets::new(nb, md, bidirectional).unwrap();
            for sign in [-1i64, 1] {
                let here = b.bucket(sign * a);
                let next = b.bucket(sign * (a + 1));
                prop_assert!(here < nb && next < nb);
                if sign < 0 || bidirectional {
                    prop_assert!(next >= here, "r={} -> {}, next {}", sign * a, here, next);
                }
            }
        }
    }

    #[test]
    fn runs_cover_the_range_in_order_with_one_bucket_each() {
        let causal = T5Buckets::new(32, 128, false).unwrap();
        let runs = causal.runs(-200, 5);
        assert_eq!(runs.first().unwrap().0, -200);
        assert_eq!(
            runs.last().unwrap(),
            &(0, 5, 0),
            "the future shares bucket 0 with r = 0"
        );
        for (w, next) in runs.iter().zip(runs.iter().skip(1)) {
            assert_eq!(w.1 + 1, next.0);
            assert_ne!(w.2, next.2);
            assert!((w.0..=w.1).all(|r| causal.bucket(r) == w.2));
        }
        assert!(causal.runs(3, 2).is_empty());
    }

    #[test]
    fn log_buckets_start_at_the_first_integer_above_the_closed_form() {
        for (nb, md, bidirectional) in [
            (32, 128, true),
            (32, 128, false),
            (64, 256, true),
            (8, 20, false),
        ] {
            let b = T5Buckets::new(nb, md, bidirectional).unwrap();
            let (n, e) = (b.buckets_per_sign(), b.max_exact());
            assert_eq!(b.log_bucket_start(e - 1), None);
            assert_eq!(b.log_bucket_start(n), None);
            for bucket in e..n {
                let first = (0..10_000i64).find(|&a| b.bucket(-a) == bucket).unwrap();
                let start = b.log_bucket_start(bucket).unwrap();
                // the closed form in f64 against the bucket function in f32: the same integer
                assert_eq!(
                    first,
                    (start - 1e-9).ceil() as i64,
                    "{nb}/{md}/{bidirectional}: {bucket}"
                );
            }
        }
    }

    #[test]
    fn bucket_matrix_holds_the_reference_bucket_of_key_minus_query() {
        // queries at positions 2, 3, 4 of 5 keys; the golden-tested function per entry
        let buckets = T5Buckets::new(8, 20, false).unwrap();
        let m = buckets.matrix(3, 5).unwrap();
        for ((i, j), &b) in m.indexed_iter() {
            let r = j as i64 - (2 + i) as i64;
            assert_eq!(b, relative_position_bucket(r, false, 8, 20).unwrap());
        }
        // fewer queries are the last rows of the square matrix
        let square = buckets.matrix(5, 5).unwrap();
        assert_eq!(m, square.slice(ndarray::s![2.., ..]));
        assert!(buckets.matrix(6, 5).is_err());
    }
}
