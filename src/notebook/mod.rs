//! Display helpers for the evcxr (Rust Jupyter) notebooks in `notebooks/`.
//!
//! Enabled by the `notebook` feature. A notebook needs a single dependency line (the package
//! `posenc-dylib` in `notebooks/dylib` is this crate with the feature, as one shared library),
//!
//! ```text
//! :dep posenc = { package = "posenc-dylib", path = "dylib" }
//! use posenc::notebook::prelude::*;
//! ```
//!
//! because this module re-exports the crates the notebooks use ([`ndarray`], [`ndarray_rand`],
//! [`plotly`], [`polars`] and its CSV reader [`polars_io`]) next to three kinds of helper:
//!
//! - **figures**: [`heatmap`], [`panels`], [`lines`], [`lines_xy`] and [`lines_df`] build the
//!   plots the notebooks draw again and again with named options
//!   (`heatmap(&z).title("..").x("..").y("..")`), from array views, vectors or DataFrame
//!   columns; [`Heatmap::figure`] and [`Lines::figure`] give the [`Figure`] (a
//!   [`plotly::Plot`] that displays itself offline) for anything else;
//! - **relative positions across schemes**: [`toeplitz_err`] (does a matrix depend on $j - i$
//!   only?), [`PositionMap`] and [`position_maps`] (which distance each scheme treats a distance
//!   as, with the trained region shaded), [`weights_by_distance`], [`mass_window`] and
//!   [`constant_from`] (one query's attention over 8k keys when content is silent), and the
//!   tables [`sign_conventions`] and [`scheme_summary`]; [`bucket_ranges`], which relative
//!   positions share each T5 bucket; [`wavelengths`], RoPE's wavelength spectrum against the
//!   training and target lengths;
//! - **notebook 10's claims**: [`claim_schemes`], [`shift_table`], [`append_changes`] and
//!   [`entropy_curves`] measure the position math of its claims 1 and 2 over 14 schemes,
//!   [`rope_unseen_pairs`] and [`rope_edits`] RoPE's side of its claims 2 (c) and 5;
//! - **checks**: [`check`] stops a cell on a false claim, [`try_check`] returns it as a
//!   `Result`, [`check_that`] stops it on a false inequality or property (with the numbers
//!   behind it), [`max_err`] measures the largest difference of two arrays, [`max_rel_err`]
//!   the largest relative error of two lists, [`randn`] makes
//!   seeded random inputs; [`golden_array`] and [`golden_number`] read the golden files of
//!   `tests/golden/`, [`rope_golden_distance`] measures RoPE frequencies against one of its
//!   cases in ulps ([`max_ulps`]), [`golden_matrix`] reads a matrix of a case, and
//!   [`golden_dpb`] and [`golden_dd_alibi`] load x-transformers' DPB and data-dependent
//!   ALiBi cases into the crate's [`crate::encodings::dpb::DynamicPositionBias`] and
//!   [`crate::encodings::dd_alibi::DataDependentAlibi`] beside the bias it computed;
//! - **display**: [`show`] sends any [`Show`] value (a [`Figure`], a [`plotly::Plot`], a
//!   [`polars::prelude::DataFrame`], an [`Html`] snippet) to the notebook, and a cell that
//!   ends in a `Figure` or a `DataFrame` displays it the same way;
//! - **tables**: [`df_to_html`] renders a DataFrame as an HTML table;
//! - **results**: [`results`] is [`crate::results`] (what `posenc sweep` wrote, typed, with
//!   its statistics and its one results table) plus its polars views: the results table as a
//!   DataFrame and any CSV file read with polars; [`run_posenc`] runs the release binary for
//!   what needs a trained model; [`serde_json`] is re-exported to read checkpoint
//!   configurations.
//!
//! # How a display reaches the notebook
//! evcxr reads the cell's standard output: a block
//! `EVCXR_BEGIN_CONTENT <mime type>` … `EVCXR_END_CONTENT` becomes one entry of the cell's
//! output, keyed by mime type. All blocks of one cell merge by mime type, so **one display
//! per cell**: a second figure in the same cell replaces the first.
//!
//! A figure is sent twice, as `application/vnd.plotly.v1+json` (drawn by JupyterLab's plotly
//! renderer, shipped with the Python `plotly` package the setup script installs) and as
//! `text/html` (drawn by plotly.js; used by HTML export and by front-ends without the
//! renderer). The first figure a kernel displays carries plotly.js itself, embedded, so
//! nothing is fetched from the network; later figures use that copy.

/// Everything a notebook uses, in one import: the math prelude ([`crate::prelude`]), this
/// module's helpers, the crates it re-exports, and [`results`] (the crate's results with
/// their polars views).
pub mod prelude {
    pub use super::*;
    pub use crate::prelude::*;
}

mod binary;
mod buckets;
mod check;
mod claims;
mod columns;
mod display;
mod figures;
mod golden;
mod golden_json;
mod relative;
pub mod results;
mod results_views;
mod rope_claims;
mod schemes;
mod table;
mod trained_claims;
mod wavelengths;

pub use ::ndarray;
pub use ::ndarray_rand;
pub use ::plotly;
pub use ::polars;
pub use ::polars_io;
pub use ::serde_json;

pub use binary::{posenc_binary, run_posenc};
pub use buckets::bucket_ranges;
pub use check::{check, check_that, max_err, max_rel_err, randn, try_check, CheckFailed};
pub use claims::{
    append_changes, claim_schemes, entropy_curves, last_query_entropy, max_err_finite, shift_table,
    ClaimScheme,
};
pub use display::{
    evcxr_block, figure_html, plotly_js, show, Figure, Html, NotebookDisplay, Show,
    PLOTLY_JSON_MIME,
};
pub use figures::{
    heatmap, lines, lines_df, lines_with_bands, lines_xy, panels, BandSeries, Heatmap, Lines,
    Panels, ToF64, Values, MAX_PANELS, PALETTE,
};
pub use golden::{golden_array, golden_number, max_ulps, rope_golden_distance};
pub use golden_json::{golden_dd_alibi, golden_dpb, golden_matrix};
pub use polars::prelude::{df, Column, DataFrame, NamedFrom, Series};
pub use relative::{
    constant_from, mass_window, position_maps, toeplitz_err, weights_by_distance, PositionMap,
};
pub use rope_claims::{rope_edits, rope_unseen_pairs, RopeEdits};
pub use schemes::{scheme_summary, sign_conventions, SUMMARY_CONFIG};
pub use table::{df_to_html, df_to_html_with, TableOptions};
pub use trained_claims::{
    capped_answer, changes_frame, keeps_frame, pairs_frame, relative_answer, rope_answer,
    rope_baseline_gaps, rope_methods_frame,
};
pub use wavelengths::wavelengths;
