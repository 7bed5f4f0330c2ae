//! The thread queue of a sweep: `jobs` workers take the chosen items in turn, per seed the
//! from-scratch models that other items need first, so that the items needing their
//! checkpoints (scalings at inference, fine-tunes) wait only for them and run beside the other
//! schemes. The first error stops the workers from taking new items.

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use super::plan::Item;
use crate::error::{Error, Result};
use crate::lm::model::Scheme;
use crate::lm::train::log_line;

/// A from-scratch model: its scheme and seed.
type Base = (Scheme, u64);

/// What the workers share: the queue, whether each needed from-scratch checkpoint is ready,
/// and the first error.
struct Shared {
    queue: Mutex<VecDeque<usize>>,
    ready: (Mutex<HashMap<Base, bool>>, Condvar),
    error: Mutex<Option<Error>>,
}

/// Runs the `chosen` indices of `items` on `jobs` threads: `run` trains or evaluates one item,
/// and `commit` records what it returned (called once per successful item, from the worker
/// that ran it). An item that needs the from-scratch checkpoint of a scheme and seed waits
/// until that model's item has run, when this run has it; a failed model fails the items that
/// need it.
///
/// # Errors
/// The first error of `run` or `commit`, with the item's name.
pub(super) fn run_queue<R>(
    items: &[Item],
    chosen: &[usize],
    jobs: usize,
    run: impl Fn(Item) -> Result<R> + Sync,
    commit: impl Fn(Item, R) -> Result<()> + Sync,
) -> Result<()> {
    let base_of = |item: Item| match item {
        Item::Base(scheme, seed) => Some((scheme, seed)),
        _ => None,
    };
    let needed: Vec<Base> = chosen
        .iter()
        .filter_map(|&i| items[i].needs().map(|s| (s, items[i].seed())))
        .collect();
    // per seed, the needed models first: the items that need them then run beside the others
    let mut order = chosen.to_vec();
    order.sort_by_key(|&i| {
        (
            items[i].seed(),
            !base_of(items[i]).is_some_and(|b| needed.contains(&b)),
        )
    });
    // a needed model that this run does not train is ready (or missing) already
    let ready: HashMap<Base, bool> = needed
        .iter()
        .filter(|&&(scheme, seed)| !chosen.iter().any(|&i| items[i] == Item::Base(scheme, seed)))
        .map(|&b| (b, true))
        .collect();
    let shared = Shared {
        queue: Mutex::new(order.into()),
        ready: (Mutex::new(ready), Condvar::new()),
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
                let waited = item
                    .needs()
                    .is_none_or(|scheme| wait_for(&shared, (scheme, item.seed())));
                let result = if waited {
                    run(item)
                } else {
                    Err(Error::Conflict(
                        "the checkpoint it starts from failed to train; its scalings and fine-tunes are skipped"
                            .into(),
                    ))
                };
                if let Some(base) = base_of(item) {
                    let (ready, cvar) = &shared.ready;
                    lock(ready).insert(base, result.is_ok());
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

/// Blocks until the item of the from-scratch model `base` has finished; whether it succeeded.
fn wait_for(shared: &Shared, base: Base) -> bool {
    let (ready, cvar) = &shared.ready;
    let guard = cvar
        .wait_while(lock(ready), |r| !r.contains_key(&base))
        .unwrap_or_else(PoisonError::into_inner);
    guard.get(&base).copied().unwrap_or(false)
}
