//! Position objects as plain tables, for `posenc dump` and for checking our numbers against
//! other implementations. Each dump is a set of named, equally long columns (or a matrix),
//! written as JSON (`{"column": [...], ...}`) or CSV.

use serde_json::{json, Map, Value};

use posenc::encodings::alibi::alibi_slopes;
use posenc::encodings::deberta::LogBuckets;
use posenc::encodings::rope::{RopeConfig, RopeScaling};
use posenc::encodings::sinusoidal::{sinusoidal_embedding, SinusoidalLayout};
use posenc::encodings::t5::T5Buckets;
use posenc::error::{ensure, Result, MAX_ROWS};

/// A dumped table: named columns of numbers, or one named matrix.
#[derive(Debug, Clone, PartialEq)]
pub enum Dump {
    /// Columns of equal length, in order.
    Columns(Vec<(String, Vec<Value>)>),
    /// One matrix under a name (rows of equal length).
    Matrix(String, Vec<Vec<Value>>),
    /// Columns plus scalar fields (e.g. RoPE's attention factor).
    ColumnsAndScalars(Vec<(String, Vec<Value>)>, Vec<(String, Value)>),
}

impl Dump {
    /// The dump as a JSON object.
    pub fn to_json(&self) -> Value {
        let mut map = Map::new();
        match self {
            Dump::Columns(cols) => {
                for (name, values) in cols {
                    map.insert(name.clone(), Value::Array(values.clone()));
                }
            }
            Dump::Matrix(name, rows) => {
                map.insert(name.clone(), json!(rows));
            }
            Dump::ColumnsAndScalars(cols, scalars) => {
                for (name, values) in cols {
                    map.insert(name.clone(), Value::Array(values.clone()));
                }
                for (name, v) in scalars {
                    map.insert(name.clone(), v.clone());
                }
            }
        }
        Value::Object(map)
    }

    /// The dump as CSV with a header line. Scalars become constant columns; a matrix has
    /// columns `row,c0,c1,...`.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        match self {
            Dump::Matrix(_, rows) => {
                let width = rows.first().map_or(0, Vec::len);
                let header: Vec<String> = std::iter::once("row".to_string())
                    .chain((0..width).map(|c| format!("c{c}")))
                    .collect();
                out.push_str(&header.join(","));
                out.push('\n');
                for (r, row) in rows.iter().enumerate() {
                    let cells: Vec<String> = std::iter::once(r.to_string())
                        .chain(row.iter().map(|x| x.to_string()))
                        .collect();
                    out.push_str(&cells.join(","));
                    out.push('\n');
                }
            }
            Dump::Columns(cols) => write_columns(&mut out, cols, &[]),
            Dump::ColumnsAndScalars(cols, scalars) => write_columns(&mut out, cols, scalars),
        }
        out
    }
}

fn write_columns(out: &mut String, cols: &[(String, Vec<Value>)], scalars: &[(String, Value)]) {
    let names: Vec<&str> = cols
        .iter()
        .map(|(n, _)| n.as_str())
        .chain(scalars.iter().map(|(n, _)| n.as_str()))
        .collect();
    out.push_str(&names.join(","));
    out.push('\n');
    let rows = cols.first().map_or(0, |(_, v)| v.len());
    for r in 0..rows {
        let cells: Vec<String> = cols
            .iter()
            .map(|(_, v)| v[r].to_string())
            .chain(scalars.iter().map(|(_, v)| v.to_string()))
            .collect();
        out.push_str(&cells.join(","));
        out.push('\n');
    }
}

/// An `f32` as the shortest decimal that reads back to the same `f32` (so `0.075`, not
/// `0.07499999552965164`).
pub fn f32_json(x: f32) -> Value {
    x.to_string()
        .parse::<f64>()
        .map_or(Value::Null, |v| json!(v))
}

fn relative_range(min: i64, max: i64) -> Result<Vec<i64>> {
    ensure(min <= max, "min", min, &format!("at most max = {max}"))?;
    let rows = (max as i128 - min as i128 + 1) as u128;
    ensure(
        rows <= MAX_ROWS as u128,
        "max - min + 1",
        rows,
        &format!("at most {MAX_ROWS}"),
    )?;
    Ok((min..=max).collect())
}

