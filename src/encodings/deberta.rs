//! # DeBERTa disentangled attention
//!
//! He et al. 2021, "DeBERTa: Decoding-enhanced BERT with Disentangled Attention"
//! (<https://arxiv.org/abs/2006.03654>), §3.1; reference code: Hugging Face
//! `models/deberta_v2/modeling_deberta_v2.py` (`make_log_bucket_position`,
//! `build_relative_position`, `DisentangledSelfAttention.disentangled_attention_bias`).
//!
//! DeBERTa keeps content and relative position as separate vectors and scores three of the
//! four cross terms: content-to-content, content-to-position (c2p: the query's content
//! against the key's relative position) and position-to-content (p2c: the key's content
//! against the query's relative position). The position-to-position term is dropped: with
//! relative positions it carries no information about the pair's content. Three terms of
//! similar size make the variance $3d$, hence the scale $1/\sqrt{3d}$.
//!
//! With $\delta_{ij}$ the bucketed relative position *query − key* (HF convention),
//! $s$ the attention span and $\text{idx}_{ij} = \operatorname{clip}(\delta_{ij} + s, 0, 2s-1)$:
//!
//! ```math
//! A_{ij} = \frac{q_i \cdot k_j + q_i \cdot K^r_{\text{idx}_{ij}}
//! + k_j \cdot Q^r_{\text{idx}_{ij}}}{\sqrt{3d}}
//! ```
//!
//! Note the p2c index: the reference code gathers `k·Q^rᵀ` at `clip(−δ + s)` over the
//! key-by-key matrix and then transposes, which lands on the same $\text{idx}_{ij}$ as c2p
//! (checked against a literal transcription of those steps in the tests).
//!
//! Log buckets ([`make_log_bucket_position`]) with $m = \lfloor\text{bucket\_size}/2\rfloor$
//! keep $|\delta| \le m$ exact and compress larger ones:
//!
//! ```math
//! \text{bucket}(\delta) = \operatorname{sign}(\delta)\Big(\Big\lceil
//! \frac{\ln(|\delta|/m)}{\ln((\text{max\_position}-1)/m)}(m-1)\Big\rceil + m\Big),
//! \quad |\delta| > m
//! ```
//!
//! Derived step by step, checked and plotted in `notebooks/06_deberta_tupe.ipynb`.

use ndarray::{Array2, ArrayView2};
use serde::{Deserialize, Serialize};

use super::init::Seeded;
use super::{ensure_queries_fit, query_position, PositionScheme};
use crate::error::{ensure, ensure_shape, invalid, Result};

/// Log-bucket hyper-parameters of DeBERTa-v2, validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogBuckets {
    /// `position_buckets` (DeBERTa-v3: 256); at least 2.
    pub bucket_size: usize,
    /// `max_relative_positions` (DeBERTa-v3: 512); above `bucket_size / 2 + 1`.
    pub max_position: usize,
}

impl LogBuckets {
    /// Validates the parameters.
    ///
    /// # Errors
    /// `bucket_size < 2`; `max_position <= bucket_size / 2 + 1` (the log range would be empty).
    pub fn new(bucket_size: usize, max_position: usize) -> Result<Self> {
        ensure(bucket_size >= 2, "bucket_size", bucket_size, "at least 2")?;
        let mid = bucket_size / 2;
        if max_position <= mid + 1 {
            return Err(invalid(
                "max_position",
                max_position,
                format!("greater than bucket_size / 2 + 1 = {}", mid + 1),
            ));
        }
        Ok(Self {
            bucket_size,
            max_position,
        })
    }

    /// The bucket of a relative position (query − key), computed in `f32` as the reference.
    pub fn bucket(&self, relative_position: i64) -> i64 {
        let mid = (self.bucket_size / 2) as i64;
        // |d| without overflow (|i64::MIN| does not fit an i64)
        let abs = relative_position.unsigned_abs();
        if abs <= mid as u64 {
            return relative_position;
        }
        // ceil(ln(|d|/m) / ln((max_position-1)/m) * (m-1)) + m, in f32
        let log_range = (((self.max_position - 1) as f64 / mid as f64) as f32).ln();
        let log_pos =
            ((abs as f32 / mid as f32).ln() / log_range * (mid - 1) as f32).ceil() + mid as f32;
        log_pos as i64 * relative_position.signum()
    }

