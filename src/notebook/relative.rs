//! Relative positions across schemes, for the notebooks that compare them:
//!
//! - [`toeplitz_err`]: how far a matrix is from depending on $j - i$ only;
//! - [`PositionMap`] and [`position_maps`]: which distance each scheme *treats* a query-key
//!   distance as (Shaw's clip, T5's buckets, DeBERTa's log buckets, a window), drawn on one set
//!   of axes with the distances seen in training shaded;
//! - [`weights_by_distance`], [`mass_window`] and [`constant_from`]: how one query spreads its
//!   attention over the distance when the content says nothing, and where that spread stops
//!   changing.

use std::collections::HashMap;
use std::hash::Hash;

use ndarray::{Array1, Array2, ArrayBase, ArrayView1, Data, Ix2};

use super::figures::{lines_xy, Lines, ToF64};
use crate::attention::{attention, PositionScheme};
use crate::encodings::deberta::DebertaRelative;
use crate::encodings::shaw::relative_index_matrix;
use crate::encodings::t5::T5Buckets;
use crate::error::{ensure, Result};

/// The largest $|a_{i+1,j+1} - a_{ij}|$ over the matrix: 0 exactly when every diagonal is
/// constant, i.e. when $a_{ij}$ depends on $j - i$ only (a Toeplitz matrix). Two equal
/// infinities count as equal (a masked score); a NaN gives NaN, which no `check` accepts.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let bias = alibi_bias(1, 6, 6)?.index_axis(Axis(0), 0).to_owned();
/// assert_eq!(toeplitz_err(&bias), 0.0);
/// assert_eq!(toeplitz_err(&array![[1.0, 2.0], [3.0, 5.0]]), 4.0);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn toeplitz_err<S, A>(a: &ArrayBase<S, Ix2>) -> f64
where
    S: Data<Elem = A>,
    A: ToF64 + Copy,
{
    let (rows, cols) = a.dim();
    let mut worst = 0.0f64;
    for i in 1..rows {
        for j in 1..cols {
            let (here, before) = (a[[i, j]].to_f64(), a[[i - 1, j - 1]].to_f64());
            if here == before {
                continue;
            }
            let diff = (here - before).abs();
            if diff.is_nan() {
                return f64::NAN;
            }
            worst = worst.max(diff);
        }
    }
    worst
}

/// How a scheme reads the distance between a query and a key: for each distance
/// $\delta = 0, 1, \dots$, the distance it is *treated as*. For a scheme with a table or buckets
/// that is the smallest distance sharing its row or bucket (every distance in a bucket gets the
/// parameters of the bucket's first); for a window it is whatever the window maps $\delta$ to.
#[derive(Clone, Debug, PartialEq)]
pub struct PositionMap {
    /// The scheme, as the legend names it.
    pub name: String,
    /// `treated_as[δ]` for δ = 0, 1, ..., the largest distance asked for.
    pub treated_as: Vec<f64>,
}

impl PositionMap {
    /// From the parameter class of each distance $0..=$`max_distance` (a table row, a bucket):
    /// a distance is treated as the first distance of its class.
    pub fn from_classes<K: Eq + Hash>(
        name: impl Into<String>,
        max_distance: usize,
        mut class: impl FnMut(usize) -> K,
    ) -> Self {
        let mut first: HashMap<K, usize> = HashMap::new();
        let treated_as = (0..=max_distance)
            .map(|delta| *first.entry(class(delta)).or_insert(delta) as f64)
            .collect();
        Self {
            name: name.into(),
            treated_as,
        }
    }

    /// From the treated distance itself, e.g. a ReRoPE-style window
    /// `|d| (d as f64).min(w as f64)`.
    pub fn from_fn(
        name: impl Into<String>,
        max_distance: usize,
        treated_as: impl FnMut(usize) -> f64,
    ) -> Self {
        Self {
            name: name.into(),
            treated_as: (0..=max_distance).map(treated_as).collect(),
        }
    }

