//! posenc with its `notebook` feature as one shared library: everything of [`posenc`],
//! re-exported unchanged (see `Cargo.toml` beside this folder for why).
pub use posenc::*;
