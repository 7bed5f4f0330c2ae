//! The atomic folder protocol: a folder of files replaced as one unit.
//!
//! [`replace`] writes every file into a fresh sibling folder `.NAME.new`, syncs every file and
//! the folder, then moves an existing `NAME` aside (`.NAME.old`), renames the new folder into
//! place and only then deletes the old one, syncing the parent folder after each rename. A
//! kill at any point leaves `NAME` whole (old or new), or `NAME` missing beside a whole
//! `.NAME.new` and `.NAME.old`; [`recover`] then puts the new one in place if it is complete,
//! else the old one. What "complete" means is the caller's (for a checkpoint: `config.json`
//! valid and the weights it records).

use std::fs;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::io::{io_error, parent_of, sync_dir, sync_file};

/// A step of a save, after which a test can stop it as a kill would.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaveStep {
    /// Only the weights written into `.NAME.new` (a kill while writing).
    WeightsWritten,
    /// Every file of `.NAME.new` written and synced.
    NewSynced,
    /// The existing checkpoint renamed to `.NAME.old`.
    OldMovedAside,
    /// `.NAME.new` renamed to `NAME`, `.NAME.old` not yet removed.
    NewMovedIn,
}

/// The error of a save of `dir` stopped at a [`SaveStep`].
pub(super) fn stopped(dir: &Path) -> Error {
    Error::Io(format!("save of {} stopped", dir.display()))
}

/// `.NAME.new` or `.NAME.old` beside the folder `dir`.
pub(super) fn sibling(dir: &Path, suffix: &str) -> PathBuf {
    let name = dir
        .file_name()
        .map_or_else(|| "checkpoint".into(), |n| n.to_string_lossy().into_owned());
    parent_of(dir).join(format!(".{name}.{suffix}"))
}

/// Brings a folder whose replacement was interrupted back to a whole state: when `dir` is
/// missing but `.NAME.new` or `.NAME.old` is there, the new one goes into place if it is
/// `complete`, else the old one. A present `dir` is left alone (leftovers beside it are
/// removed by the next [`replace`]).
///
/// # Errors
/// A failed rename.
pub(super) fn recover(dir: &Path, complete: impl Fn(&Path) -> bool) -> Result<()> {
    if dir.exists() {
        return Ok(());
    }
    let (new, old) = (sibling(dir, "new"), sibling(dir, "old"));
    let pick = if new.is_dir() && complete(&new) {
        new
    } else if old.is_dir() {
        old
    } else {
        return Ok(());
    };
    fs::rename(&pick, dir).map_err(|e| io_error(&pick, e))?;
    sync_dir(&parent_of(dir))
}

/// Replaces the folder `dir` as one unit (see the module documentation): [`recover`]s it with
/// `complete`, lets `fill` write every file into a fresh `.NAME.new`, syncs them and renames
/// it into place. When the last rename fails because a reader's [`recover`] has put this very
/// folder in place already, `ours` (asked of `dir`) says so and the save goes on. `stop` ends
/// the save after a step, as a kill would (`fill` handles [`SaveStep::WeightsWritten`]).
///
/// # Errors
/// `dir` exists and is not a folder, a failed write or rename, or [`stopped`].
pub(super) fn replace(
    dir: &Path,
    stop: Option<SaveStep>,
    complete: impl Fn(&Path) -> bool,
    fill: impl FnOnce(&Path) -> Result<()>,
    ours: impl Fn(&Path) -> bool,
) -> Result<()> {
    let parent = parent_of(dir);
    fs::create_dir_all(&parent).map_err(|e| io_error(&parent, e))?;
    recover(dir, &complete)?;
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Io(format!(
            "{}: exists and is not a folder",
            dir.display()
        )));
    }
    let (new, old) = (sibling(dir, "new"), sibling(dir, "old"));
    for leftover in [&new, &old] {
        if leftover.exists() {
            fs::remove_dir_all(leftover).map_err(|e| io_error(leftover, e))?;
        }
    }
    fs::create_dir(&new).map_err(|e| io_error(&new, e))?;
    fill(&new)?;
    for entry in fs::read_dir(&new).map_err(|e| io_error(&new, e))? {
        let path = entry.map_err(|e| io_error(&new, e))?.path();
        if path.is_file() {
            sync_file(&path)?;
        }
    }
    sync_dir(&new)?;
    if stop == Some(SaveStep::NewSynced) {
        return Err(stopped(dir));
    }
    if dir.exists() {
        fs::rename(dir, &old).map_err(|e| io_error(dir, e))?;
        sync_dir(&parent)?;
    }
    if stop == Some(SaveStep::OldMovedAside) {
        return Err(stopped(dir));
    }
    if let Err(e) = fs::rename(&new, dir) {
        // a reader's `recover` may have put this very folder in place between the renames
        if !ours(dir) {
            return Err(io_error(&new, e));
        }
    }
    sync_dir(&parent)?;
    if stop == Some(SaveStep::NewMovedIn) {
        return Err(stopped(dir));
    }
    if old.exists() {
        fs::remove_dir_all(&old).map_err(|e| io_error(&old, e))?;
        sync_dir(&parent)?;
    }
    Ok(())
}