    /// Shaw et al.: table row $\operatorname{clip}(j - i, -k, k) + k$ of a key $\delta$
    /// positions before the query, read off [`relative_index_matrix`].
    ///
    /// # Errors
    /// None for valid sizes; as [`relative_index_matrix`].
    pub fn shaw(max_relative: usize, max_distance: usize) -> Result<Self> {
        // one query at the last of max_distance + 1 positions: key j is max_distance - j back
        let rows = relative_index_matrix(1, max_distance + 1, max_relative)?;
        Ok(Self::from_classes(
            format!("Shaw, clip at k = {max_relative}"),
            max_distance,
            |delta| rows[[0, max_distance - delta]],
        ))
    }

    /// T5: the bucket of a key $\delta$ positions before the query ($r = j - i = -\delta$).
    pub fn t5(buckets: &T5Buckets, max_distance: usize) -> Self {
        let mode = if buckets.bidirectional {
            "bidirectional"
        } else {
            "causal"
        };
        Self::from_classes(
            format!(
                "T5, {} buckets ({mode}), max_distance {}",
                buckets.num_buckets, buckets.max_distance
            ),
            max_distance,
            |delta| buckets.bucket(-(delta as i64)),
        )
    }

    /// DeBERTa: the row of $K^r, Q^r$ a key $\delta$ positions before the query uses (its log
    /// bucket, if any, clipped to the span), read off [`DebertaRelative::index_matrix`].
    ///
    /// # Errors
    /// As [`DebertaRelative::index_matrix`].
    pub fn deberta(deberta: &DebertaRelative, max_distance: usize) -> Result<Self> {
        let rows = deberta.index_matrix(1, max_distance + 1)?;
        let name = match &deberta.buckets {
            Some(b) => format!(
                "DeBERTa, log buckets ({}, {}), span {}",
                b.bucket_size, b.max_position, deberta.span
            ),
            None => format!("DeBERTa, span {}", deberta.span),
        };
        Ok(Self::from_classes(name, max_distance, |delta| {
            rows[[0, max_distance - delta]]
        }))
    }

    /// The first distance from which every larger distance is treated the same: where the
    /// scheme stops telling distances apart (`None` if it never does within the map).
    pub fn saturates_at(&self) -> Option<usize> {
        let last = *self.treated_as.last()?;
        let from = self
            .treated_as
            .iter()
            .rposition(|&t| t != last)
            .map_or(0, |i| i + 1);
        (from + 1 < self.treated_as.len()).then_some(from)
    }
}

/// The maps on one log-log figure, the distance against the distance it is treated as, with
/// the distances a model trained on `trained_len` tokens has seen ($1 \le \delta <$
/// `trained_len`) shaded. The identity ("exact") is drawn for reference. Distance 0 is left out
/// (a log axis); every map must cover the same distances.
///
/// # Errors
/// When `maps` is empty, a map has fewer than two distances, the maps differ in length, or
/// `trained_len < 2`.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let maps = [PositionMap::shaw(16, 1024)?, PositionMap::t5(&T5Buckets::new(32, 128, false)?, 1024)];
/// let fig = position_maps(&maps, 256)?.figure()?;
/// assert!(fig.to_json().contains("trained"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn position_maps(maps: &[PositionMap], trained_len: usize) -> Result<Lines> {
    let len = maps.first().map_or(0, |m| m.treated_as.len());
    ensure(
        len >= 2,
        "maps",
        maps.len(),
        "at least one map of two or more distances",
    )?;
    ensure(
        maps.iter().all(|m| m.treated_as.len() == len),
        "maps",
        "maps of different lengths",
        "maps over the same distances",
    )?;
    ensure(trained_len >= 2, "trained_len", trained_len, ">= 2")?;
    let distances: Vec<f64> = (1..len).map(|d| d as f64).collect();
    let mut series = vec![(
        "exact (δ itself)".to_string(),
        distances.clone(),
        distances.clone(),
    )];
    for map in maps {
        // a map that treats δ > 0 as 0 would vanish on the log axis: floor it at 1/2
        let y = map.treated_as[1..].iter().map(|&t| t.max(0.5)).collect();
        series.push((map.name.clone(), distances.clone(), y));
    }
    let top = (len - 1) as f64;
    Ok(lines_xy(&series)
        .region(1.0, (trained_len - 1).min(len - 1) as f64, "distances seen in training")
        .log_x()
        .log_y()
        .title(format!(
            "The distance each scheme treats a query-key distance as (trained on {trained_len} tokens, drawn to {top})"
        ))
        .x("distance δ = i − j between query and key (tokens, log scale)")
        .y("distance the scheme treats it as (tokens, log scale)"))
}

