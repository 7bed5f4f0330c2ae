//! Content digests: what a checkpoint records of its weights, of the training text and of the
//! checkpoint a fine-tune started from, and what the sweep compares to reuse its work.

use std::fs;
use std::path::Path;

use sha2::{Digest, Sha256};

use super::io_error;
use crate::error::Result;

/// The SHA-256 digest of `bytes` as `sha256:` and 64 hex digits.
///
/// # Examples
/// ```
/// let d = posenc::io::digest(b"");
/// assert_eq!(d, "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
/// ```
pub fn digest(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// The [`digest`] of a file's content.
///
/// # Errors
/// An unreadable file.
pub fn file_digest(path: &Path) -> Result<String> {
    let bytes = fs::read(path).map_err(|e| io_error(path, e))?;
    Ok(digest(&bytes))
}
