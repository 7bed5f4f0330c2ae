//! The results of `posenc sweep` for the notebooks: everything of [`crate::results`]
//! (re-exported here, so a notebook's `results::` names both) and polars views of it: the
//! results table as a DataFrame ([`table_frame`], the same cells as the README's markdown),
//! the validation curves over seeds ([`curves_frame`]), the setup read back from the
//! checkpoints ([`setup_frame`]), and any CSV file as a DataFrame
//! ([`read_csv`], [`column_f64`], [`column_str`], [`column_bool`]) for the exports the binary writes.

use std::path::Path;

use polars::prelude::{Column, DataFrame};
use polars_io::prelude::{CsvReadOptions, SerReader};

use super::columns::Columns;

pub use super::results_views::{
    at_length_frame, attention_figure, breaks_frame, budget_frame, factors_frame, far_mass_frame,
    plateau_frame, reproduction_frame, seeds_frame, text_frame, validation_bands,
};
pub use crate::results::*;
use crate::{Error, Result};

fn io(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// The columns as a DataFrame.
pub(crate) fn frame(columns: Vec<Column>) -> Result<DataFrame> {
    DataFrame::new_infer_height(columns).map_err(|e| Error::Io(e.to_string()))
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

/// The column `name` of `df` as booleans.
///
/// # Errors
/// [`Error::Io`] naming the column when it is missing, not boolean or has a missing value.
pub fn column_bool(df: &DataFrame, name: &str) -> Result<Vec<bool>> {
    let column = df
        .column(name)
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    let values = column
        .bool()
        .map_err(|e| Error::Io(format!("column {name}: {e}")))?;
    values
        .iter()
        .map(|v| v.ok_or_else(|| Error::Io(format!("column {name}: a missing value"))))
        .collect()
}

/// The results table as a DataFrame: a text column per [`ResultsTable::header`] entry,
/// holding [`ResultsTable::cells`] (so the same cells, in the same order, as the README's
/// markdown, [`crate::results::table_markdown`]).
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns (it does not for a table
/// [`ResultsTable::new`] built).
///
/// # Examples
/// ```
/// use posenc::notebook::results::{table_frame, Mode, ResultsTable};
/// let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results");
/// let (rows, windows) = posenc::results::read_results_dir(&dir)?;
/// let df = table_frame(&ResultsTable::new(&rows, windows.as_deref(), Mode::Nonoverlap)?)?;
/// assert_eq!(df.get_column_names()[3].as_str(), "128 (1x)");
/// # Ok::<(), posenc::Error>(())
/// ```
pub fn table_frame(table: &ResultsTable) -> Result<DataFrame> {
    text_frame(&table.header(), &table.cells())
}

/// The validation curves over seeds ([`curve_summaries`]) as a DataFrame, for plotting a
/// band per model: one row per model and step, with columns `model` (its label), `step`,
/// `bytes`, `seeds` (how many seeds reached the step), and `mean`, `min` and `max` of the
/// validation loss over those seeds (nats per byte).
/// `lines_df(&df, "bytes", "mean", Some("model"))` draws the means.
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn curves_frame(points: &[CurvePoint]) -> Result<DataFrame> {
    let c = Columns(points);
    frame(vec![
        c.text("model", |p| p.model.label()),
        c.count("step", |p| p.step),
        c.count("bytes", |p| p.bytes),
        c.count("seeds", |p| p.seeds),
        c.number("mean", |p| p.mean),
        c.number("min", |p| p.min),
        c.number("max", |p| p.max),
    ])
}

/// The setup of a sweep ([`check_setup`]) as a DataFrame, one row per checkpoint: `checkpoint`
/// (its folder), `trained` ([`SetupRow::describe`]), `scheme`, `seed`, `parameters`, `steps`,
/// `batch x length`, `training bytes (MB)`, `peak lr`, `final train loss (nats/byte)`,
/// `training time (min)` and `throughput (bytes/s)`.
///
/// # Errors
/// [`Error::Io`] if polars refuses the columns.
pub fn setup_frame(setup: &Setup) -> Result<DataFrame> {
    let c = Columns(&setup.rows);
    frame(vec![
        c.text("checkpoint", |r| r.model.name.clone()),
        c.text("trained", SetupRow::describe),
        c.text("scheme", |r| r.model.info.model.scheme.to_string()),
        c.column("seed", |r| r.model.info.train.seed),
        c.count("parameters", |r| r.model.info.params),
        c.count("steps", |r| r.model.info.train.steps),
        c.text("batch x length", |r| {
            let (info, model) = (&r.model.info.train, &r.model.info.model);
            format!("{} x {}", info.batch, model.train_len)
        }),
        c.number("training bytes (MB)", |r| r.bytes() as f64 / 1e6),
        c.number("peak lr", |r| r.model.info.train.lr),
        c.number("final train loss (nats/byte)", |r| {
            r.model.info.final_train_loss.unwrap_or(f64::NAN)
        }),
        c.number("training time (min)", |r| r.model.info.train_seconds / 60.0),
        c.number("throughput (bytes/s)", |r| {
            r.model.info.tokens_per_second.unwrap_or(f64::NAN)
        }),
    ])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(scheme: Scheme, variant: &str, eval_len: usize, seed: u64, nats: f64) -> ResultRow {
        let mut r = ResultRow::example(scheme, variant, eval_len, seed, nats);
        if variant.starts_with("ft-") {
            r.train_len = 256;
        }
        r
    }

    /// Two seeds of rope, alibi and rope/ft-yarn at 128, 256 and 2048 bytes, with windows.
    fn sample() -> (Vec<ResultRow>, Vec<WindowRow>) {
        let (mut rows, mut windows) = (Vec::new(), Vec::new());
        for seed in [0, 1] {
            let shift = 0.1 * seed as f64;
            for (l, a, b, c) in [
                (128, 1.5, 1.4, 1.6),
                (256, 1.6, 1.4, 1.5),
                (2048, 3.0, 1.45, 1.5),
            ] {
                for (scheme, variant, x) in [
                    (Scheme::Rope, "base", a),
                    (Scheme::Alibi, "base", b),
                    (Scheme::Rope, "ft-yarn", c),
                ] {
                    rows.push(row(scheme, variant, l, seed, x + shift));
                    for (start, noise) in [(0, -0.05), (2048, 0.05)] {
                        windows.push(WindowRow {
                            scheme,
                            variant: variant.into(),
                            seed,
                            mode: Mode::Nonoverlap,
                            eval_len: l,
                            start,
                            bytes: l,
                            nats_per_byte: x + shift + noise * (l as f64).ln(),
                        });
                    }
                }
            }
        }
        (rows, windows)
    }

    /// The DataFrame and the markdown of one table hold the same cells under the same header.
    #[test]
    fn table_frame_has_the_cells_of_the_markdown() {
        let (rows, windows) = sample();
        for windows in [None, Some(windows.as_slice())] {
            let table = ResultsTable::new(&rows, windows, Mode::Nonoverlap).unwrap();
            let df = table_frame(&table).unwrap();
            let md = table_markdown(&table);
            let header: Vec<String> = df
                .get_column_names()
                .iter()
                .map(|n| n.to_string())
                .collect();
            let mut lines = md.lines().skip_while(|l| !l.starts_with("| "));
            assert_eq!(lines.next().unwrap(), format!("| {} |", header.join(" | ")));
            lines.next();
            assert_eq!(df.height(), 3);
            for i in 0..df.height() {
                let cells: Vec<String> = header
                    .iter()
                    .map(|name| column_str(&df, name).unwrap()[i].clone())
                    .collect();
                assert_eq!(lines.next().unwrap(), format!("| {} |", cells.join(" | ")));
            }
            // the README's rules: lengths ascending and headed as multiples of the shortest
            // training length, mean ± sd over two seeds; models in order of first appearance
            // without windows, ranked by their change with them
            let order = column_str(&df, "model").unwrap();
            if windows.is_some() {
                assert_eq!(order, ["rope/ft-yarn", "alibi", "rope"]);
            } else {
                assert_eq!(order, ["rope", "alibi", "rope/ft-yarn"]);
            }
            assert_eq!(
                &header[..6],
                [
                    "model",
                    "params",
                    "seeds",
                    "128 (1x)",
                    "256 (2x)",
                    "2048 (16x)"
                ]
            );
            assert_eq!(column_str(&df, "seeds").unwrap(), ["2", "2", "2"]);
            // rope at 128: 1.5 and 1.6 -> 1.550 ± sqrt(0.005) = 0.071
            let rope = order.iter().position(|m| m == "rope").unwrap();
            assert_eq!(column_str(&df, "128 (1x)").unwrap()[rope], "1.550 ± 0.071");
            assert_eq!(header.len(), 6 + 6 * usize::from(windows.is_some()));
        }
        let table = ResultsTable::new(&rows, Some(&sample().1), Mode::Nonoverlap).unwrap();
        let df = table_frame(&table).unwrap();
        // alibi from 1.45 to 1.5: +0.050, second in the ranking
        assert_eq!(column_str(&df, "2048 − 128").unwrap()[1], "+0.050");
        assert!(ResultsTable::new(&rows, None, Mode::Sliding).is_err());
    }

    #[test]
    fn curves_frame_has_a_row_per_model_and_step() {
        let curve = |variant: &str, seed, step, valid| CurveRow {
            scheme: Scheme::Rope,
            variant: variant.into(),
            seed,
            step,
            bytes: 10 * step,
            train_loss: 3.0,
            valid_loss: valid,
        };
        let rows = vec![
            curve("base", 0, 100, 2.0),
            curve("base", 1, 100, 2.4),
            curve("ntk", 0, 100, 2.6),
        ];
        let df = curves_frame(&curve_summaries(&rows).unwrap()).unwrap();
        assert_eq!(column_str(&df, "model").unwrap(), ["rope", "rope/ntk"]);
        assert_eq!(column_f64(&df, "bytes").unwrap(), [1000.0, 1000.0]);
        assert_eq!(column_f64(&df, "seeds").unwrap(), [2.0, 1.0]);
        assert_eq!(column_f64(&df, "min").unwrap(), [2.0, 2.6]);
        assert_eq!(column_f64(&df, "max").unwrap(), [2.4, 2.6]);
        assert!((column_f64(&df, "mean").unwrap()[0] - 2.2).abs() < 1e-12);
    }

    #[test]
    fn the_setup_frame_has_a_row_per_checkpoint_with_its_bytes() {
        use crate::lm::config::{CheckpointInfo, ModelConfig, SweepConfig, WeightDtype};
        let record = SweepConfig::default();
        let models: Vec<TrainedModel> = [(Scheme::Rope, 0), (Scheme::Alibi, 1)]
            .into_iter()
            .map(|(scheme, seed)| {
                let model = ModelConfig {
                    scheme,
                    ..record.model.clone()
                };
                let train = crate::lm::config::TrainConfig {
                    seed,
                    ..record.train.clone()
                };
                let mut info = CheckpointInfo::new(model, train, 826_112, WeightDtype::F16);
                info.step = info.train.steps;
                info.train_seconds = 120.0;
                info.corpus_digest = Some("sha256:text".into());
                TrainedModel {
                    name: format!("{scheme}-seed{seed}"),
                    info,
                }
            })
            .collect();
        let setup = check_setup(&record, &models);
        assert!(setup.problems.is_empty(), "{:?}", setup.problems);
        let df = setup_frame(&setup).unwrap();
        assert_eq!(
            column_str(&df, "checkpoint").unwrap(),
            ["rope-seed0", "alibi-seed1"]
        );
        assert_eq!(column_str(&df, "trained").unwrap(), ["from scratch"; 2]);
        assert_eq!(column_f64(&df, "seed").unwrap(), [0.0, 1.0]);
        // 2000 steps of 32 x 128 bytes
        assert_eq!(column_f64(&df, "training bytes (MB)").unwrap(), [8.192; 2]);
        assert_eq!(column_f64(&df, "training time (min)").unwrap(), [2.0; 2]);
        assert_eq!(column_str(&df, "batch x length").unwrap(), ["32 x 128"; 2]);
    }

    #[test]
    fn csv_files_read_as_data_frames() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results/curves.csv");
        let df = read_csv(&path).unwrap();
        assert_eq!(
            column_f64(&df, "step").unwrap().len(),
            read_curves(&path).unwrap().len()
        );
        assert!(column_f64(&df, "scheme").is_err());
        let e = read_csv(&path.with_file_name("missing.csv")).unwrap_err();
        assert!(e.to_string().contains("missing.csv"), "{e}");
    }
}