/// The attention weight one query gives each key by distance when the content says nothing:
/// the query sits at position `len - 1` with content `query`, every key has zero content, and
/// the attention is causal, so the keys differ only by the scheme's position terms. Entry
/// $\delta$ is the weight on the key $\delta$ positions back ($\delta = 0, \dots,$ `len - 1`).
///
/// # Errors
/// When `len` is 0, `query` is empty, or the scheme rejects the shapes or the head.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let w = weights_by_distance(&Alibi::from_slopes(vec![0.5])?, 0, array![0.0f32, 0.0].view(), 64)?;
/// // exp(-m delta) / Z: each step back divides the weight by e^(1/2)
/// assert!((w[1] / w[0] - (-0.5f32).exp()).abs() < 1e-6);
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn weights_by_distance(
    scheme: &dyn PositionScheme,
    head: usize,
    query: ArrayView1<f32>,
    len: usize,
) -> Result<Array1<f32>> {
    ensure(len >= 1, "len", len, ">= 1")?;
    ensure(!query.is_empty(), "query", "[]", "a query of width >= 1")?;
    let d = query.len();
    let q = query.to_owned().insert_axis(ndarray::Axis(0)); // [1, d]
    let zeros = Array2::<f32>::zeros((len, d)); // keys and values without content, [L, d]
    let out = attention(q.view(), zeros.view(), zeros.view(), scheme, head, true)?;
    // key j is len - 1 - j positions back
    Ok(out.probs.row(0).iter().rev().copied().collect())
}

/// The smallest distance $w$ with at least `fraction` of the weight on distances $0..=w$: the
/// window a head effectively attends within. `None` if the weights never reach `fraction`.
///
/// # Errors
/// When `fraction` is not in $(0, 1]$.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// assert_eq!(mass_window(array![0.5f32, 0.3, 0.2].view(), 0.8)?, Some(1));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn mass_window(weights: ArrayView1<f32>, fraction: f64) -> Result<Option<usize>> {
    ensure(
        fraction > 0.0 && fraction <= 1.0,
        "fraction",
        fraction,
        "a fraction in (0, 1]",
    )?;
    let mut mass = 0.0f64;
    for (w, &p) in weights.iter().enumerate() {
        mass += p as f64;
        // 1e-6: a sum of f32 weights that should reach 1 may end just below it
        if mass >= fraction - 1e-6 {
            return Ok(Some(w));
        }
    }
    Ok(None)
}