    /// DeBERTa's index into its `[2s, d]` relative tables ($s$ = `bucket_size`) for every
    /// query $i$ and key $j$: $\text{idx}_{ij} = \operatorname{clip}(\text{bucket}(\delta_{ij}) +
    /// s, 0, 2s-1)$ with $\delta_{ij} = (L_k - L_q + i) - j$ (query − key; queries at the last
    /// `lq` of `lk` positions, [`query_position`]), `[Lq, Lk]`.
    ///
    /// # Errors
    /// `lq > lk`.
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::deberta::LogBuckets;
    /// let buckets = LogBuckets::new(4, 8)?;
    /// // delta = 0 sits at row s = 4, delta = 1 at 5, delta = -1 at 3
    /// assert_eq!(buckets.index_matrix(2, 2)?, ndarray::array![[4, 3], [5, 4]]);
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn index_matrix(&self, lq: usize, lk: usize) -> Result<Array2<usize>> {
        relative_index(Some(*self), self.bucket_size, lq, lk)
    }

    /// The table row of one relative position $\delta$ (query − key),
    /// $\operatorname{clip}(\text{bucket}(\delta) + s, 0, 2s-1)$: the entry of
    /// [`LogBuckets::index_matrix`] at distance $\delta$.
    ///
    /// # Examples
    /// ```
    /// use posenc::encodings::deberta::LogBuckets;
    /// let buckets = LogBuckets::new(4, 8)?;
    /// assert_eq!((buckets.index(0), buckets.index(1), buckets.index(-1)), (4, 5, 3));
    /// # Ok::<(), posenc::Error>(())
    /// ```
    pub fn index(&self, delta: i64) -> usize {
        table_row(Some(*self), self.bucket_size, delta)
    }
}

/// $\operatorname{clip}(\text{bucket}(\delta_{ij}) + s, 0, 2s-1)$, or the plain $\delta_{ij}$
/// without buckets, `[Lq, Lk]`.
fn relative_index(
    buckets: Option<LogBuckets>,
    span: usize,
    lq: usize,
    lk: usize,
) -> Result<Array2<usize>> {
    ensure_queries_fit(lq, lk)?;
    Ok(Array2::from_shape_fn((lq, lk), |(i, j)| {
        // delta = query - key
        let delta = query_position(i, lq, lk) as i64 - j as i64;
        table_row(buckets, span, delta)
    }))
}

/// $\operatorname{clip}(\text{bucket}(\delta) + s, 0, 2s-1)$ of one relative position
/// $\delta$ (query − key), or of the plain $\delta$ without buckets.
fn table_row(buckets: Option<LogBuckets>, span: usize, delta: i64) -> usize {
    let s = span as i64;
    let bucket = buckets.map_or(delta, |b| b.bucket(delta));
    (bucket + s).clamp(0, 2 * s - 1) as usize
}

/// Hugging Face's `make_log_bucket_position` for one relative position (query − key).
///
/// # Errors
/// As [`LogBuckets::new`].
///
/// # Examples
/// ```
/// use posenc::prelude::*;
/// assert_eq!(make_log_bucket_position(100, 256, 512)?, 100);
/// assert_eq!(make_log_bucket_position(-129, 256, 512)?, -129);
/// assert_eq!(make_log_bucket_position(511, 256, 512)?, 255);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn make_log_bucket_position(
    relative_position: i64,
    bucket_size: usize,
    max_position: usize,
) -> Result<i64> {
    Ok(LogBuckets::new(bucket_size, max_position)?.bucket(relative_position))
}

/// Hugging Face's `build_relative_position`: $\delta_{ij} = i - j$ for query $i$ in
/// `0..lq` and key $j$ in `0..lk` (both starting at 0, as the reference), bucketed when
/// `buckets` is given, `[Lq, Lk]`.
pub fn deberta_relative_positions(
    lq: usize,
    lk: usize,
    buckets: Option<LogBuckets>,
) -> Array2<i64> {
    Array2::from_shape_fn((lq, lk), |(i, j)| {
        let delta = i as i64 - j as i64;
        buckets.map_or(delta, |b| b.bucket(delta))
    })
}

/// One head of DeBERTa's relative position terms.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DebertaRelative {
    /// Log buckets, or `None` for plain relative positions clipped by the span.
    pub buckets: Option<LogBuckets>,
    /// Attention span $s$: `position_buckets` if bucketed, else `max_relative_positions`.
    pub span: usize,
    /// $K^r = E^r W_k$, the relative embeddings projected as keys, `[2s, d]`.
    pub pos_key: Array2<f32>,
    /// $Q^r = E^r W_q$, the relative embeddings projected as queries, `[2s, d]`.
    pub pos_query: Array2<f32>,
}

impl DebertaRelative {
    /// Random $K^r, Q^r \sim \mathcal N(0, 1)$ for span `span` and head width `head_dim`.
    ///
    /// # Errors
    /// `span == 0`, `head_dim == 0`, or invalid buckets; with buckets the span must equal
    /// `bucket_size` (as in the reference).
    pub fn new(
        buckets: Option<LogBuckets>,
        span: usize,
        head_dim: usize,
        seed: u64,
    ) -> Result<Self> {
        ensure(head_dim >= 1, "head_dim", head_dim, "at least 1")?;
        let mut init = Seeded::new(seed);
        let rows = 2 * span;
        let pos_key = init.normal((rows, head_dim), 1.0)?;
        let pos_query = init.normal((rows, head_dim), 1.0)?;
        Self::from_parts(buckets, span, pos_key, pos_query)
    }

