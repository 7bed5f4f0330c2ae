//! Which relative positions share a T5 bucket, as a table ([`bucket_ranges`]): the bucket
//! function scanned ([`T5Buckets::runs`]), one row per bucket, one pair of columns per mode.

use polars::prelude::{Column, DataFrame, NamedFrom, Series};

use crate::encodings::t5::T5Buckets;
use crate::error::ensure;
use crate::{Error, Result};

/// One row per bucket `0..n` (the largest `num_buckets` of `modes`), and for each mode (a name
/// and its buckets) two columns: `<name>: r = j - i`, the relative positions (key − query) in
/// the bucket within $[-\text{edge}, \text{edge}]$ (`-11..-8`; `<= -91` or `>= 17` where the
/// bucket runs to the edge; `never used`), and `<name>: count`, how many (`open` where it runs
/// to the edge).
///
/// # Errors
/// When `modes` is empty or `edge < 1`.
///
/// # Examples
/// ```
/// use posenc::notebook::prelude::*;
/// let table = bucket_ranges(&[("encoder", T5Buckets::new(32, 128, true)?)], 1000)?;
/// assert_eq!(table.height(), 32);
/// let ranges = results::column_str(&table, "encoder: r = j - i")?;
/// assert_eq!((ranges[8].as_str(), ranges[15].as_str(), ranges[16].as_str()), ("-11..-8", "<= -91", "never used"));
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn bucket_ranges(modes: &[(&str, T5Buckets)], edge: i64) -> Result<DataFrame> {
    ensure(!modes.is_empty(), "modes", "[]", "at least one mode")?;
    ensure(edge >= 1, "edge", edge, ">= 1")?;
    let n = modes.iter().map(|(_, b)| b.num_buckets).max().unwrap_or(0);
    let mut columns: Vec<Column> =
        vec![Series::new("bucket".into(), (0..n as u32).collect::<Vec<u32>>()).into()];
    for (name, buckets) in modes {
        let runs = buckets.runs(-edge, edge);
        let mut ranges = Vec::with_capacity(n);
        let mut counts = Vec::with_capacity(n);
        for b in 0..n {
            let mine: Vec<&(i64, i64, usize)> = runs.iter().filter(|r| r.2 == b).collect();
            let open = mine.iter().any(|r| r.0 == -edge || r.1 == edge);
            let text: Vec<String> = mine
                .iter()
                .map(|&&(lo, hi, _)| match (lo == -edge, hi == edge) {
                    (true, false) => format!("<= {hi}"),
                    (false, true) => format!(">= {lo}"),
                    (true, true) => "every r".to_string(),
                    _ if lo == hi => lo.to_string(),
                    _ => format!("{lo}..{hi}"),
                })
                .collect();
            ranges.push(if text.is_empty() {
                "never used".to_string()
            } else {
                text.join(", ")
            });
            let count: i64 = mine.iter().map(|r| r.1 - r.0 + 1).sum();
            counts.push(if open {
                "open".to_string()
            } else {
                count.to_string()
            });
        }
        columns.push(Series::new(format!("{name}: r = j - i").into(), ranges).into());
        columns.push(Series::new(format!("{name}: count").into(), counts).into());
    }
    DataFrame::new_infer_height(columns).map_err(|e| Error::Io(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notebook::results::column_str;

    #[test]
    fn ranges_and_counts_follow_the_bucket_function() {
        let encoder = T5Buckets::new(32, 128, true).unwrap();
        let decoder = T5Buckets::new(32, 128, false).unwrap();
        let table = bucket_ranges(&[("enc", encoder), ("dec", decoder)], 1000).unwrap();
        assert_eq!(table.width(), 5);
        let enc = column_str(&table, "enc: r = j - i").unwrap();
        let enc_count = column_str(&table, "enc: count").unwrap();
        let dec = column_str(&table, "dec: r = j - i").unwrap();
        let dec_count = column_str(&table, "dec: count").unwrap();
        assert_eq!(
            (enc[0].as_str(), enc[17].as_str(), enc[31].as_str()),
            ("0", "1", ">= 91")
        );
        assert_eq!(
            (enc_count[9].as_str(), enc_count[31].as_str()),
            ("4", "open")
        );
        // the decoder's bucket 0 holds r = 0 and every future key
        assert_eq!((dec[0].as_str(), dec_count[0].as_str()), (">= 0", "open"));
        assert_eq!(
            (dec[31].as_str(), dec[16].as_str()),
            ("<= -113", "-18..-16")
        );
        assert!(bucket_ranges(&[], 10).is_err());
        assert!(bucket_ranges(&[("enc", encoder)], 0).is_err());
    }
}
