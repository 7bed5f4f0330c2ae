//! Locks on what a command writes as a unit: a checkpoint folder, one item of a sweep's
//! results, the merge of a sweep's tables.
//!
//! A [`FolderLock`] is an operating-system lock (`flock` on Unix, `LockFileEx` on Windows,
//! through [`std::fs::File::try_lock`]) on a small file `.NAME.lock` beside the folder or file
//! `NAME` it protects, held from before any work until the write is complete and released when
//! the guard is dropped. It is *advisory*: it excludes the writers that take it (every writing
//! command of `posenc`), never a reader, so `eval`, `report` and the notebooks go on reading
//! while a writer runs (the atomic writes and the checkpoint folder protocol give them a whole
//! old or new version, never half of one). A second writer fails at once with one line naming
//! the folder; an exclusive holder writes its process id and command line into the lock file
//! so that the line can name it too (information only: the operating system's lock is what
//! excludes). The lock dies with its process, so a stale file left by a `kill -9` never blocks:
//! the next holder takes it and writes its own name over the old one. A released lock file is
//! removed (on Unix), so a folder is left as it was.

use std::fs::{self, File, OpenOptions, TryLockError};
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use super::{io_error, parent_of};
use crate::error::{Error, Result};

/// How a lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One holder, the writer.
    Exclusive,
    /// Any number of holders that read, none that writes.
    Shared,
}

/// An exclusive (or shared) advisory lock on the file `.NAME.lock` beside `NAME`, held until
/// dropped (see the module documentation).
#[derive(Debug)]
pub struct FolderLock {
    /// The open lock file: the operating system releases its lock when it is closed.
    file: File,
    /// The lock file's path.
    path: PathBuf,
    /// What it protects.
    target: PathBuf,
    mode: Mode,
}

impl FolderLock {
    /// Takes the exclusive lock on `target` (a folder or file that need not exist yet), or fails
    /// at once when another process holds it; creates the folder that holds `target` if needed.
    ///
    /// # Errors
    /// [`Error::Conflict`] naming `target` and, when it is known, the process that holds the
    /// lock; [`Error::Io`] when the lock file cannot be created or locked.
    pub fn exclusive(target: &Path) -> Result<Self> {
        Self::acquire(target, Mode::Exclusive, false)
    }

    /// Takes a shared lock on `target`, as a reader that needs it unchanged while it runs
    /// (a sweep item that reads the RoPE checkpoint of its seed): shared holders do not exclude
    /// one another, only an exclusive one.
    ///
    /// # Errors
    /// As [`FolderLock::exclusive`], when an exclusive holder has it.
    pub fn shared(target: &Path) -> Result<Self> {
        Self::acquire(target, Mode::Shared, false)
    }

    /// Takes the exclusive lock on `target`, waiting while another holder has it (for short
    /// writes that every run makes in turn: the merge of a sweep's tables).
    ///
    /// # Errors
    /// [`Error::Io`] when the lock file cannot be created or locked.
    pub fn wait_exclusive(target: &Path) -> Result<Self> {
        Self::acquire(target, Mode::Exclusive, true)
    }

    /// The lock file of `target`: `.NAME.lock` in the same folder.
    pub fn file_of(target: &Path) -> PathBuf {
        let name = target
            .file_name()
            .map_or_else(|| "out".into(), |n| n.to_string_lossy().into_owned());
        parent_of(target).join(format!(".{name}.lock"))
    }

    /// What the lock protects.
    pub fn target(&self) -> &Path {
        &self.target
    }

