//! What `posenc export` writes about a trained model, read back for the notebooks: the learned
//! T5 bias against distance ([`read_t5_bias`], [`bias_by_distance`], [`spread_from`]) and the
//! pooled attention map of the last layer ([`read_attention`], [`last_layer_map`],
//! [`far_mass`], [`row_sum_error`]).
//!
//! T5 adds $B[\text{bucket}(j - i), h]$ to the score of query $i$ and key $j$; with $n$
//! buckets and a maximum distance $D$, every distance past the last bucket's start shares one
//! value, so the bias is constant there ([`spread_from`] measures how constant). A pooled map
//! holds $A_{QK}$, the attention mass the queries of block $Q$ put on the keys of block $K$,
//! averaged over windows; every row sums to 1.

use std::path::Path;

use ndarray::Array2;
use serde::Deserialize;

use crate::error::ensure;
use crate::io::csv::read_csv;
use crate::Result;

/// One row of `posenc export t5-bias` (header `layer,head,relative_position,bucket,bias`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct BiasRow {
    /// Layer, from 0.
    pub layer: usize,
    /// Head, from 0.
    pub head: usize,
    /// Key − query ($\le 0$ for the keys a causal query sees).
    pub relative_position: i64,
    /// The bucket of the distance.
    pub bucket: usize,
    /// The bias added to the score.
    pub bias: f64,
}

/// One row of `posenc export attention` (header `layer,head,query_block,key_block,weight`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct AttentionRow {
    /// Layer, from 0.
    pub layer: usize,
    /// Head, from 0.
    pub head: usize,
    /// Query block $Q$.
    pub query_block: usize,
    /// Key block $K$.
    pub key_block: usize,
    /// $A_{QK}$.
    pub weight: f64,
}

/// One named curve of a figure: a name and a value per x.
pub type NamedSeries = (String, Vec<f64>);

/// Reads a T5 bias export.
///
/// # Errors
/// [`crate::Error::Format`] naming the file when it cannot be read or a row does not fit.
pub fn read_t5_bias(path: &Path) -> Result<Vec<BiasRow>> {
    read_csv(path)
}

/// Reads an attention export.
///
/// # Errors
/// [`crate::Error::Format`] naming the file when it cannot be read or a row does not fit.
pub fn read_attention(path: &Path) -> Result<Vec<AttentionRow>> {
    read_csv(path)
}

/// The bias of every layer and head against the distance $d = i - j = 1..=d_{max}$
/// ($d_{max}$ the largest distance of the rows, relative position $-d$): the distances, and
/// one series per (layer, head), `layer L head H`, in layer then head order.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for no row with a distance of at least 1, or a (layer,
/// head) missing a distance.
pub fn bias_by_distance(rows: &[BiasRow]) -> Result<(Vec<f64>, Vec<NamedSeries>)> {
    let far = rows.iter().map(|r| -r.relative_position).max().unwrap_or(0);
    ensure(
        far >= 1,
        "relative_position",
        far,
        "rows at distances of 1 or more",
    )?;
    let mut heads: Vec<(usize, usize)> = rows.iter().map(|r| (r.layer, r.head)).collect();
    heads.sort_unstable();
    heads.dedup();
    let far = far as usize;
    let mut series = Vec::with_capacity(heads.len());
    for (layer, head) in heads {
        let mut by_distance = vec![f64::NAN; far];
        for r in rows.iter().filter(|r| (r.layer, r.head) == (layer, head)) {
            if r.relative_position < 0 {
                by_distance[(-r.relative_position) as usize - 1] = r.bias;
            }
        }
        let missing = by_distance.iter().position(|b| b.is_nan());
        ensure(
            missing.is_none(),
            "t5 bias",
            format!(
                "layer {layer} head {head} lacks distance {}",
                missing.unwrap_or(0) + 1
            ),
            "every distance from 1 to the largest",
        )?;
        series.push((format!("layer {layer} head {head}"), by_distance));
    }
    Ok(((1..=far).map(|d| d as f64).collect(), series))
}

/// $\max_{h}\max_{d \ge d_0} |b_h(d) - b_h(d_0)|$ over the `series` of [`bias_by_distance`]:
/// 0 when every head's bias is constant from distance `from` on; 0 when `from` is past the
/// last distance.
pub fn spread_from(series: &[NamedSeries], from: usize) -> f64 {
    series
        .iter()
        .filter_map(|(_, b)| {
            let base = *b.get(from.checked_sub(1)?)?;
            Some(
                b[from - 1..]
                    .iter()
                    .map(|v| (v - base).abs())
                    .fold(0.0, f64::max),
            )
        })
        .fold(0.0, f64::max)
}

