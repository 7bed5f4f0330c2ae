//! One reader per file of a sweep's results folder (`data/results/` for the shipped sweep),
//! each through the crate's one CSV reader ([`crate::io::csv::read_csv`]) into the row type of
//! [`super::rows`].

use std::fmt;
use std::path::Path;

use super::rows::{CurveRow, PositionRow, ResultRow, WindowRow};
use crate::io::csv::read_csv;
use crate::{Error, Result};

/// The results table in a results folder.
pub const RESULTS_FILE: &str = "ppl_vs_length.csv";
/// The folder of per-window losses in a results folder.
pub const WINDOWS_DIR: &str = "windows";
/// The validation curves of every run in a results folder.
pub const CURVES_FILE: &str = "curves.csv";
/// The folder of per-position losses in a results folder.
pub const PER_POSITION_DIR: &str = "per_position";

/// Reads a results table (`ppl_vs_length.csv`, or what `posenc eval --csv` writes), with
/// [`ResultRow::scaling_factor`] `None` in an empty cell and everywhere in older tables without
/// the column.
///
/// # Errors
/// [`Error::Format`] naming the file when it cannot be read or a row does not fit (a missing
/// column, an unknown scheme or mode).
pub fn read_results(path: &Path) -> Result<Vec<ResultRow>> {
    read_csv(path)
}

/// Reads every `*.csv` file of `dir` (the sweep's `windows/` folder), in file-name order, as
/// [`WindowRow`]s (header `scheme,variant,seed,mode,eval_len,start,bytes,nats_per_byte`).
///
/// # Errors
/// [`Error::Io`] when the folder cannot be read or holds no `*.csv` file;
/// [`Error::Format`] naming the file for one that is not a table of windows.
pub fn read_windows_dir(dir: &Path) -> Result<Vec<WindowRow>> {
    let io = |e: &dyn fmt::Display| Error::Io(format!("{}: {e}", dir.display()));
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| io(&e))? {
        let path = entry.map_err(|e| io(&e))?.path();
        if path.is_file() && path.extension().is_some_and(|x| x == "csv") {
            files.push(path);
        }
    }
    if files.is_empty() {
        return Err(io(&"no *.csv file of windows"));
    }
    files.sort();
    let mut rows = Vec::new();
    for path in files {
        rows.extend(read_csv::<WindowRow>(&path)?);
    }
    Ok(rows)
}

/// Reads the validation curves of a sweep (`curves.csv`:
/// `scheme,variant,seed,step,bytes,train_loss,valid_loss`).
///
/// # Errors
/// [`Error::Format`] naming the file when it cannot be read or a row does not fit.
pub fn read_curves(path: &Path) -> Result<Vec<CurveRow>> {
    read_csv(path)
}

/// Reads the mean loss at each position of the longest window (`position,nats_per_byte`,
/// written by `posenc eval --per-position` and by the sweep under `per_position/`).
///
/// # Errors
/// [`Error::Format`] naming the file when it cannot be read or a row does not fit.
pub fn read_per_position(path: &Path) -> Result<Vec<PositionRow>> {
    read_csv(path)
}

