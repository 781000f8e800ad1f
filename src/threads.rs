//! The worker pool: its size (`NDGATHER_NUM_THREADS`, `set_num_threads`)
//! and a lazily built rayon pool, so that importing ndgather or making
//! small calls never starts a thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::ThreadPool;

use crate::error::{GatherError, Result};

/// Requested thread count; 0 means "not set": use every CPU.
static REQUESTED: AtomicUsize = AtomicUsize::new(0);

/// The pool, built on first parallel use, rebuilt when the size changes.
static POOL: Mutex<Option<Arc<ThreadPool>>> = Mutex::new(None);

/// Sets the number of worker threads (`n >= 1`).
pub fn set_num_threads(n: i64) -> Result<()> {
    match usize::try_from(n) {
        Ok(n) if n >= 1 => {
            REQUESTED.store(n, Ordering::Relaxed);
            Ok(())
        }
        _ => Err(GatherError::InvalidArgument(format!(
            "set_num_threads: the number of threads must be >= 1, got {n}"
        ))),
    }
}

/// The number of worker threads large calls use.
pub fn num_threads() -> usize {
    // available_parallelism reads cgroup files on every call: ask once.
    static CPUS: OnceLock<usize> = OnceLock::new();
    match REQUESTED.load(Ordering::Relaxed) {
        0 => *CPUS.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
        n => n,
    }
}

/// Runs `f` inside a pool of `threads` workers, so that rayon's parallel
/// iterators in `f` use it. `None` if no pool could be started (the caller
/// then works serially).
pub(crate) fn in_pool<R: Send>(threads: usize, f: impl FnOnce() -> R + Send) -> Option<R> {
    let pool = {
        // A poisoned lock only means another call panicked while swapping
        // the pool; the Option inside is still whole.
        let mut slot = POOL.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            Some(p) if p.current_num_threads() == threads => Arc::clone(p),
            _ => {
                let p = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("ndgather-{i}"))
                    .build()
                    .ok()?;
                let p = Arc::new(p);
                *slot = Some(Arc::clone(&p));
                p
            }
        }
    };
    Some(pool.install(f))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_threads_is_an_error() {
        assert!(set_num_threads(0).is_err());
        assert!(set_num_threads(-3).is_err());
    }

    #[test]
    fn pool_runs_work() {
        assert_eq!(in_pool(2, rayon::current_num_threads), Some(2));
    }
}