    fn acquire(target: &Path, mode: Mode, wait: bool) -> Result<Self> {
        let path = Self::file_of(target);
        let dir = parent_of(&path);
        fs::create_dir_all(&dir)
            .map_err(|e| io_error(&dir, format!("cannot create the folder: {e}")))?;
        loop {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .open(&path)
                .map_err(|e| io_error(&path, e))?;
            let locked = match (mode, wait) {
                (Mode::Exclusive, false) => file.try_lock(),
                (Mode::Shared, false) => file.try_lock_shared(),
                (Mode::Exclusive, true) => file.lock().map_err(TryLockError::Error),
                (Mode::Shared, true) => file.lock_shared().map_err(TryLockError::Error),
            };
            match locked {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Err(in_use(target, &path)),
                Err(TryLockError::Error(e)) => {
                    return Err(io_error(&path, format!("cannot lock: {e}")))
                }
            }
            // a holder releasing the lock removes its file: when that happened between our
            // open and our lock, we hold a file no longer there, and try again with the new one
            if !names_file(&path, &file) {
                continue;
            }
            let mut lock = FolderLock {
                file,
                path,
                target: target.to_path_buf(),
                mode,
            };
            if mode == Mode::Exclusive {
                lock.write_holder()?;
            }
            return Ok(lock);
        }
    }

    /// Writes `pid N: COMMAND` over the lock file's content, for the message of a refused writer.
    fn write_holder(&mut self) -> Result<()> {
        let holder = format!("pid {}: {}\n", std::process::id(), command_line());
        self.file
            .set_len(0)
            .and_then(|()| self.file.write_all(holder.as_bytes()))
            .map_err(|e| io_error(&self.path, e))
    }
}

impl Drop for FolderLock {
    fn drop(&mut self) {
        match self.mode {
            // removed while it is held exclusively: no one else holds the file then, and a
            // process that opened it before waits for it and then finds it gone (see acquire)
            Mode::Exclusive => {
                if cfg!(unix) {
                    let _ = fs::remove_file(&self.path);
                }
            }
            // released first; the last reader out removes it, as a writer would, when it can
            // take it exclusively (no one holds it then)
            Mode::Shared => {
                let _ = self.file.unlock();
                if cfg!(unix) {
                    let last = OpenOptions::new().read(true).write(true).open(&self.path);
                    if let Ok(last) = last {
                        if last.try_lock().is_ok() && names_file(&self.path, &last) {
                            let _ = fs::remove_file(&self.path);
                        }
                    }
                }
            }
        }
        // the operating system's lock goes when `file` is closed, after this
    }
}

/// Whether `path` still names the open `file` (Unix; elsewhere a lock file is never removed).
#[cfg(unix)]
fn names_file(path: &Path, file: &File) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (fs::metadata(path), file.metadata()) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn names_file(_: &Path, _: &File) -> bool {
    true
}

