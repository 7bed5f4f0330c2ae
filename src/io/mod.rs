//! File input and output shared by the whole crate, in every build: CSV tables through serde
//! ([`csv`]), atomic writes
//! ([`write_atomic`]) and the checks that an output can be written before any work
//! ([`ensure_writable`], [`ensure_dir_writable`]), content digests ([`digest`],
//! [`file_digest`]), JSON files read into types whose unknown keys are errors
//! ([`read_json`], [`write_json`]), and the lock a writer holds on what it writes as a unit
//! ([`FolderLock`]). Every error names its file.

mod atomic;
pub mod csv;
mod digest;
mod json;
mod lock;

pub use atomic::{ensure_dir_writable, ensure_writable, write_atomic};
pub use digest::{digest, file_digest};
pub use json::{read_json, write_json};
pub use lock::FolderLock;

pub(crate) use atomic::parent_of;
// the checkpoint folder protocol (feature `train`) builds on these
#[cfg(feature = "train")]
pub(crate) use atomic::{sync_dir, sync_file};
#[cfg(feature = "train")]
pub(crate) use json::to_json;

use std::path::Path;

use crate::error::Error;

/// An [`Error::Io`] naming `path`: a file that could not be read or written.
pub(crate) fn io_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io(format!("{}: {e}", path.display()))
}

/// An [`Error::Format`] naming `path`: a file read whole whose content is wrong.
pub(crate) fn format_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Format {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}
