//! Atomic writes: a file is written into a synced temporary file beside it and renamed into
//! place, so a reader sees the old content or the new, never half of it; and the checks, made
//! before any work, that an output file or folder can be written at all.

use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::io_error;
use crate::error::{Error, Result};

/// Writes `bytes` to `path` through a synced temporary file in the same folder and a rename,
/// so a reader never sees a half-written file.
///
/// # Errors
/// When the folder cannot be created or the file written.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = parent_of(path);
    fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = path.with_file_name(format!(".{name}.tmp-{}", std::process::id()));
    let written = (|| {
        let mut file = fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io_error(&tmp, e));
    }
    fs::rename(&tmp, path).map_err(|e| io_error(path, e))?;
    sync_dir(&dir)
}

/// The folder holding `path` (`.` for a bare name).
pub(crate) fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Checks, before any work, that a file can be written at `path`: it is not a folder, its
/// folder exists or can be created, and a file can be created there (a probe file, removed at
/// once).
///
/// # Errors
/// [`Error::Io`] saying why not.
pub fn ensure_writable(path: &Path) -> Result<()> {
    if path.is_dir() {
        return Err(Error::Io(format!(
            "{}: is a folder, not a file that can be written",
            path.display()
        )));
    }
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    probe_folder(&parent_of(path), name)
}

/// Checks that a folder can be created (or written) at `dir` (its parent is where a checkpoint
/// is written and renamed).
///
/// # Errors
/// [`Error::Io`] saying why not.
pub fn ensure_dir_writable(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::Io(format!(
            "{}: exists and is not a folder",
            dir.display()
        )));
    }
    let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    probe_folder(&parent_of(dir), name)
}

/// Creates `dir` if needed and a probe file `.NAME.probe-PID` in it, removed at once.
fn probe_folder(dir: &Path, name: &str) -> Result<()> {
    fs::create_dir_all(dir).map_err(|e| io_error(dir, format!("cannot create the folder: {e}")))?;
    let probe = dir.join(format!(".{name}.probe-{}", std::process::id()));
    fs::File::create(&probe)
        .map_err(|e| io_error(dir, format!("cannot write in this folder: {e}")))?;
    fs::remove_file(&probe).map_err(|e| io_error(&probe, e))
}

/// Makes the entries of a folder (creations, renames) durable.
///
/// # Errors
/// [`Error::Io`] when the folder cannot be opened or synced.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    // directories are synced through a read-only handle (Unix); elsewhere this is a no-op
    #[cfg(unix)]
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_error(dir, e))?;
    #[cfg(not(unix))]
    let _ = dir;
    Ok(())
}

/// Makes the content of a file written before durable.
///
/// # Errors
/// [`Error::Io`] when the file cannot be opened or synced.
#[cfg(feature = "train")]
pub(crate) fn sync_file(path: &Path) -> Result<()> {
    fs::OpenOptions::new()
        .read(true)
        .open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| io_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_atomic_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let path = root.join("sub/out.txt");
        write_atomic(&path, b"first").unwrap();
        write_atomic(&path, b"second").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"second");
        let names: Vec<_> = fs::read_dir(root.join("sub"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["out.txt"]);
        let e = write_atomic(&root.join("sub"), b"x").unwrap_err();
        assert!(matches!(e, Error::Io(_)), "{e:?}");
    }

    #[test]
    fn output_paths_are_checked_before_work() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        let file = root.join("a-file");
        fs::write(&file, "x").unwrap();
        // a folder under a regular file cannot be created
        let e = ensure_dir_writable(&file.join("ckpt")).unwrap_err();
        assert!(
            matches!(e, Error::Io(_)) && e.to_string().contains("a-file"),
            "{e}"
        );
        assert!(ensure_writable(&file.join("out.csv")).is_err());
        assert!(ensure_writable(root)
            .unwrap_err()
            .to_string()
            .contains("folder"));
        ensure_writable(&root.join("new/sub/out.csv")).unwrap();
        ensure_dir_writable(&root.join("ckpt")).unwrap();
    }
}