    /// Given projected relative embeddings.
    ///
    /// # Errors
    /// As [`new`](Self::new), and tables whose shape is not `[2s, d]`.
    pub fn from_parts(
        buckets: Option<LogBuckets>,
        span: usize,
        pos_key: Array2<f32>,
        pos_query: Array2<f32>,
    ) -> Result<Self> {
        ensure(span >= 1, "span", span, "at least 1")?;
        if let Some(b) = buckets {
            ensure(
                span == b.bucket_size,
                "span",
                span,
                &format!("equal to bucket_size = {}", b.bucket_size),
            )?;
        }
        ensure_shape("DeBERTa pos_key rows", &[2 * span], &[pos_key.nrows()])?;
        ensure_shape(
            "DeBERTa pos_query shape",
            pos_key.shape(),
            pos_query.shape(),
        )?;
        ensure(pos_key.ncols() >= 1, "head_dim", 0, "at least 1")?;
        Ok(Self {
            buckets,
            span,
            pos_key,
            pos_query,
        })
    }

    /// $\text{idx}_{ij} = \operatorname{clip}(\delta_{ij} + s, 0, 2s-1)$ with queries at the
    /// last `lq` of `lk` positions, `[Lq, Lk]` ([`LogBuckets::index_matrix`] with buckets).
    ///
    /// # Errors
    /// `lq > lk`.
    pub fn index_matrix(&self, lq: usize, lk: usize) -> Result<Array2<usize>> {
        relative_index(self.buckets, self.span, lq, lk)
    }

    /// Content-to-position $q_i \cdot K^r_{\text{idx}_{ij}}$, `[Lq, Lk]` (unscaled).
    ///
    /// # Errors
    /// When q's width differs from the head width or `lq > lk`.
    pub fn c2p(&self, q: ArrayView2<f32>, lk: usize) -> Result<Array2<f32>> {
        ensure_shape("DeBERTa: q width", &[self.pos_key.ncols()], &[q.ncols()])?;
        let idx = self.index_matrix(q.nrows(), lk)?;
        // q K^r^T, [Lq, 2s], then gather
        let scores = q.dot(&self.pos_key.t());
        Ok(Array2::from_shape_fn(idx.dim(), |(i, j)| {
            scores[[i, idx[[i, j]]]]
        }))
    }

    /// Position-to-content $k_j \cdot Q^r_{\text{idx}_{ij}}$, `[Lq, Lk]` (unscaled).
    ///
    /// # Errors
    /// When k's width differs from the head width or `lq > lk`.
    pub fn p2c(&self, lq: usize, k: ArrayView2<f32>) -> Result<Array2<f32>> {
        ensure_shape("DeBERTa: k width", &[self.pos_query.ncols()], &[k.ncols()])?;
        let idx = self.index_matrix(lq, k.nrows())?;
        // k Q^r^T, [Lk, 2s], then gather transposed
        let scores = k.dot(&self.pos_query.t());
        Ok(Array2::from_shape_fn(idx.dim(), |(i, j)| {
            scores[[j, idx[[i, j]]]]
        }))
    }
}

/// The scale of content and position scores, $1/\sqrt{3d}$: three terms (c2c, c2p, p2c) of variance $d$ each.
pub fn score_scale(head_dim: usize) -> f32 {
    1.0 / (3.0 * head_dim as f32).sqrt()
}

