//! The thread queue of a sweep: `jobs` workers take the chosen items in turn, per seed the
//! RoPE model first, so that the items needing its checkpoint (scalings at inference,
//! fine-tunes) wait only for it and run beside the other schemes. The first error stops the
//! workers from taking new items.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::plan::Item;
use crate::error::{Error, Result};
use crate::lm::model::Scheme;
use crate::lm::train::log_line;

/// What the workers share: the queue, whether each seed's RoPE checkpoint is ready, and the
/// first error.
struct Shared {
    queue: Mutex<VecDeque<usize>>,
    rope_ready: (Mutex<BTreeMap<u64, bool>>, Condvar),
    error: Mutex<Option<Error>>,
}

/// Runs the `chosen` indices of `items` (of a sweep with `seeds`) on `jobs` threads: `run`
/// trains or evaluates one item, and `commit` records what it returned (called once per
/// successful item, from the worker that ran it). An item that needs the RoPE checkpoint of
/// its seed waits until the RoPE item of that seed has run, when this run has it; a failed
/// RoPE item fails the items that need it.
///
/// # Errors
/// The first error of `run` or `commit`, with the item's name.
pub(super) fn run_queue<R>(
    items: &[Item],
    chosen: &[usize],
    seeds: &[u64],
    jobs: usize,
    run: impl Fn(Item) -> Result<R> + Sync,
    commit: impl Fn(Item, R) -> Result<()> + Sync,
) -> Result<()> {
    // per seed, RoPE first: the items that need its checkpoint can then run beside the others
    let mut order = chosen.to_vec();
    order.sort_by_key(|&i| {
        (
            items[i].seed(),
            !matches!(items[i], Item::Base(Scheme::Rope, _)),
        )
    });
    // a seed whose RoPE model is not trained by this run is ready (or missing) already
    let ready: BTreeMap<u64, bool> = seeds
        .iter()
        .filter(|&&seed| {
            !chosen
                .iter()
                .any(|&i| items[i] == Item::Base(Scheme::Rope, seed))
        })
        .map(|&seed| (seed, true))
        .collect();
    let shared = Shared {
        queue: Mutex::new(order.into()),
        rope_ready: (Mutex::new(ready), Condvar::new()),
        error: Mutex::new(None),
    };
    let total = items.len();
    std::thread::scope(|scope| {
        for _ in 0..jobs {
            scope.spawn(|| loop {
                let next = lock(&shared.queue).pop_front();
                let Some(i) = next else { break };
                if lock(&shared.error).is_some() {
                    break;
                }
                let item = items[i];
                log_line(&format!("[{}/{total}] {} started", i + 1, item.name()));
                let result = if item.needs_rope() && !wait_for_rope(&shared, item.seed()) {
                    Err(Error::Conflict(
                        "the RoPE checkpoint of its seed failed; its scalings and fine-tunes are skipped"
                            .into(),
                    ))
                } else {
                    run(item)
                };
                if let Item::Base(Scheme::Rope, seed) = item {
                    let (ready, cvar) = &shared.rope_ready;
                    lock(ready).insert(seed, result.is_ok());
                    cvar.notify_all();
                }
                if let Err(e) = result.and_then(|r| commit(item, r)) {
                    log_line(&format!("[{}/{total}] {} failed: {e}", i + 1, item.name()));
                    lock(&shared.error).get_or_insert(e.context(item.name()));
                }
            });
        }
    });
    let first_error = lock(&shared.error).take();
    first_error.map_or(Ok(()), Err)
}

/// Locks `m`, also after a worker panicked while holding it.
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Blocks until the RoPE item of `seed` has finished; whether it succeeded.
fn wait_for_rope(shared: &Shared, seed: u64) -> bool {
    let (ready, cvar) = &shared.rope_ready;
    let guard = cvar
        .wait_while(lock(ready), |r| !r.contains_key(&seed))
        .unwrap_or_else(PoisonError::into_inner);
    guard.get(&seed).copied().unwrap_or(false)
}
