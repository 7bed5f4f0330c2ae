//! The results of `posenc sweep` (`data/results/ppl_vs_length.csv` and the per-position
//! losses beside it), read with polars and shaped into the table and the curves of the
//! perplexity-versus-length notebook; with several training seeds, their spread
//! ([`seed_table`], [`seed_curves`]) and the band of the validation curves
//! ([`curves_by_seed`]). [`perplexity_table`] and [`perplexity_curves`] show one seed's rows
//! and refuse rows of several.
//!
//! Perplexity per byte is $e^{\text{nats}}$ and bits per byte are $\text{nats} / \ln 2$; the
//! extrapolation ratio of a model is $\text{ppl}(16L) / \text{ppl}(L)$ for its training
//! length $L$ of the base models.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::{Column, DataFrame, NamedFrom, Series};
use polars_io::prelude::{CsvReadOptions, SerReader};

use crate::error::{ensure, invalid};
pub use crate::results::ResultRow;
use crate::summary::{seed_summaries, SeedSummary};
use crate::{Error, Result};

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// Reads a CSV file with a header into a polars `DataFrame`.
///
/// # Errors
/// [`Error::Io`] for a missing or malformed file.
pub fn read_csv(path: &Path) -> Result<DataFrame> {
    if !path.is_file() {
        return Err(io(path, "no such file"));
    }
    CsvReadOptions::default()
        .with_has_header(true)
        .try_into_reader_with_file_path(Some(path.to_path_buf()))
        .and_then(|reader| reader.finish())
        .map_err(|e| io(path, e))
}

/// The column `name` of `df` as `f64` values.
///
/// # Errors
/// [`Error::Io`] naming the column when it is missing or not numeric.
pub fn column_f64(df: &DataFrame, name: &str) -> Result<Vec<f64>> {
    let column = df
        .column(name)
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    let values = column
        .cast(&polars::prelude::DataType::Float64)
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    let values = values
        .f64()
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    values
        .iter()
        .map(|v| v.ok_or_else(|| Error::Io(format!("column {name}: a missing value"))))
        .collect()
}

/// The column `name` of `df` as optional `f64` values (an empty cell is `None`), or `None`
/// when `df` has no such column.
///
/// # Errors
/// [`Error::Io`] naming the column when it is not numeric.
pub fn column_opt_f64(df: &DataFrame, name: &str) -> Result<Option<Vec<Option<f64>>>> {
    let Ok(column) = df.column(name) else {
        return Ok(None);
    };
    let values = column
        .cast(&polars::prelude::DataType::Float64)
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    let values = values
        .f64()
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    Ok(Some(values.iter().collect()))
}

/// The column `name` of `df` as strings.
///
/// # Errors
/// [`Error::Io`] naming the column when it is missing or not text.
pub fn column_str(df: &DataFrame, name: &str) -> Result<Vec<String>> {
    let column = df
        .column(name)
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    let values = column
        .str()
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    Ok(values
        .iter()
        .map(|v| v.unwrap_or_default().to_string())
        .collect())
}

/// Reads the results CSV of `posenc sweep`, with [`ResultRow::scaling_factor`] from its
/// `scaling_factor` column (`None` in an empty cell, and everywhere in older tables without
/// the column).
///
/// # Errors
/// [`Error::Io`] for a missing file or a missing column.
pub fn read_results(path: &Path) -> Result<Vec<ResultRow>> {
    let df = read_csv(path)?;
    let text = |name| column_str(&df, name).map_err(|e| io(path, e));
    let number = |name| column_f64(&df, name).map_err(|e| io(path, e));
    let (scheme, variant, mode) = (text("scheme")?, text("variant")?, text("mode")?);
    let (train_len, eval_len) = (number("train_len")?, number("eval_len")?);
    let (nats, std_error) = (number("nats_per_byte")?, number("std_error")?);
    let (bits, ppl) = (number("bits_per_byte")?, number("perplexity")?);
    let (tokens, steps) = (number("tokens_scored")?, number("steps")?);
    let (params, seed) = (number("params")?, number("seed")?);
    let factor = column_opt_f64(&df, "scaling_factor").map_err(|e| io(path, e))?;
    Ok((0..df.height())
        .map(|i| ResultRow {
            scheme: scheme[i].clone(),
            variant: variant[i].clone(),
            train_len: train_len[i] as usize,
            eval_len: eval_len[i] as usize,
            mode: mode[i].clone(),
            nats_per_byte: nats[i],
            std_error: std_error[i],
            bits_per_byte: bits[i],
            perplexity: ppl[i],
            tokens_scored: tokens[i] as usize,
            steps: steps[i] as usize,
            params: params[i] as usize,
            seed: seed[i] as u64,
            scaling_factor: factor.as_ref().and_then(|f| f[i]),
        })
        .collect())
}

/// The mean loss at each position of the longest window (`position,nats_per_byte`, written by
/// `posenc eval --per-position` and by the sweep).
///
/// # Errors
/// [`Error::Io`] for a missing or malformed file.
pub fn read_per_position(path: &Path) -> Result<Vec<f64>> {
    let df = read_csv(path)?;
    column_f64(&df, "nats_per_byte").map_err(|e| io(path, e))
}