/// This process's command line, the program by its file name, on one line of at most 200
/// characters.
fn command_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| {
            Path::new(&p)
                .file_name()
                .map_or(p.clone(), |n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    let line = std::iter::once(program)
        .chain(args)
        .collect::<Vec<_>>()
        .join(" ")
        .replace(['\n', '\r'], " ");
    match line.char_indices().nth(200) {
        Some((end, _)) => format!("{} ...", &line[..end]),
        None => line,
    }
}

/// The error of a lock held elsewhere: one line naming `target` and the holder recorded in the
/// lock file `path`, when that process is still alive. A holder writes its name just after it
/// takes the lock, so a name not there yet is waited for a moment (readers write none).
fn in_use(target: &Path, path: &Path) -> Error {
    let holder = || {
        let mut content = String::new();
        let _ = File::open(path).and_then(|mut f| f.read_to_string(&mut content));
        let line = content.lines().next()?.to_string();
        let (pid, _) = line.strip_prefix("pid ")?.split_once(':')?;
        alive(pid).then_some(line)
    };
    let mut found = holder();
    for _ in 0..HOLDER_WAIT_MS / 5 {
        if found.is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        found = holder();
    }
    let holder = found.map_or_else(String::new, |line| format!(" ({line})"));
    Error::Conflict(format!(
        "{} is in use by another process{holder}; wait for it to end, or write elsewhere",
        target.display()
    ))
}

/// How long a refused writer waits for the holder's name, milliseconds.
const HOLDER_WAIT_MS: u64 = 200;

/// Whether the process `pid` runs (Linux: it has a `/proc` entry; elsewhere assumed): a lock
/// file's content outlives a killed holder, whose name would mislead.
fn alive(pid: &str) -> bool {
    if !pid.bytes().all(|b| b.is_ascii_digit()) || pid.is_empty() {
        return false;
    }
    !cfg!(target_os = "linux") || Path::new("/proc").join(pid).exists()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_second_writer_is_refused_with_one_line_naming_the_folder_and_the_holder() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("sub/ckpt");
        let first = FolderLock::exclusive(&target).unwrap();
        let file = tmp.path().join("sub/.ckpt.lock");
        assert_eq!(FolderLock::file_of(&target), file);
        let content = fs::read_to_string(&file).unwrap();
        assert!(
            content.starts_with(&format!("pid {}: ", std::process::id())),
            "{content}"
        );
        for e in [
            FolderLock::exclusive(&target).unwrap_err(),
            FolderLock::shared(&target).unwrap_err(),
        ] {
            let text = e.to_string();
            assert!(matches!(e, Error::Conflict(_)), "{e:?}");
            assert_eq!(text.lines().count(), 1, "{text}");
            assert!(
                text.starts_with(&format!(
                    "{} is in use by another process (pid ",
                    target.display()
                )),
                "{text}"
            );
        }
        // released on drop, its file removed: the folder is as it was
        drop(first);
        assert!(!file.exists());
        assert_eq!(fs::read_dir(tmp.path().join("sub")).unwrap().count(), 0);
        let again = FolderLock::exclusive(&target).unwrap();
        assert_eq!(again.target(), target);
    }

    #[test]
    fn readers_share_a_lock_that_excludes_a_writer() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("rope");
        let a = FolderLock::shared(&target).unwrap();
        let b = FolderLock::shared(&target).unwrap();
        let e = FolderLock::exclusive(&target).unwrap_err().to_string();
        // readers write no name: the line names only the folder
        assert!(
            e.starts_with(&format!(
                "{} is in use by another process;",
                target.display()
            )),
            "{e}"
        );
        drop(a);
        assert!(FolderLock::exclusive(&target).is_err());
        drop(b);
        assert!(!FolderLock::file_of(&target).exists());
        drop(FolderLock::exclusive(&target).unwrap());
    }

    #[test]
    fn a_stale_lock_file_never_blocks_and_its_dead_holder_is_not_named() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("ckpt");
        let file = FolderLock::file_of(&target);
        // what a holder killed with SIGKILL leaves: the file, its name, no lock
        fs::write(&file, "pid 4294967295: posenc train --out ckpt\n").unwrap();
        let shared = FolderLock::shared(&target).unwrap();
        let e = FolderLock::exclusive(&target).unwrap_err().to_string();
        assert!(!e.contains("4294967295"), "{e}");
        drop(shared);
        fs::write(&file, "pid 4294967295: posenc train --out ckpt\n").unwrap();
        let lock = FolderLock::exclusive(&target).unwrap();
        let content = fs::read_to_string(&file).unwrap();
        assert!(
            content.starts_with(&format!("pid {}: ", std::process::id()))
                && content.lines().count() == 1,
            "{content}"
        );
        drop(lock);
    }

    #[test]
    fn a_waiting_writer_takes_the_lock_when_the_holder_releases_it() {
        let tmp = tempfile::tempdir().unwrap();
        let target = tmp.path().join("results.csv");
        let held = FolderLock::exclusive(&target).unwrap();
        let began = Instant::now();
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(200));
                drop(held);
            });
            let second = FolderLock::wait_exclusive(&target).unwrap();
            assert!(began.elapsed() >= Duration::from_millis(200));
            // it holds the file now there (the first holder removed its own)
            assert!(FolderLock::file_of(&target).exists());
            drop(second);
        });
        assert!(!FolderLock::file_of(&target).exists());
    }
}
