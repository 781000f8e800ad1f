//! When a call lets other Python threads run: one rule for every binding.

use pyo3::prelude::*;

/// Below this much work (a few microseconds), the GIL stays held: releasing
/// and retaking it costs about as much as the copy, and a service's other
/// threads gain nothing from a gap that short (Python switches threads
/// every 5 ms) while, under contention, retaking it can queue the call
/// behind them.
pub(crate) const DETACH_MIN_BYTES: usize = 64 * 1024;

/// Runs `work` (of `bytes` bytes moved) with the GIL released, so other
/// Python threads go on, unless it is too small for that to matter.
pub(crate) fn run_detached<R: Send>(
    py: Python<'_>,
    bytes: usize,
    work: impl FnOnce() -> R + Send,
) -> R {
    if bytes < DETACH_MIN_BYTES {
        work()
    } else {
        py.detach(work)
    }
}
