//! Everything a sweep's results say, in every build (no feature needed): the typed rows of its
//! files ([`rows`]: [`ResultRow`], [`WindowRow`], [`CurveRow`], [`PositionRow`], and the one
//! [`ModelKey`] with its one [`ModelKey::label`]), one reader per file ([`files`]), statistics
//! over seeds ([`stats`]) and paired windows ([`paired`]), the tests behind every verdict ([`inference`]:
//! a $t$ test over seeds with [`student`]'s distribution, Holm's correction, a bootstrap over
//! the text), curves over seeds and the plateau of each run ([`curves`]), the one results
//! table ([`table`]) and its markdown ([`markdown`]; `posenc report`, whole or in parts, [`mod@report`]), the setup of a
//! sweep read back from its checkpoints ([`setup`]) and its record ([`record`]); models
//! against each other at one length and the windows checked against the rows ([`contrast`]);
//! seeds per model and rows reproduced ([`checks`]); where each model breaks by
//! position ([`breaks`]); and the exports of a trained model, T5 bias and attention maps
//! ([`exports`]); the source notes' claims asked of the trained models ([`families`]) and
//! what the RoPE methods change ([`mod@rope_methods`]) and what twice the training changes
//! ([`budget`]), both models against a base ([`against_base`]).
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
//! assert_eq!(table.header()[3], "128 (1x)");
//! assert_eq!(table.cells()[0][2], "3"); // seeds
//! # Ok::<(), posenc::Error>(())
//! ```

pub mod against_base;
pub mod breaks;
pub mod budget;
pub mod checks;
pub mod contrast;
pub mod curves;
pub mod exports;
pub mod families;
pub mod files;
pub mod inference;
pub mod markdown;
pub mod paired;
pub mod record;
pub mod report;
pub mod rope_methods;
pub mod rows;
pub mod setup;
pub mod stats;
pub mod student;
pub mod table;

pub use against_base::{against_bases, labels_with, AgainstBase};
pub use breaks::{break_point, per_position_path, position_curves, Break, PositionCurve};
pub use budget::{budget_effects, BudgetEffect};
pub use checks::{models_with_seeds, printed, reproduction, Reproduction};
pub use contrast::{against_best, rows_contrast, table_rows_error, verdict_lists, AtLength};
pub use curves::{
    curve_summaries, plateaus, seed_curves, CurvePoint, Plateau, SeedCurve, PLATEAU_GAIN,
};
pub use exports::{
    bias_by_distance, far_mass, last_layer_map, read_attention, read_t5_bias, row_sum_error,
    spread_from, AttentionRow, BiasRow, NamedSeries,
};
pub use families::{
    capped_keep_their_loss, family, relative_against_absolute, scheme_changes, Family, KeepTest,
    Keeps, PairTest, Relation, SchemeChange, KEEPS,
};
pub use files::{
    read_curves, read_per_position, read_results, read_results_dir, read_windows_dir, CURVES_FILE,
    PER_POSITION_DIR, RESULTS_FILE, WINDOWS_DIR,
};
pub use inference::{
    bootstrap, compare, difference_of_changes, holm, holm_critical_t, holm_family, BootstrapTerm,
    Comparison, Tested, TextUncertainty, Verdict, ALPHA, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED,
};
pub use markdown::{
    main_markdown, plateau_markdown, plateau_summary, primary_mode, reference_markdown,
    results_markdown, table_markdown,
};
pub use paired::{matched_segments, paired_difference, PairedDifference, WindowKey};
pub use record::{
    expected_factor, factor_problems, planned_seeds, read_record, row_problems, seed_gaps,
    RECORD_FILE,
};
pub use report::{report, ReportPart, DEFAULT_REFERENCE};
pub use rope_methods::{rope_methods, RopeMethod};
pub use rows::{
    with_seed_count, CurveRow, Mode, ModelKey, PositionRow, ResultRow, Scheme, WindowRow, BASE,
};
pub use setup::{check_setup, read_checkpoints, Setup, SetupRow, TrainedModel, Training};
pub use stats::{mean_and_sd, seed_summaries, SeedSummary};
pub use student::{t_cdf, t_quantile, two_sided_p};
pub use table::{ResultsTable, TableRow};