/// The first index from which every later value equals it (within `tol`): where a curve goes
/// flat for good. The last index if only the last value is left.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// assert_eq!(constant_from(array![3.0f32, 2.0, 1.0, 1.0, 1.0].view(), 0.0), 2);
/// ```
pub fn constant_from(values: ArrayView1<f32>, tol: f32) -> usize {
    let Some(&last) = values.last() else {
        return 0;
    };
    values
        .iter()
        .rposition(|v| (v - last).abs() > tol)
        .map_or(0, |i| i + 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encodings::alibi::Alibi;
    use crate::encodings::deberta::LogBuckets;
    use crate::encodings::shaw::ShawRelative;
    use crate::encodings::t5::T5Bias;
    use ndarray::array;

    #[test]
    fn toeplitz_err_sees_one_broken_diagonal_and_nan() {
        let mut a = Array2::from_shape_fn((5, 5), |(i, j)| j as f32 - i as f32);
        assert_eq!(toeplitz_err(&a), 0.0);
        a[[3, 1]] += 0.25;
        assert_eq!(toeplitz_err(&a), 0.25);
        a[[2, 2]] = f32::NAN;
        assert!(toeplitz_err(&a).is_nan());
        let masked = array![[0.0, f32::NEG_INFINITY], [1.0, 0.0]];
        assert_eq!(toeplitz_err(&masked), 0.0);
    }

    #[test]
    fn maps_read_the_schemes_own_indices() {
        let shaw = PositionMap::shaw(4, 20).unwrap();
        let expected: Vec<f64> = (0..=20).map(|d: usize| d.min(4) as f64).collect();
        assert_eq!(shaw.treated_as, expected);
        assert_eq!(shaw.saturates_at(), Some(4));
        let buckets = T5Buckets::new(32, 128, true).unwrap();
        let t5 = PositionMap::t5(&buckets, 200);
        assert_eq!(&t5.treated_as[..9], &[0., 1., 2., 3., 4., 5., 6., 7., 8.]);
        assert_eq!((t5.treated_as[11], t5.treated_as[12]), (8.0, 12.0));
        assert_eq!(t5.saturates_at(), Some(91));
        let deberta =
            DebertaRelative::new(Some(LogBuckets::new(16, 64).unwrap()), 16, 4, 0).unwrap();
        let map = PositionMap::deberta(&deberta, 300).unwrap();
        // exact up to bucket_size / 2 = 8, then shared rows, and the last row past the span
        assert_eq!(&map.treated_as[..9], &[0., 1., 2., 3., 4., 5., 6., 7., 8.]);
        assert!(map.saturates_at().unwrap() < 64);
        let window = PositionMap::from_fn("window 8", 30, |d| (d as f64).min(8.0));
        assert_eq!(window.saturates_at(), Some(8));
        assert_eq!(
            PositionMap::from_fn("exact", 30, |d| d as f64).saturates_at(),
            None
        );
    }

    #[test]
    fn position_maps_draws_every_map_and_the_trained_region() {
        let maps = [
            PositionMap::shaw(4, 64).unwrap(),
            PositionMap::from_fn("zero", 64, |_| 0.0),
        ];
        let fig = position_maps(&maps, 16).unwrap().figure().unwrap();
        let json: serde_json::Value = serde_json::from_str(&fig.to_json()).unwrap();
        let names: Vec<&str> = json["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(names[0], "distances seen in training");
        assert!(names.contains(&"exact (δ itself)") && names.contains(&"zero"));
        assert!(position_maps(&[], 16).is_err());
        assert!(position_maps(&maps, 1).is_err());
        let short = PositionMap::shaw(4, 8).unwrap();
        assert!(position_maps(&[maps[0].clone(), short], 16).is_err());
    }

    #[test]
    fn weights_by_distance_follow_each_schemes_bias() {
        let q = array![0.3f32, -1.0, 0.5, 2.0];
        let alibi = weights_by_distance(&Alibi::from_slopes(vec![0.25]).unwrap(), 0, q.view(), 200)
            .unwrap();
        assert!((alibi.sum() - 1.0).abs() < 1e-5);
        assert!(alibi.windows(2).into_iter().all(|w| w[1] < w[0]));
        let t5 = T5Bias::new(32, 128, false, 1, 4).unwrap();
        let w = weights_by_distance(&t5, 0, q.view(), 300).unwrap();
        assert_eq!(
            constant_from(w.view(), 0.0),
            113,
            "the causal last bucket starts at 113"
        );
        let shaw = ShawRelative::new(10, 4, 1.0, 1).unwrap();
        let w = weights_by_distance(&shaw, 0, q.view(), 300).unwrap();
        assert_eq!(constant_from(w.view(), 0.0), 10);
        assert!(weights_by_distance(&shaw, 0, q.view(), 0).is_err());
    }

    #[test]
    fn mass_window_and_constant_from_handle_the_edges() {
        let w = array![0.25f32, 0.25, 0.25, 0.25];
        assert_eq!(mass_window(w.view(), 1.0).unwrap(), Some(3));
        assert_eq!(mass_window(w.view(), 0.25).unwrap(), Some(0));
        assert_eq!(mass_window(array![0.1f32].view(), 0.5).unwrap(), None);
        assert!(mass_window(w.view(), 0.0).is_err());
        assert_eq!(constant_from(w.view(), 0.0), 0);
        assert_eq!(constant_from(Array1::<f32>::zeros(0).view(), 0.0), 0);
        assert_eq!(constant_from(array![1.0f32, 2.0].view(), 0.0), 1);
    }
}