/// The evaluated lengths of `mode`, ascending, and the base training length (the shortest
/// `train_len` of a `base` row).
///
/// # Errors
/// [`Error::InvalidParameter`] when no row has that mode.
pub fn lengths(rows: &[ResultRow], mode: &str) -> Result<(Vec<usize>, usize)> {
    let mut lengths: Vec<usize> = rows
        .iter()
        .filter(|r| r.mode == mode)
        .map(|r| r.eval_len)
        .collect();
    lengths.sort_unstable();
    lengths.dedup();
    let train_len = rows
        .iter()
        .filter(|r| r.mode == mode && r.variant == "base")
        .map(|r| r.train_len)
        .min();
    match (lengths.is_empty(), train_len) {
        (false, Some(t)) => Ok((lengths, t)),
        _ => Err(crate::error::invalid(
            "mode",
            mode,
            "a mode present in the results (nonoverlap or sliding) with base rows",
        )),
    }
}

/// `0, 1, 2`.
fn join_seeds(seeds: &[u64]) -> String {
    seeds
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Refuses rows of `mode` from more than one training seed: a table or curve keyed by model
/// and length alone would show one seed's value and silently drop the others'.
///
/// # Errors
/// [`Error::InvalidParameter`] naming the seeds.
fn one_seed(rows: &[ResultRow], mode: &str) -> Result<()> {
    let mut seeds: Vec<u64> = rows
        .iter()
        .filter(|r| r.mode == mode)
        .map(|r| r.seed)
        .collect();
    seeds.sort_unstable();
    seeds.dedup();
    ensure(
        seeds.len() <= 1,
        "rows",
        format!("{mode} rows of seeds {}", join_seeds(&seeds)),
        "the rows of one seed (filter them by `seed`), or seed_table and seed_curves, which \
         summarise several",
    )
}

/// Perplexity at every length of each model (`label -> ppl by length`), for `mode`, in the
/// order of the CSV. One seed only (see [`one_seed`]): a second row of a model at a length
/// replaces the first.
fn by_model<'a>(
    rows: &'a [ResultRow],
    mode: &str,
) -> Vec<(String, BTreeMap<usize, &'a ResultRow>)> {
    let mut models: Vec<(String, BTreeMap<usize, &'a ResultRow>)> = Vec::new();
    for r in rows.iter().filter(|r| r.mode == mode) {
        let label = r.label();
        match models.iter_mut().find(|(l, _)| *l == label) {
            Some((_, m)) => {
                m.insert(r.eval_len, r);
            }
            None => models.push((label, BTreeMap::from([(r.eval_len, r)]))),
        }
    }
    models
}

/// Named series over shared x values, as [`crate::notebook::lines`] takes them:
/// `(x, [(name, y)])`.
pub type Curves = (Vec<f64>, Vec<(String, Vec<f64>)>);

/// Perplexity versus length of one training seed, one series per model whose label `keep`
/// accepts, in the order of the CSV: `(lengths, [(label, perplexities)])`. Models missing a
/// length are left out. For rows of several seeds, [`seed_curves`].
///
/// # Errors
/// As [`lengths`]; [`Error::InvalidParameter`] for rows of `mode` from several seeds.
pub fn perplexity_curves(
    rows: &[ResultRow],
    mode: &str,
    keep: impl Fn(&str) -> bool,
) -> Result<Curves> {
    let (lengths, _) = lengths(rows, mode)?;
    one_seed(rows, mode)?;
    let series = by_model(rows, mode)
        .into_iter()
        .filter(|(label, _)| keep(label))
        .filter_map(|(label, m)| {
            let ppl: Option<Vec<f64>> = lengths
                .iter()
                .map(|l| m.get(l).map(|r| r.perplexity))
                .collect();
            ppl.map(|p| (label, p))
        })
        .collect();
    Ok((lengths.iter().map(|&l| l as f64).collect(), series))
}

/// The models of `mode` in the order of the results table, with the ratio of perplexity at
/// the longest length to that at the base training length, ascending (best extrapolator
/// first); and the lengths and the base training length of [`lengths`].
type SortedModels<'a> = (
    Vec<usize>,
    usize,
    Vec<(String, BTreeMap<usize, &'a ResultRow>, f64)>,
);

/// [`SortedModels`] of `mode`, for rows of one seed.
///
/// # Errors
/// As [`lengths`] and [`one_seed`]; [`Error::Io`] if a model lacks the training length or the
/// longest one.
fn sorted_models<'a>(rows: &'a [ResultRow], mode: &str) -> Result<SortedModels<'a>> {
    let (lengths, train_len) = lengths(rows, mode)?;
    one_seed(rows, mode)?;
    let longest = *lengths.last().unwrap_or(&train_len);
    let mut models = by_model(rows, mode)
        .into_iter()
        .map(|(label, m)| match (m.get(&train_len), m.get(&longest)) {
            (Some(a), Some(b)) => {
                let ratio = b.perplexity / a.perplexity;
                Ok((label, m, ratio))
            }
            _ => Err(Error::Io(format!(
                "a model lacks length {train_len} or {longest}"
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    models.sort_by(|a, b| a.2.total_cmp(&b.2));
    Ok((lengths, train_len, models))
}

/// `l` as a multiple of the training length: `1x`, `16x`, `1.5x`.
fn multiple(l: usize, train_len: usize) -> String {
    let m = l as f64 / train_len as f64;
    if m.fract() == 0.0 {
        format!("{m:.0}x")
    } else {
        format!("{m}x")
    }
}

/// The results table of one mode and one training seed: a row per model (scheme and
/// variant); perplexity per byte and bits per byte at every evaluated length, headed
/// `ppl 128 (1x)`, `bpb 128 (1x)`, ... (multiples of the base training length); and
/// `ppl 16x / 1x`, the ratio of the longest to the training length, by which the rows are
/// sorted, best extrapolator first. For rows of several seeds, [`seed_table`].
///
/// # Errors
/// As [`lengths`]; [`Error::InvalidParameter`] for rows of `mode` from several seeds (naming
/// them); [`Error::Io`] if a model lacks the training length or the longest one.
pub fn perplexity_table(rows: &[ResultRow], mode: &str) -> Result<DataFrame> {
    let (lengths, train_len, models) = sorted_models(rows, mode)?;
    let longest = *lengths.last().unwrap_or(&train_len);
    let multiple = |l: usize| multiple(l, train_len);
    let mut columns: Vec<Column> = vec![
        Series::new(
            "scheme".into(),
            models
                .iter()
                .map(|(_, m, _)| m.values().next().map_or("", |r| r.scheme.as_str()))
                .collect::<Vec<_>>(),
        )
        .into(),
        Series::new(
            "variant".into(),
            models
                .iter()
                .map(|(_, m, _)| m.values().next().map_or("", |r| r.variant.as_str()))
                .collect::<Vec<_>>(),
        )
        .into(),
    ];
    for (unit, value) in [
        (
            "ppl",
            (|r: &ResultRow| r.perplexity) as fn(&ResultRow) -> f64,
        ),
        ("bpb", |r: &ResultRow| r.bits_per_byte),
    ] {
        for &l in &lengths {
            let values: Vec<Option<f64>> = models
                .iter()
                .map(|(_, m, _)| m.get(&l).map(|r| value(r)))
                .collect();
            let name = format!("{unit} {l} ({})", multiple(l));
            columns.push(Series::new(name.as_str().into(), values).into());
        }
    }
    let ratios: Vec<f64> = models.iter().map(|m| m.2).collect();
    let name = format!("ppl {} / {}", multiple(longest), multiple(train_len));
    columns.push(Series::new(name.as_str().into(), ratios).into());
    DataFrame::new_infer_height(columns).map_err(|e| Error::Io(e.to_string()))
}

/// Each model of `mode`, in order of first appearance, with its [`SeedSummary`] at each
/// length; and the lengths and base training length of [`lengths`].
type SummarisedModels = (
    Vec<usize>,
    usize,
    Vec<(String, BTreeMap<usize, SeedSummary>)>,
);

/// [`SummarisedModels`] of `mode`.
///
/// # Errors
/// As [`lengths`] and [`crate::summary::seed_summaries`].
fn summarised_models(rows: &[ResultRow], mode: &str) -> Result<SummarisedModels> {
    let (lengths, train_len) = lengths(rows, mode)?;
    let in_mode: Vec<ResultRow> = rows.iter().filter(|r| r.mode == mode).cloned().collect();
    let mut models: Vec<(String, BTreeMap<usize, SeedSummary>)> = Vec::new();
    for summary in seed_summaries(&in_mode)? {
        let label = summary.label();
        match models.iter_mut().find(|(l, _)| *l == label) {
            Some((_, m)) => {
                m.insert(summary.eval_len, summary);
            }
            None => models.push((label, BTreeMap::from([(summary.eval_len, summary)]))),
        }
    }
    Ok((lengths, train_len, models))
}

/// Every seed of a model at any of its lengths, ascending.
fn seeds_of_model(by_length: &BTreeMap<usize, SeedSummary>) -> Vec<u64> {
    let mut seeds: Vec<u64> = by_length.values().flat_map(|s| s.seeds.clone()).collect();
    seeds.sort_unstable();
    seeds.dedup();
    seeds
}

/// The loss of each model at every length of `mode` over its training seeds: a `model`
/// column (its label, [`ResultRow::label`]), one column per length headed `nats 128 (1x)`,
/// ... holding `mean ± sd` of nats per byte at 3 decimals (the mean over seeds and the sample
/// standard deviation, $n - 1$ denominator, 0 with one seed: see
/// [`crate::summary::seed_summaries`]), and `seeds`, the model's seeds (`0, 1, 2`). A length
/// evaluated for fewer seeds than the model has says which, `1.234 ± 0.005 (seeds 0, 1)`; a
/// length a model lacks is empty.
///
/// Rows are sorted by $e^{\bar x(16L) - \bar x(L)}$, the perplexity ratio of the seed means
/// from the base training length $L$ to the longest length (best extrapolator first); with
/// one seed, the order of [`perplexity_table`].
///
/// The standard deviation is the spread of the seeds; whether two models differ is a question
/// for [`crate::summary::paired_difference`], on paired windows.
///
/// # Errors
/// As [`lengths`] and [`crate::summary::seed_summaries`]; [`Error::Io`] if a model lacks the
/// training length or the longest one.
pub fn seed_table(rows: &[ResultRow], mode: &str) -> Result<DataFrame> {
    let (lengths, train_len, models) = summarised_models(rows, mode)?;
    let longest = *lengths.last().unwrap_or(&train_len);
    let mut models = models
        .into_iter()
        .map(|(label, m)| match (m.get(&train_len), m.get(&longest)) {
            (Some(a), Some(b)) => Ok(((b.mean - a.mean).exp(), label, m)),
            _ => Err(Error::Io(format!(
                "{label} lacks length {train_len} or {longest}"
            ))),
        })
        .collect::<Result<Vec<_>>>()?;
    models.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cells: Vec<Vec<Option<String>>> = vec![Vec::new(); lengths.len()];
    let mut seeds_column = Vec::new();
    for (_, _, by_length) in &models {
        let seeds = seeds_of_model(by_length);
        for (column, l) in cells.iter_mut().zip(&lengths) {
            column.push(by_length.get(l).map(|s| {
                let cell = format!("{:.3} ± {:.3}", s.mean, s.sd);
                if s.seeds == seeds {
                    cell
                } else {
                    format!("{cell} (seeds {})", join_seeds(&s.seeds))
                }
            }));
        }
        seeds_column.push(join_seeds(&seeds));
    }
    let mut columns: Vec<Column> = vec![Series::new(
        "model".into(),
        models.iter().map(|m| m.1.as_str()).collect::<Vec<_>>(),
    )
    .into()];
    for (values, &l) in cells.into_iter().zip(&lengths) {
        let name = format!("nats {l} ({})", multiple(l, train_len));
        columns.push(Series::new(name.as_str().into(), values).into());
    }
    columns.push(Series::new("seeds".into(), seeds_column).into());
    DataFrame::new_infer_height(columns).map_err(|e| Error::Io(e.to_string()))
}

/// One model's loss against length over its training seeds ([`seed_curves`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SeedCurve {
    /// The model's label ([`ResultRow::label`]).
    pub label: String,
    /// Every seed of the model at any of its lengths, ascending.
    pub seeds: Vec<u64>,
    /// The lengths the model was evaluated at, ascending.
    pub lengths: Vec<f64>,
    /// The mean over seeds of nats per byte at each length.
    pub mean: Vec<f64>,
    /// The sample standard deviation over seeds at each length ($n - 1$ denominator; 0 with
    /// one seed).
    pub sd: Vec<f64>,
}

impl SeedCurve {
    /// `mean - sd` at each length, the lower side of a band ([`crate::notebook::Lines::band`]).
    pub fn lower(&self) -> Vec<f64> {
        self.mean.iter().zip(&self.sd).map(|(m, s)| m - s).collect()
    }

    /// `mean + sd` at each length.
    pub fn upper(&self) -> Vec<f64> {
        self.mean.iter().zip(&self.sd).map(|(m, s)| m + s).collect()
    }

    /// The curve as one series of [`crate::notebook::lines_with_bands`]: its label with its
    /// seed count when it has fewer than `planned` seeds ([`with_seed_count`]), the lengths,
    /// the mean, and mean ∓ sd.
    pub fn band(&self, planned: usize) -> crate::notebook::BandSeries {
        (
            with_seed_count(&self.label, self.seeds.len(), planned),
            self.lengths.clone(),
            self.mean.clone(),
            self.lower(),
            self.upper(),
        )
    }
}

/// Nats per byte against length over training seeds, one [`SeedCurve`] per model of `mode`
/// whose label `keep` accepts, in order of first appearance: at each length the mean over
/// the seeds and their sample standard deviation (as [`crate::summary::seed_summaries`]).
///
/// # Errors
/// As [`lengths`] and [`crate::summary::seed_summaries`].
pub fn seed_curves(
    rows: &[ResultRow],
    mode: &str,
    keep: impl Fn(&str) -> bool,
) -> Result<Vec<SeedCurve>> {
    let (_, _, models) = summarised_models(rows, mode)?;
    Ok(models
        .into_iter()
        .filter(|(label, _)| keep(label))
        .map(|(label, by_length)| SeedCurve {
            seeds: seeds_of_model(&by_length),
            lengths: by_length.keys().map(|&l| l as f64).collect(),
            mean: by_length.values().map(|s| s.mean).collect(),
            sd: by_length.values().map(|s| s.sd).collect(),
            label,
        })
        .collect())
}

/// `label` when it has all the `planned` seeds, else `label (1 of 3 seeds)`: how a figure's
/// legend names a model whose mean is over fewer seeds than the sweep runs.
pub fn with_seed_count(label: &str, seeds: usize, planned: usize) -> String {
    if seeds == planned {
        label.to_string()
    } else {
        let noun = if planned == 1 { "seed" } else { "seeds" };
        format!("{label} ({seeds} of {planned} {noun})")
    }
}

/// The validation curves of `posenc sweep` (`curves.csv`:
/// `scheme,variant,seed,step,bytes,train_loss,valid_loss`) over seeds, for plotting a band
/// per model: one row per model and step, models in order of first appearance and steps
/// ascending, with columns `model` (its label, as [`ResultRow::label`]), `step`, `bytes`
/// (training bytes at that step, the same for every seed), `seeds` (how many seeds reached
/// the step), and `mean`, `min` and `max` of `valid_loss` over those seeds (nats per byte).
/// `lines_df(&df, "bytes", "mean", Some("model"))` draws the means.
///
/// # Errors
/// [`Error::Io`] for a missing file or column; [`Error::InvalidParameter`] when the seeds of
/// a model disagree on the bytes of a step, or a seed of a model has a step twice.
pub fn curves_by_seed(path: &Path) -> Result<DataFrame> {
    let df = read_csv(path)?;
    let text = |name| column_str(&df, name).map_err(|e| io(path, e));
    let number = |name| column_f64(&df, name).map_err(|e| io(path, e));
    let (scheme, variant) = (text("scheme")?, text("variant")?);
    let (seed, step) = (number("seed")?, number("step")?);
    let (bytes, valid) = (number("bytes")?, number("valid_loss")?);
    // label -> step -> (bytes, [(seed, valid_loss)])
    type Steps = BTreeMap<u64, (f64, Vec<(u64, f64)>)>;
    let mut models: Vec<(String, Steps)> = Vec::new();
    for i in 0..df.height() {
        let label = if variant[i] == "base" {
            scheme[i].clone()
        } else {
            format!("{}/{}", scheme[i], variant[i])
        };
        let at = match models.iter().position(|(l, _)| *l == label) {
            Some(at) => at,
            None => {
                models.push((label, BTreeMap::new()));
                models.len() - 1
            }
        };
        let (label, steps) = &mut models[at];
        let (s, k) = (step[i] as u64, seed[i] as u64);
        let (b, losses) = steps.entry(s).or_insert((bytes[i], Vec::new()));
        ensure(
            *b == bytes[i],
            "bytes",
            format!(
                "{} for seed {k} of {label} at step {s}, {} for another seed",
                bytes[i], b
            ),
            "the same training bytes at a step for every seed",
        )?;
        if losses.iter().any(|(other, _)| *other == k) {
            return Err(invalid(
                "curves",
                format!("{label} seed {k} step {s} (twice)"),
                "one row per model, seed and step",
            ));
        }
        losses.push((k, valid[i]));
    }
    let (mut model, mut steps, mut seeds) = (Vec::new(), Vec::new(), Vec::new());
    let mut trained = Vec::new();
    let (mut mean, mut min, mut max) = (Vec::new(), Vec::new(), Vec::new());
    for (label, by_step) in &models {
        for (&s, (b, losses)) in by_step {
            let losses: Vec<f64> = losses.iter().map(|l| l.1).collect();
            model.push(label.as_str());
            steps.push(s);
            trained.push(*b as u64);
            seeds.push(losses.len() as u32);
            mean.push(losses.iter().sum::<f64>() / losses.len() as f64);
            min.push(losses.iter().copied().fold(f64::INFINITY, f64::min));
            max.push(losses.iter().copied().fold(f64::NEG_INFINITY, f64::max));
        }
    }
    DataFrame::new_infer_height(vec![
        Series::new("model".into(), model).into(),
        Series::new("step".into(), steps).into(),
        Series::new("bytes".into(), trained).into(),
        Series::new("seeds".into(), seeds).into(),
        Series::new("mean".into(), mean).into(),
        Series::new("min".into(), min).into(),
        Series::new("max".into(), max).into(),
    ])
    .map_err(|e| Error::Io(e.to_string()))
}

/// The `posenc` binary with training (`make build`): `$POSENC_BIN` if set, else
/// `target/release/posenc` of this crate.
///
/// # Errors
/// [`Error::Io`] saying how to build it when it is missing.
pub fn posenc_binary() -> Result<std::path::PathBuf> {
    let path = std::env::var_os("POSENC_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/posenc"));
    if path.is_file() {
        Ok(path)
    } else {
        Err(io(
            &path,
            "not built: run `make build` in the repository root",
        ))
    }
}

/// Runs the `posenc` binary with `args` in the repository root; returns its standard output.
///
/// `args` is anything that iterates over strings or paths: `["eval", "--lengths", "128"]`,
/// a `Vec<String>`, or a mix through `OsString`s.
///
/// # Errors
/// [`Error::Io`] with the command's error line when it fails, or when it cannot start.
pub fn run_posenc<I, S>(args: I) -> Result<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let args: Vec<std::ffi::OsString> = args
        .into_iter()
        .map(|a| a.as_ref().to_os_string())
        .collect();
    let bin = posenc_binary()?;
    let out = std::process::Command::new(&bin)
        .args(&args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .map_err(|e| io(&bin, e))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let line = stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let shown: Vec<_> = args.iter().map(|a| a.to_string_lossy()).collect();
        Err(Error::Io(format!("posenc {}: {line}", shown.join(" "))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_posenc_takes_any_strings_and_reports_failures() {
        // The only test that sets POSENC_BIN: /bin/echo stands in for the binary.
        std::env::set_var("POSENC_BIN", "/bin/echo");
        assert_eq!(
            run_posenc(["eval", "--lengths", "128"]).unwrap(),
            "eval --lengths 128\n"
        );
        let owned: Vec<String> = vec!["a".into(), format!("{}", 2)];
        assert_eq!(run_posenc(&owned).unwrap(), "a 2\n");
        let paths = [std::path::PathBuf::from("/tmp/x.csv")];
        assert_eq!(run_posenc(&paths).unwrap(), "/tmp/x.csv\n");
        std::env::set_var("POSENC_BIN", "/bin/false");
        let err = run_posenc(["train", "--steps", "1"]).unwrap_err();
        assert_eq!(err.to_string(), "posenc train --steps 1: ");
        std::env::set_var("POSENC_BIN", "/nonexistent/posenc");
        assert!(run_posenc(["x"])
            .unwrap_err()
            .to_string()
            .contains("make build"));
        std::env::remove_var("POSENC_BIN");
    }

    fn row(scheme: &str, variant: &str, eval_len: usize, nats: f64) -> ResultRow {
        ResultRow {
            train_len: if variant.starts_with("ft-") { 256 } else { 128 },
            ..ResultRow::example(scheme, variant, eval_len, 0, nats)
        }
    }

    fn sample() -> Vec<ResultRow> {
        let mut rows = Vec::new();
        for (l, a, b, c) in [
            (128, 1.5, 1.4, 1.6),
            (256, 1.6, 1.4, 1.5),
            (2048, 3.0, 1.45, 1.5),
        ] {
            rows.push(row("rope", "base", l, a));
            rows.push(row("alibi", "base", l, b));
            rows.push(row("rope", "ft-yarn", l, c));
        }
        rows
    }

    #[test]
    fn table_sorts_by_extrapolation_ratio() {
        let df = perplexity_table(&sample(), "nonoverlap").unwrap();
        assert_eq!(df.height(), 3);
        let names: Vec<String> = df
            .get_column_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(names[2], "ppl 128 (1x)");
        assert_eq!(names[4], "ppl 2048 (16x)");
        assert_eq!(names[5], "bpb 128 (1x)");
        assert_eq!(names.last().unwrap(), "ppl 16x / 1x");
        let schemes = column_str(&df, "variant").unwrap();
        // ft-yarn: 1.5 - 1.6 < 0 (ratio < 1), alibi: +0.05, rope: +1.5
        assert_eq!(schemes, ["ft-yarn", "base", "base"]);
        let ratio = column_f64(&df, "ppl 16x / 1x").unwrap();
        assert!((ratio[2] - (3.0f64 - 1.5).exp()).abs() < 1e-12);
        let bpb = column_f64(&df, "bpb 128 (1x)").unwrap();
        assert!((bpb[1] - 1.4 / std::f64::consts::LN_2).abs() < 1e-12);
    }

    /// `sample()` with a second seed whose rope is much worse at 2048: keyed by length alone,
    /// the table and the curves would show one seed's row for each length and drop the other.
    fn two_seeds() -> Vec<ResultRow> {
        let mut rows = sample();
        rows.extend(sample().into_iter().map(|mut r| {
            r.seed = 1;
            if r.scheme == "rope" && r.eval_len == 2048 {
                r.nats_per_byte = 4.0;
                r.perplexity = 4f64.exp();
            }
            r
        }));
        rows
    }

    #[test]
    fn table_and_curves_refuse_rows_of_several_seeds() {
        let rows = two_seeds();
        for e in [
            perplexity_table(&rows, "nonoverlap").unwrap_err(),
            perplexity_curves(&rows, "nonoverlap", |_| true).unwrap_err(),
        ] {
            let e = e.to_string();
            assert!(e.contains("nonoverlap rows of seeds 0, 1"), "{e}");
            assert!(e.contains("seed_table and seed_curves"), "{e}");
        }
        // one seed's rows, filtered, are fine, and each shows its own rope at 2048
        for (seed, nats) in [(0, 3.0), (1, 4.0)] {
            let one: Vec<ResultRow> = rows.iter().filter(|r| r.seed == seed).cloned().collect();
            let (_, series) = perplexity_curves(&one, "nonoverlap", |l| l == "rope").unwrap();
            assert_eq!(series[0].1[2], f64::exp(nats));
            assert_eq!(perplexity_table(&one, "nonoverlap").unwrap().height(), 3);
        }
        // seed 1 alone is one seed too (not only seed 0)
        let seed1: Vec<ResultRow> = rows.iter().filter(|r| r.seed == 1).cloned().collect();
        assert!(perplexity_table(&seed1, "nonoverlap").is_ok());
    }

    #[test]
    fn seed_curves_give_mean_and_sd_per_length() {
        // rope at 2048: 3.0 and 4.0 -> mean 3.5, sd sqrt(0.5); alibi identical seeds -> sd 0
        let curves = seed_curves(&two_seeds(), "nonoverlap", |l| !l.contains('/')).unwrap();
        let labels: Vec<&str> = curves.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(labels, ["rope", "alibi"]);
        let rope = &curves[0];
        assert_eq!(rope.seeds, [0, 1]);
        assert_eq!(rope.lengths, [128.0, 256.0, 2048.0]);
        assert_eq!(rope.mean[2], 3.5);
        assert!((rope.sd[2] - 0.5f64.sqrt()).abs() < 1e-12);
        assert_eq!((rope.mean[0], rope.sd[0]), (1.5, 0.0));
        assert!((rope.upper()[2] - (3.5 + 0.5f64.sqrt())).abs() < 1e-12);
        assert!((rope.lower()[2] - (3.5 - 0.5f64.sqrt())).abs() < 1e-12);
        assert_eq!(curves[1].sd, [0.0, 0.0, 0.0]);
        let (name, x, mean, lower, upper) = rope.band(3);
        assert_eq!(name, "rope (2 of 3 seeds)");
        assert_eq!((x, mean), (rope.lengths.clone(), rope.mean.clone()));
        assert_eq!((lower, upper), (rope.lower(), rope.upper()));
        assert_eq!(rope.band(2).0, "rope");
        // one seed: sd 0, the row's own values
        let one = seed_curves(&sample(), "nonoverlap", |l| l == "rope/ft-yarn").unwrap();
        assert_eq!(one[0].seeds, [0]);
        assert_eq!(one[0].mean, [1.6, 1.5, 1.5]);
        assert!(seed_curves(&sample(), "sliding", |_| true).is_err());
    }

    #[test]
    fn seed_counts_show_only_when_short() {
        assert_eq!(with_seed_count("rope", 3, 3), "rope");
        assert_eq!(with_seed_count("rope/ntk", 1, 3), "rope/ntk (1 of 3 seeds)");
        assert_eq!(with_seed_count("t5", 2, 3), "t5 (2 of 3 seeds)");
        assert_eq!(with_seed_count("t5", 0, 1), "t5 (0 of 1 seed)");
    }

    #[test]
    fn seed_table_shows_mean_and_sd_over_seeds() {
        // seed 1 is seed 0 plus 0.1 everywhere (the ratios and so the order unchanged), but
        // alibi lacks 256 for seed 1:
        // rope 128: 1.5, 1.6 -> 1.550 ± sqrt(0.005) = 0.071; alibi 256: 1.4 alone -> 0.000
        let mut rows = sample();
        rows.extend(sample().into_iter().filter_map(|mut r| {
            r.seed = 1;
            r.nats_per_byte += 0.1;
            r.perplexity = r.nats_per_byte.exp();
            (r.scheme != "alibi" || r.eval_len != 256).then_some(r)
        }));
        let df = seed_table(&rows, "nonoverlap").unwrap();
        let names: Vec<String> = df
            .get_column_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        assert_eq!(
            names,
            [
                "model",
                "nats 128 (1x)",
                "nats 256 (2x)",
                "nats 2048 (16x)",
                "seeds"
            ]
        );
        // the order of perplexity_table
        assert_eq!(
            column_str(&df, "model").unwrap(),
            ["rope/ft-yarn", "alibi", "rope"]
        );
        let at_128 = column_str(&df, "nats 128 (1x)").unwrap();
        assert_eq!(at_128[2], "1.550 ± 0.071");
        let at_256 = column_str(&df, "nats 256 (2x)").unwrap();
        assert_eq!(at_256[1], "1.400 ± 0.000 (seeds 0)");
        assert_eq!(at_256[0], "1.550 ± 0.071");
        assert_eq!(column_str(&df, "seeds").unwrap(), ["0, 1", "0, 1", "0, 1"]);
        // the order follows the seed means, not the last seed: a third seed whose ft-yarn is
        // far worse at 2048 moves it between alibi and rope (mean log ratios: alibi 0.05,
        // ft-yarn (-0.1 - 0.1 + 2.4) / 3 = 0.733, rope 1.5)
        let mut three = rows.clone();
        three.extend(sample().into_iter().map(|mut r| {
            r.seed = 2;
            if r.variant == "ft-yarn" && r.eval_len == 2048 {
                r.nats_per_byte = 4.0;
                r.perplexity = 4f64.exp();
            }
            r
        }));
        let df = seed_table(&three, "nonoverlap").unwrap();
        assert_eq!(
            column_str(&df, "model").unwrap(),
            ["alibi", "rope/ft-yarn", "rope"]
        );
        // a seed twice is an error
        let mut twice = sample();
        twice.push(sample()[0].clone());
        assert!(seed_table(&twice, "nonoverlap").is_err());
        assert!(seed_table(&rows, "sliding").is_err());
    }

    #[test]
    fn curves_by_seed_give_mean_and_range() {
        let dir = std::env::temp_dir().join(format!("posenc-curves-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("curves.csv");
        // rope: seeds 0 and 1 at steps 100 and 200, seed 2 only at 100; alibi one seed
        std::fs::write(
            &path,
            "scheme,variant,seed,step,bytes,train_loss,valid_loss\n\
             rope,base,0,100,10,3.0,2.0\n\
             rope,base,0,200,20,2.0,1.5\n\
             alibi,base,0,100,10,3.0,2.5\n\
             rope,base,1,100,10,3.0,2.4\n\
             rope,base,1,200,20,2.0,1.7\n\
             rope,base,2,100,10,3.0,2.3\n\
             rope,ntk,0,100,10,3.0,2.6\n",
        )
        .unwrap();
        let df = curves_by_seed(&path).unwrap();
        assert_eq!(
            column_str(&df, "model").unwrap(),
            ["rope", "rope", "alibi", "rope/ntk"]
        );
        assert_eq!(
            column_f64(&df, "step").unwrap(),
            [100.0, 200.0, 100.0, 100.0]
        );
        assert_eq!(column_f64(&df, "bytes").unwrap(), [10.0, 20.0, 10.0, 10.0]);
        assert_eq!(column_f64(&df, "seeds").unwrap(), [3.0, 2.0, 1.0, 1.0]);
        let mean = column_f64(&df, "mean").unwrap();
        // (2.0 + 2.4 + 2.3) / 3 and (1.5 + 1.7) / 2
        assert!((mean[0] - 6.7 / 3.0).abs() < 1e-12);
        assert!((mean[1] - 1.6).abs() < 1e-12);
        assert_eq!(column_f64(&df, "min").unwrap(), [2.0, 1.5, 2.5, 2.6]);
        assert_eq!(column_f64(&df, "max").unwrap(), [2.4, 1.7, 2.5, 2.6]);
        let e = curves_by_seed(&dir.join("missing.csv")).unwrap_err();
        assert!(e.to_string().contains("missing.csv"), "{e}");
        // seeds that disagree on the bytes of a step; a step twice
        let header = "scheme,variant,seed,step,bytes,train_loss,valid_loss\n";
        std::fs::write(
            &path,
            format!("{header}rope,base,0,100,10,3.0,2.0\nrope,base,1,100,12,3.0,2.0\n"),
        )
        .unwrap();
        let e = curves_by_seed(&path).unwrap_err().to_string();
        assert!(e.contains("12 for seed 1 of rope at step 100, 10"), "{e}");
        std::fs::write(
            &path,
            format!("{header}rope,base,0,100,10,3.0,2.0\nrope,base,0,100,10,3.0,2.1\n"),
        )
        .unwrap();
        let e = curves_by_seed(&path).unwrap_err().to_string();
        assert!(e.contains("rope seed 0 step 100 (twice)"), "{e}");
        std::fs::write(
            &path,
            "scheme,variant,seed,step,bytes\nrope,base,0,100,10\n",
        )
        .unwrap();
        let e = curves_by_seed(&path).unwrap_err();
        assert!(e.to_string().contains("valid_loss"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn curves_keep_the_asked_models() {
        let (x, series) = perplexity_curves(&sample(), "nonoverlap", |l| !l.contains('/')).unwrap();
        assert_eq!(x, [128.0, 256.0, 2048.0]);
        let names: Vec<&str> = series.iter().map(|s| s.0.as_str()).collect();
        assert_eq!(names, ["rope", "alibi"]);
        assert!(perplexity_curves(&sample(), "sliding", |_| true).is_err());
    }

    #[test]
    fn results_round_trip_through_csv() {
        let dir = std::env::temp_dir().join(format!("posenc-results-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.csv");
        let mut text = String::from("scheme,variant,train_len,eval_len,mode,nats_per_byte,std_error,bits_per_byte,perplexity,tokens_scored,steps,params,seed\n");
        for r in sample() {
            text.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                r.scheme,
                r.variant,
                r.train_len,
                r.eval_len,
                r.mode,
                r.nats_per_byte,
                r.std_error,
                r.bits_per_byte,
                r.perplexity,
                r.tokens_scored,
                r.steps,
                r.params,
                r.seed
            ));
        }
        std::fs::write(&path, text).unwrap();
        let rows = read_results(&path).unwrap();
        assert_eq!(rows.len(), 9);
        assert_eq!(rows[2].variant, "ft-yarn");
        assert_eq!(rows[2].train_len, 256);
        assert!((rows[0].perplexity - 1.5f64.exp()).abs() < 1e-9);
        // no scaling_factor column: None everywhere
        assert!(rows.iter().all(|r| r.scaling_factor.is_none()));
        let e = read_results(&dir.join("missing.csv")).unwrap_err();
        assert!(e.to_string().contains("missing.csv"), "{e}");
        // the column as the sweep writes it: empty without a scaling
        let mut with_factor = sample();
        with_factor[2].scaling_factor = Some(2.0);
        with_factor[5].scaling_factor = Some(0.5);
        std::fs::write(&path, crate::results::csv_bytes(&with_factor).unwrap()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().nth(1).unwrap().ends_with(','), "{text}");
        let back = read_results(&path).unwrap();
        assert_eq!(back, with_factor);
        // a table whose factors are all empty
        std::fs::write(&path, crate::results::csv_bytes(&sample()).unwrap()).unwrap();
        assert_eq!(read_results(&path).unwrap(), sample());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