/// The map of the last layer, the mean over its heads:
/// $\bar A_{QK} = \frac1H \sum_h A^{(h)}_{QK}$, a `[blocks, blocks]` array.
///
/// # Errors
/// [`crate::Error::InvalidParameter`] for no rows.
pub fn last_layer_map(rows: &[AttentionRow]) -> Result<Array2<f64>> {
    ensure(
        !rows.is_empty(),
        "attention",
        "no rows",
        "an attention export",
    )?;
    let layer = rows.iter().map(|r| r.layer).max().unwrap_or(0);
    let last: Vec<&AttentionRow> = rows.iter().filter(|r| r.layer == layer).collect();
    let heads = last.iter().map(|r| r.head).max().unwrap_or(0) + 1;
    let blocks = last
        .iter()
        .map(|r| r.query_block.max(r.key_block))
        .max()
        .unwrap_or(0)
        + 1;
    let mut map = Array2::<f64>::zeros((blocks, blocks));
    for r in last {
        map[[r.query_block, r.key_block]] += r.weight / heads as f64;
    }
    Ok(map)
}

/// $\max_Q |\sum_K \bar A_{QK} - 1|$: how far a row of the map is from holding all of its
/// queries' attention.
pub fn row_sum_error(map: &Array2<f64>) -> f64 {
    map.rows()
        .into_iter()
        .map(|r| (r.sum() - 1.0).abs())
        .fold(0.0, f64::max)
}

/// The attention mass of the last query block on key blocks more than `back` blocks before
/// it: $\sum_{K < Q_{last} - back} \bar A_{Q_{last} K}$ (with 32-byte blocks and `back` = 4,
/// keys more than 128 bytes back).
pub fn far_mass(map: &Array2<f64>, back: usize) -> f64 {
    let n = map.nrows();
    if n == 0 {
        return 0.0;
    }
    let keys = (n - 1).saturating_sub(back);
    map.row(n - 1).iter().take(keys).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bias_reads_by_distance_and_a_constant_tail_has_no_spread() {
        let mut rows = Vec::new();
        for head in 0..2 {
            for d in 1..=6i64 {
                // constant from distance 4 on
                let bias = head as f64 - (d.min(4) as f64) / 10.0;
                rows.push(BiasRow {
                    layer: 0,
                    head,
                    relative_position: -d,
                    bucket: d.min(4) as usize,
                    bias,
                });
            }
        }
        let (distances, series) = bias_by_distance(&rows).unwrap();
        assert_eq!(distances, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(series[1].0, "layer 0 head 1");
        assert!((series[1].1[0] - 0.9).abs() < 1e-12);
        assert_eq!(spread_from(&series, 4), 0.0);
        assert!((spread_from(&series, 3) - 0.1).abs() < 1e-12);
        assert_eq!(spread_from(&series, 99), 0.0);
        rows.remove(3);
        assert!(bias_by_distance(&rows).is_err());
        assert!(bias_by_distance(&[]).is_err());
    }

    /// Two heads of the last layer averaged; an earlier layer ignored; a causal 3-block map.
    #[test]
    fn the_last_layer_map_is_the_head_mean() {
        let mut rows = Vec::new();
        for (layer, head, q, k, w) in [
            (0, 0, 0, 0, 1.0),
            (1, 0, 0, 0, 1.0),
            (1, 1, 0, 0, 1.0),
            (1, 0, 1, 0, 0.5),
            (1, 0, 1, 1, 0.5),
            (1, 1, 1, 1, 1.0),
            (1, 0, 2, 0, 0.2),
            (1, 0, 2, 2, 0.8),
            (1, 1, 2, 1, 1.0),
        ] {
            rows.push(AttentionRow {
                layer,
                head,
                query_block: q,
                key_block: k,
                weight: w,
            });
        }
        let map = last_layer_map(&rows).unwrap();
        assert_eq!(map.dim(), (3, 3));
        assert!((map[[1, 1]] - 0.75).abs() < 1e-12);
        assert!(row_sum_error(&map) < 1e-12);
        // last row 0.1, 0.5, 0.4: more than 1 block back is block 0 only
        assert!((far_mass(&map, 1) - 0.1).abs() < 1e-12);
        assert!((far_mass(&map, 0) - 0.6).abs() < 1e-12);
        assert_eq!(far_mass(&map, 5), 0.0);
        assert!(last_layer_map(&[]).is_err());
    }
}