impl PositionScheme for DebertaRelative {
    fn name(&self) -> String {
        "deberta".into()
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
        Ok(Some(self.c2p(q, k.nrows())? + self.p2c(q.nrows(), k)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::attention;

    use crate::encodings::init::seeded_normal as random;

    /// The reference's p2c steps, transcribed literally: r_pos over keys x keys,
    /// p2c_pos = clip(-r_pos + s), gather k Q^r^T along the last axis, transpose.
    fn p2c_reference_steps(d: &DebertaRelative, k: &Array2<f32>) -> Array2<f32> {
        let l = k.nrows();
        let s = d.span as i64;
        let r_pos = deberta_relative_positions(l, l, d.buckets);
        let p2c_pos = r_pos.mapv(|r| (-r + s).clamp(0, 2 * s - 1) as usize);
        let p2c_att = k.dot(&d.pos_query.t());
        let gathered = Array2::from_shape_fn((l, l), |(a, b)| p2c_att[[a, p2c_pos[[a, b]]]]);
        gathered.reversed_axes()
    }

    #[test]
    fn p2c_equals_the_reference_gather_then_transpose() {
        for buckets in [None, Some(LogBuckets::new(4, 8).unwrap())] {
            let span = buckets.map_or(3, |b| b.bucket_size);
            let d = DebertaRelative::new(buckets, span, 4, 5).unwrap();
            let k = random(9, 4, 2);
            let fast = d.p2c(9, k.view()).unwrap();
            let reference = p2c_reference_steps(&d, &k);
            assert!((&fast - &reference).mapv(f32::abs).sum() < 1e-5);
        }
    }

    #[test]
    fn extreme_relative_positions_get_the_far_buckets_of_their_sign() {
        let b = LogBuckets::new(256, 512).unwrap();
        // |i64::MIN| overflows an i64: the bucket must still be the far negative one
        let far = b.bucket(-1_000_000_000_000);
        assert!(far < -128, "{far}");
        assert_eq!(b.bucket(i64::MIN), b.bucket(i64::MIN + 1));
        assert!(b.bucket(i64::MIN) <= far);
        assert_eq!(b.bucket(i64::MAX), -b.bucket(i64::MIN + 1));
    }

    #[test]
    fn c2p_indexes_by_query_minus_key() {
        let d = DebertaRelative::new(None, 2, 3, 1).unwrap();
        let q = random(4, 3, 3);
        let c2p = d.c2p(q.view(), 4).unwrap();
        // query 3, key 0: delta = 3 -> clip(3 + 2, 0, 3) = 3
        assert!((c2p[[3, 0]] - q.row(3).dot(&d.pos_key.row(3))).abs() < 1e-6);
        // query 0, key 1: delta = -1 -> 1
        assert!((c2p[[0, 1]] - q.row(0).dot(&d.pos_key.row(1))).abs() < 1e-6);
    }

    #[test]
    fn attention_uses_the_sqrt_3d_scale() {
        let d = DebertaRelative::new(None, 4, 8, 1).unwrap();
        let (q, k) = (random(5, 8, 1), random(5, 8, 2));
        let out = attention(q.view(), k.view(), k.view(), &d, 0, false).unwrap();
        let c2p = d.c2p(q.view(), 5).unwrap();
        let p2c = d.p2c(5, k.view()).unwrap();
        let expected = (q.dot(&k.t()) + c2p + p2c) / 24f32.sqrt();
        assert!((&out.scores - &expected).mapv(f32::abs).sum() < 1e-4);
    }

    #[test]
    fn small_positions_stay_exact_and_large_ones_are_compressed() {
        let b = LogBuckets::new(256, 512).unwrap();
        for r in -128..=128 {
            assert_eq!(b.bucket(r), r);
        }
        let mut last = 128;
        for r in 129..2000 {
            let here = b.bucket(r);
            assert!(here >= last && here > 128);
            assert_eq!(b.bucket(-r), -here);
            last = here;
        }
    }

    #[test]
    fn invalid_parameters_are_errors() {
        assert!(LogBuckets::new(1, 512).is_err());
        let e = LogBuckets::new(256, 129).unwrap_err();
        assert!(e.to_string().contains("129"), "{e}");
        assert!(make_log_bucket_position(3, 256, 128).is_err());
        let b = LogBuckets::new(4, 8).unwrap();
        assert!(DebertaRelative::new(Some(b), 5, 3, 0).is_err());
        assert!(DebertaRelative::new(None, 0, 3, 0).is_err());
        assert!(DebertaRelative::new(None, 3, 0, 0).is_err());
        assert!(
            DebertaRelative::from_parts(None, 2, Array2::zeros((3, 2)), Array2::zeros((3, 2)))
                .is_err()
        );
        let d = DebertaRelative::new(None, 3, 4, 0).unwrap();
        assert!(d.c2p(random(2, 5, 0).view(), 2).is_err());
        assert!(d.p2c(3, random(2, 4, 0).view()).is_err());
    }

    #[test]
    fn index_matrix_clips_the_reference_log_bucket_of_query_minus_key() {
        // span s = 8 and max position 16: distances past 4 are log-bucketed, past 12 clipped
        let buckets = LogBuckets::new(8, 16).unwrap();
        let (lq, lk) = (20, 30);
        let idx = buckets.index_matrix(lq, lk).unwrap();
        for ((i, j), &x) in idx.indexed_iter() {
            let delta = (lk - lq + i) as i64 - j as i64;
            let bucket = make_log_bucket_position(delta, 8, 16).unwrap();
            assert_eq!(x as i64, (bucket + 8).clamp(0, 15), "delta {delta}");
        }
        // the same index as the head that holds the buckets
        let head = DebertaRelative::new(Some(buckets), 8, 2, 0).unwrap();
        assert_eq!(head.index_matrix(lq, lk).unwrap(), idx);
        assert!(buckets.index_matrix(3, 2).is_err());
    }
}
