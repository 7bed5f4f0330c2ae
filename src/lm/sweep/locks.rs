//! The locks of a sweep run ([`FolderLock`]), all taken before its first item and held to its
//! end: for writing, every checkpoint folder its items train and the record of every item it
//! runs (`items/.NAME.json.lock`, for the item's files); for reading, the RoPE checkpoint of a
//! seed whose scalings or fine-tunes it runs without the RoPE item itself, when that checkpoint
//! is trained already (when it is not, the run trains it, and locks it for writing).
//!
//! So a second run that would write any of these (the same configuration twice, overlapping
//! `--only` lists) is refused at once with one line naming the folder, and shards of one sweep,
//! whose items and checkpoints are disjoint, run side by side into one folder. The locks are
//! taken in the order of their paths: of two runs that want some of the same folders, the one
//! that takes the first of them goes on and the other stops there. Within the run, one worker
//! at a time writes a folder ([`SweepLocks::writer`]). The merge of the tables has its own
//! lock, held only while it merges (`store.rs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use super::item::rope_usable;
use super::plan::Item;
use super::queue::lock;
use crate::error::{Error, Result};
use crate::io::FolderLock;
use crate::lm::config::SweepConfig;

/// What a run does with a folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Use {
    /// It writes it.
    Write,
    /// It reads the RoPE checkpoint of this seed, or trains it when it is not there.
    ReadRope(u64),
}

/// The locks a sweep run holds (see the module documentation), released when dropped.
pub(super) struct SweepLocks {
    /// The folders (and item records) the run may write, by their path, each with the mutex
    /// that lets one worker of this run at a time write it.
    writes: BTreeMap<PathBuf, (FolderLock, Mutex<()>)>,
    /// The checkpoints it only reads.
    _reads: Vec<FolderLock>,
}

impl SweepLocks {
    /// Takes the locks of a run of the items `chosen` (indices into `items`) of `config`, on a
    /// training text of `corpus_digest`.
    ///
    /// # Errors
    /// [`Error::Conflict`] naming the first folder that another process holds (and that
    /// process where it is known), or a lock file that cannot be written.
    pub(super) fn take(
        config: &SweepConfig,
        items: &[Item],
        chosen: &[usize],
        corpus_digest: &str,
    ) -> Result<Self> {
        let mut wanted: BTreeMap<PathBuf, Use> = BTreeMap::new();
        let mut want = |path: PathBuf, use_: Use| {
            let entry = wanted.entry(path).or_insert(use_);
            if use_ == Use::Write {
                *entry = Use::Write;
            }
        };
        for item in chosen.iter().map(|&i| items[i]) {
            want(config.item_file("items", &item, "json"), Use::Write);
            if item.needs_rope() {
                want(config.rope_dir(item.seed()), Use::ReadRope(item.seed()));
            }
            if !matches!(item, Item::Inference(..)) {
                want(config.item_dir(&item), Use::Write);
            }
        }
        let mut writes = BTreeMap::new();
        let mut reads = Vec::new();
        for (path, use_) in wanted {
            match use_ {
                Use::Write => {
                    let lock = FolderLock::exclusive(&path)?;
                    writes.insert(path, (lock, Mutex::new(())));
                }
                Use::ReadRope(seed) => {
                    // checked under the shared lock: no writer changes it after that
                    let shared = FolderLock::shared(&path)?;
                    if rope_usable(config, seed, corpus_digest) {
                        reads.push(shared);
                    } else {
                        drop(shared);
                        let lock = FolderLock::exclusive(&path)?;
                        writes.insert(path, (lock, Mutex::new(())));
                    }
                }
            }
        }
        Ok(SweepLocks {
            writes,
            _reads: reads,
        })
    }

    /// The exclusive lock of `dir`, for training into it, held by one worker of this run at a
    /// time (the others wait): two items that both train a missing RoPE checkpoint train it
    /// once, the second finding it done.
    ///
    /// # Errors
    /// [`Error::Conflict`] when the run holds `dir` only for reading: it was a finished RoPE
    /// checkpoint when the run began, and is not one now.
    pub(super) fn writer(&self, dir: &Path) -> Result<Writer<'_>> {
        let (folder, one) = self.writes.get(dir).ok_or_else(|| {
            Error::Conflict(format!(
                "{} changed while this sweep read it (it was a finished checkpoint when the sweep began); run the sweep again",
                dir.display()
            ))
        })?;
        Ok(Writer {
            folder,
            _one: lock(one),
        })
    }
}

/// A folder that one worker of a sweep run writes ([`SweepLocks::writer`]).
pub(super) struct Writer<'a> {
    /// The run's lock of the folder.
    pub(super) folder: &'a FolderLock,
    _one: MutexGuard<'a, ()>,
}
