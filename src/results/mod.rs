//! Everything a sweep's results say, in every build (no feature needed): the typed rows of its
//! files ([`rows`]: [`ResultRow`], [`WindowRow`], [`CurveRow`], [`PositionRow`], and the one
//! [`ModelKey`] with its one [`ModelKey::label`]), one reader per file ([`files`]), statistics
//! over seeds and paired windows ([`stats`]), curves over seeds ([`curves`]), the one results
//! table ([`table`]) and its markdown ([`markdown`], `posenc report`).
//!
//! The notebooks render the same table and curves as DataFrames and figures
//! (`posenc::notebook::results`, feature `notebook`); `posenc eval` and `posenc sweep`
//! (feature `train`) write the rows.
//!
//! ```
//! use posenc::results::{Mode, ResultsTable};
//! let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("data/results");
//! let (rows, windows) = posenc::results::read_results_dir(&dir)?;
//! let table = ResultsTable::new(&rows, windows.as_deref(), Mode::Nonoverlap)?;
//! assert_eq!(table.header()[2], "128 (1x)");
//! assert_eq!(table.cells()[0][0], "rope");
//! # Ok::<(), posenc::Error>(())
//! ```

pub mod curves;
pub mod files;
pub mod markdown;
pub mod rows;
pub mod stats;
pub mod table;

pub use curves::{curve_summaries, seed_curves, CurvePoint, SeedCurve};
pub use files::{
    read_curves, read_per_position, read_results, read_results_dir, read_windows_dir, CURVES_FILE,
    PER_POSITION_DIR, RESULTS_FILE, WINDOWS_DIR,
};
pub use markdown::{report, results_markdown, table_markdown};
pub use rows::{
    with_seed_count, CurveRow, Mode, ModelKey, PositionRow, ResultRow, Scheme, WindowRow, BASE,
};
pub use stats::{
    mean_and_sd, paired_difference, seed_summaries, PairedDifference, SeedSummary, WindowKey,
};
pub use table::{ResultsTable, TableRow, Verdict, Z};