/// The columns `relative_position` and `bucket` over `min..=max`.
///
/// # Errors
/// An invalid range.
fn bucket_columns<B: serde::Serialize>(
    min: i64,
    max: i64,
    bucket: impl Fn(i64) -> B,
) -> Result<Dump> {
    let rel = relative_range(min, max)?;
    Ok(Dump::Columns(vec![
        (
            "relative_position".into(),
            rel.iter().map(|&r| json!(r)).collect(),
        ),
        (
            "bucket".into(),
            rel.iter().map(|&r| json!(bucket(r))).collect(),
        ),
    ]))
}

/// T5 buckets for relative positions `min..=max` (key − query).
///
/// # Errors
/// Invalid bucket parameters or range.
pub fn t5_buckets(
    num_buckets: usize,
    max_distance: usize,
    causal: bool,
    min: i64,
    max: i64,
) -> Result<Dump> {
    let buckets = T5Buckets::new(num_buckets, max_distance, !causal)?;
    bucket_columns(min, max, |r| buckets.bucket(r))
}

/// DeBERTa log buckets for relative positions `min..=max` (query − key).
///
/// # Errors
/// Invalid bucket parameters or range.
pub fn deberta_buckets(
    bucket_size: usize,
    max_position: usize,
    min: i64,
    max: i64,
) -> Result<Dump> {
    let buckets = LogBuckets::new(bucket_size, max_position)?;
    bucket_columns(min, max, |r| buckets.bucket(r))
}

/// ALiBi slopes for `heads` heads.
///
/// # Errors
/// `heads == 0`.
pub fn alibi(heads: usize) -> Result<Dump> {
    let slopes = alibi_slopes(heads)?;
    Ok(Dump::Columns(vec![(
        "slopes".into(),
        slopes.into_iter().map(f32_json).collect(),
    )]))
}

/// RoPE inverse frequencies and attention factor for a config at `seq_len`.
///
/// # Errors
/// Invalid configuration.
pub fn rope_frequencies(
    dim: usize,
    base: f64,
    scaling: RopeScaling,
    seq_len: Option<usize>,
) -> Result<Dump> {
    let freqs = RopeConfig::with_scaling(dim, base, scaling)?.frequencies(seq_len)?;
    Ok(Dump::ColumnsAndScalars(
        vec![(
            "inv_freq".into(),
            freqs.inv_freq.into_iter().map(f32_json).collect(),
        )],
        vec![("attention_factor".into(), f32_json(freqs.attention_factor))],
    ))
}

/// The sinusoidal table for positions `0..positions`.
///
/// # Errors
/// Invalid width or base, or too many rows.
pub fn sinusoidal(
    positions: usize,
    dim: usize,
    base: f64,
    layout: SinusoidalLayout,
) -> Result<Dump> {
    ensure(
        positions.saturating_mul(dim) <= MAX_ROWS,
        "positions * dim",
        positions.saturating_mul(dim),
        &format!("at most {MAX_ROWS}"),
    )?;
    let p: Vec<f64> = (0..positions).map(|p| p as f64).collect();
    let table = sinusoidal_embedding(&p, dim, base, layout)?;
    Ok(Dump::Matrix(
        "table".into(),
        table
            .rows()
            .into_iter()
            .map(|r| r.iter().map(|&x| f32_json(x)).collect())
            .collect(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_and_csv_hold_the_same_columns() {
        let d = t5_buckets(32, 128, true, -2, 1).unwrap();
        assert_eq!(
            d.to_json(),
            json!({"relative_position": [-2, -1, 0, 1], "bucket": [2, 1, 0, 0]})
        );
        assert_eq!(
            d.to_csv(),
            "relative_position,bucket\n-2,2\n-1,1\n0,0\n1,0\n"
        );
        let r = rope_frequencies(4, 10_000.0, RopeScaling::None, None).unwrap();
        assert_eq!(
            r.to_json(),
            json!({"inv_freq": [1.0, 0.01], "attention_factor": 1.0})
        );
        assert_eq!(r.to_csv(), "inv_freq,attention_factor\n1.0,1.0\n0.01,1.0\n");
        let s = sinusoidal(2, 2, 10_000.0, SinusoidalLayout::Interleaved).unwrap();
        assert_eq!(s.to_csv(), "row,c0,c1\n0,0.0,1.0\n1,0.84147096,0.5403023\n");
    }

    #[test]
    fn bad_ranges_are_errors() {
        assert!(t5_buckets(32, 128, false, 3, 1).is_err());
        assert!(deberta_buckets(256, 512, i64::MIN, i64::MAX).is_err());
        assert!(sinusoidal(usize::MAX, 4, 10_000.0, SinusoidalLayout::Interleaved).is_err());
    }
}