/// The rows of a results folder and, when it has a `windows/` folder, its windows: what
/// `posenc report` reads.
///
/// # Errors
/// As [`read_results`] and [`read_windows_dir`].
pub fn read_results_dir(dir: &Path) -> Result<(Vec<ResultRow>, Option<Vec<WindowRow>>)> {
    let rows = read_results(&dir.join(RESULTS_FILE))?;
    let windows_dir = dir.join(WINDOWS_DIR);
    let windows = if windows_dir.is_dir() {
        Some(read_windows_dir(&windows_dir)?)
    } else {
        None
    };
    Ok((rows, windows))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::csv::csv_bytes;
    use crate::results::paired::{window, WindowKey};
    use crate::results::rows::{Mode, Scheme};

    fn shipped() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results")
    }

    #[test]
    fn read_windows_dir_reads_every_csv_and_names_bad_files() {
        let tmp = tempfile::Builder::new()
            .prefix("posenc-windows-")
            .tempdir()
            .unwrap();
        let dir = tmp.path();
        let e = read_windows_dir(dir).unwrap_err().to_string();
        assert!(e.contains("no *.csv file"), "{e}");
        let key = WindowKey::new(Scheme::Rope, "base", Mode::Nonoverlap, 128);
        let rows: Vec<WindowRow> = (0..10)
            .map(|i| window(&key, i % 2, 128 * (i as usize / 2), 128, 1.0 + i as f64))
            .collect();
        let (first, second) = rows.split_at(5);
        std::fs::write(dir.join("b.csv"), csv_bytes(second).unwrap()).unwrap();
        std::fs::write(dir.join("a.csv"), csv_bytes(first).unwrap()).unwrap();
        std::fs::write(dir.join("notes.txt"), "not a table").unwrap();
        assert_eq!(read_windows_dir(dir).unwrap(), rows);
        std::fs::write(dir.join("c.csv"), "scheme,variant\nrope,base\n").unwrap();
        let e = read_windows_dir(dir).unwrap_err().to_string();
        assert!(e.contains("c.csv"), "{e}");
        std::fs::remove_dir_all(dir).unwrap();
        let e = read_windows_dir(dir).unwrap_err().to_string();
        assert!(e.contains("posenc-windows"), "{e}");
    }

    #[test]
    fn results_round_trip_through_csv() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let path = dir.join("r.csv");
        let sample: Vec<ResultRow> = [(Scheme::Rope, "base"), (Scheme::Alibi, "base")]
            .into_iter()
            .chain([(Scheme::Rope, "ft-yarn")])
            .flat_map(|(s, v)| {
                [128, 256, 2048].map(|l| ResultRow {
                    train_len: if v.starts_with("ft-") { 256 } else { 128 },
                    ..ResultRow::example(s, v, l, 0, 1.5)
                })
            })
            .collect();
        // a table without the scaling_factor column: None everywhere
        let mut text = String::from("scheme,variant,train_len,eval_len,mode,nats_per_byte,std_error,bits_per_byte,perplexity,tokens_scored,steps,params,seed\n");
        for r in &sample {
            text.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
                r.scheme,
                r.variant,
                r.train_len,
                r.eval_len,
                r.mode.name(),
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
        assert_eq!(rows[6].variant, "ft-yarn");
        assert_eq!(rows[6].train_len, 256);
        assert!((rows[0].perplexity - 1.5f64.exp()).abs() < 1e-9);
        assert!(rows.iter().all(|r| r.scaling_factor.is_none()));
        let e = read_results(&dir.join("missing.csv")).unwrap_err();
        assert!(e.to_string().contains("missing.csv"), "{e}");
        // the column as the sweep writes it: empty without a scaling
        let mut with_factor = sample.clone();
        with_factor[2].scaling_factor = Some(2.0);
        with_factor[5].scaling_factor = Some(0.5);
        std::fs::write(&path, csv_bytes(&with_factor).unwrap()).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.lines().nth(1).unwrap().ends_with(','), "{text}");
        assert_eq!(read_results(&path).unwrap(), with_factor);
        // a table whose factors are all empty
        std::fs::write(&path, csv_bytes(&sample).unwrap()).unwrap();
        assert_eq!(read_results(&path).unwrap(), sample);
    }

    /// Every shipped file reads into its type and writes back byte for byte.
    #[test]
    fn shipped_files_read_and_write_back_unchanged() {
        let dir = shipped();
        let (rows, windows) = read_results_dir(&dir).unwrap();
        assert_eq!(
            csv_bytes(&rows).unwrap(),
            std::fs::read(dir.join(RESULTS_FILE)).unwrap()
        );
        assert!(windows.is_some_and(|w| !w.is_empty()));
        let curves = read_curves(&dir.join(CURVES_FILE)).unwrap();
        assert_eq!(
            csv_bytes(&curves).unwrap(),
            std::fs::read(dir.join(CURVES_FILE)).unwrap()
        );
        let path = dir.join(PER_POSITION_DIR).join("rope-seed0.csv");
        let positions = read_per_position(&path).unwrap();
        assert_eq!(positions.len(), 2048);
        assert_eq!(
            csv_bytes(&positions).unwrap(),
            std::fs::read(&path).unwrap()
        );
    }
}
