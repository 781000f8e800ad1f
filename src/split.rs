//! The one split of work over threads: how much work is worth splitting,
//! and into which tasks, for every path (the one-shot and prepared gathers,
//! the chunked gather, GatherBlockQuantized). Work is counted in bytes of
//! sequential copying; each caller says what its rows cost in that unit.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::offsets::BadRow;
use crate::threads::{for_each_task, Disjoint, MAX_THREADS};

/// Work whose cost is below this runs on the calling thread: a split with
/// a helper awake costs a few atomics ([`for_each_task`]), and the helper
/// joins at once. Back to back, on the Intel kind, calls of 512-600 rows of
/// 128 bytes and of 256 rows of 512 bytes (160-180 KiB) took 0.67-0.88x
/// the time split from 128 KiB against 256 KiB (docs/performance.md).
/// With every helper asleep, the bound is [`wake_min_cost`].
const PARALLEL_MIN_COST: usize = 128 * 1024;

/// The split's unit of cost a microsecond of a core's time: a byte of
/// sequential copying is about 0.1 ns (10 GB/s) on every machine the
/// project measured, the same scale [`RANDOM_ROW_COST`] assumes.
const COST_PER_US: u64 = 10_000;

/// The least work a split that has to wake its helpers is worth: twice what
/// the process measured a wake-up to take, from the call to the helper
/// starting (`threads::wake_ns`), in the split's unit. Meanwhile the
/// caller copies alone, so the helper halves only what is left when it
/// starts, and the call pays the wake-up call (13 us on the Intel VM, where
/// a helper started 45 us after it: 4 tasks of 7 us then took 42 us split
/// against 28 us alone, 4 of 28 us 100 against 112 us).
fn wake_min_cost() -> usize {
    wake_min_cost_for(crate::threads::wake_ns())
}

/// [`wake_min_cost`] for a wake-up of `ns` nanoseconds.
fn wake_min_cost_for(ns: u64) -> usize {
    usize::try_from(ns.saturating_mul(2).saturating_mul(COST_PER_US) / 1000).unwrap_or(usize::MAX)
}

/// How many of up to `threads` threads work of `cost` uses now (1: the
/// calling thread alone): all from [`wake_min_cost`]; below it, the
/// caller and the helpers awake (lingering after an earlier split) from
/// [`PARALLEL_MIN_COST`], since waking one would cost more than it saves.
/// A call that would split were a helper awake but runs alone may wake one
/// for the calls after it (see `threads::wake_for_the_next_calls`), and one
/// such call in a few splits all the same, to measure a wake-up anew
/// (`threads::remeasure_wake_now`).
pub(crate) fn threads_now(threads: usize, cost: usize) -> usize {
    threads_now_from(threads, cost, PARALLEL_MIN_COST)
}

/// [`threads_now`] with `min_cost` in place of [`PARALLEL_MIN_COST`].
fn threads_now_from(threads: usize, cost: usize, min_cost: usize) -> usize {
    if threads <= 1 || cost < min_cost {
        return 1; // without reading the atomics: most calls are small
    }
    let now = threads_for(
        threads,
        cost,
        min_cost,
        wake_min_cost(),
        crate::threads::helpers_awake(),
    );
    if now <= 1 {
        // Work below PARALLEL_MIN_COST (the row path's) never pays a
        // wake-up, whatever one takes: no need to measure it.
        if cost >= PARALLEL_MIN_COST && crate::threads::remeasure_wake_now() {
            return 2; // one helper: enough to measure its wake-up
        }
        let work_ns = (cost as u64).saturating_mul(1000) / COST_PER_US;
        crate::threads::wake_for_the_next_calls(threads, work_ns);
    }
    now
}

/// [`threads_now`] without waking a helper for the calls after: for a
/// caller that only asks which route a call will take.
pub(crate) fn threads_without_waking(threads: usize, cost: usize) -> usize {
    threads_for(
        threads,
        cost,
        PARALLEL_MIN_COST,
        wake_min_cost(),
        crate::threads::helpers_awake(),
    )
}

/// The rule of [`threads_now`], given the least work worth splitting, the
/// least worth waking helpers for and the helpers awake.
fn threads_for(
    threads: usize,
    cost: usize,
    min_cost: usize,
    wake_min: usize,
    awake: usize,
) -> usize {
    if threads <= 1 || cost < min_cost {
        1
    } else if cost >= wake_min {
        threads
    } else {
        threads.min(awake.saturating_add(1))
    }
}

/// How many of up to `threads` threads a row-path call (`rows`) reading
/// `lines` lines of rows, its work `cost`, uses now, or `None` if the
/// general path should take it: from `machine::Tuning::row_split_min_lines`
/// lines of rows that `requested` (a table beyond the caches, whose rows the
/// row path requests: `plan::prefetches`), the row path splits its copy as
/// [`threads_now`] would split any work (the helpers awake, or all where
/// worth waking them), else it runs on the calling thread and leaves work
/// worth splitting to the general path. Rows in cache are not split: their
/// copy is over before a helper's start pays (AMD EPYC Zen 3 VM: the 180
/// rows of 140 bytes of `ov_gnd8_xml2`, an 840 KB table, took 4.9 us split
/// against 2.3 us on one thread).
#[cfg_attr(not(feature = "python"), allow(dead_code))] // the bindings' row path
pub(crate) fn row_path_threads(
    threads: usize,
    lines: usize,
    cost: usize,
    requested: bool,
) -> Option<usize> {
    if !requested || lines < crate::machine::tuning().row_split_min_lines {
        return (threads_now(threads, cost) <= 1).then_some(1);
    }
    Some(threads_now_from(threads, cost, 0))
}

/// The threads and the rows a task of a split made now ([`threads_now`],
/// [`task_rows`]); `None` to run on the calling thread alone.
pub(crate) fn task_rows_now(threads: usize, n_rows: usize, cost: usize) -> Option<(usize, usize)> {
    let threads = threads_now(threads, cost);
    task_rows(threads, n_rows, cost).map(|rows| (threads, rows))
}

/// The threads and the rows a task of a split made now for work in two
/// phases, every task of the second waiting for all of the first (as
/// `Plan::offsets_then_copy`'s copies wait for every offset): one task a
/// thread and phase, or `None` to run on the calling thread alone. More,
/// smaller tasks pay for the wait more often than they balance the
/// threads: AMD kind, two threads, `out=` of `ov_gnd8_xml1`'s 3,125 slices
/// 0.83x the time of two tasks a thread, batches of 8,192 and 16,384 ids
/// 0.84-1.02x (docs/performance.md).
pub(crate) fn phase_rows_now(threads: usize, n_rows: usize, cost: usize) -> Option<(usize, usize)> {
    let (threads, _) = task_rows_now(threads, n_rows, cost)?;
    Some((threads, n_rows.div_ceil(threads)))
}

/// Smallest piece of work one task does (same unit): enough that claiming
/// it is noise, small enough that a late worker still finds some left.
const TASK_MIN_COST: usize = 32 * 1024;

/// What reading one row from a `data` far larger than the caches costs, in
/// bytes of sequential copying: a miss on a random address (about 10 ns of
/// a core's time with the prefetches in flight) is worth about 200 bytes of
/// memcpy.
pub(crate) const RANDOM_ROW_COST: usize = 192;

/// Most work in one task (same unit): about 100 us of copying, so that the
/// threads of a long split finish within about that of each other.
const TASK_MAX_COST: usize = 1 << 20;

/// Tasks a split of `threads` makes for each thread: few, since every task
/// starts its copy's prefetches afresh and the rows a thread copied in the
/// last call are in its own core's cache only if it copies them again (with
/// eight a thread, the 3,125 slices of `ov_gnd8_xml1` took 21 us on two
/// threads, against 14 us with two); but more with more threads, since the
/// caller wakes its helpers one after another and the last ones start late
/// (two a thread made 16,384 rows of 256 bytes on 16 threads 1.2x slower
/// than eight). Two up to 4 threads, half the thread count up to 16, then
/// eight (docs/performance.md).
fn tasks_per_thread(threads: usize) -> usize {
    (threads / 2).clamp(2, 8)
}

/// How many rows each task of a split of `n_rows` rows costing `cost` (in
/// bytes of sequential copying) takes, or `None` if the work is too small
/// to split over `threads` threads: [`tasks_per_thread`] tasks a thread,
/// none larger than [`TASK_MAX_COST`] unless that would make it smaller
/// than [`TASK_MIN_COST`].
pub(crate) fn task_rows(threads: usize, n_rows: usize, cost: usize) -> Option<usize> {
    if threads <= 1 || cost < PARALLEL_MIN_COST || n_rows < 2 {
        return None;
    }
    let row_cost = (cost / n_rows).max(1);
    let threads = threads.min(MAX_THREADS);
    let per_task = n_rows
        .div_ceil(threads * tasks_per_thread(threads))
        .min(TASK_MAX_COST.div_ceil(row_cost));
    Some(per_task.max(TASK_MIN_COST.div_ceil(row_cost)))
}

/// A task of [`split_rows`]: fills `chunk`, the rows from `start` on.
pub(crate) type RowTask<'a, E = u8> =
    dyn Fn(usize, &mut [E]) -> std::result::Result<(), BadRow> + Sync + 'a;

/// Runs `fill(start, chunk)` over the `n_rows` rows of `out` (`per_row`
/// elements each: the output's bytes, or a slot a row), on this thread if
/// the work (its `cost`, in bytes of sequential copying) is small, else in
/// tasks of whole rows split over up to `threads` threads. Stops early and
/// fails if any task fails.
pub(crate) fn split_rows<E: Send>(
    threads: usize,
    n_rows: usize,
    cost: usize,
    per_row: usize,
    out: &mut [E],
    fill: &RowTask<'_, E>,
) -> std::result::Result<(), BadRow> {
    match task_rows_now(threads, n_rows, cost) {
        None => fill(0, out),
        Some(split) => split_rows_as(split, n_rows, per_row, out, fill),
    }
}

/// [`split_rows`] split as given, `(threads, rows_per_task)`: `fill` over
/// tasks of `rows_per_task` rows of `out` on up to `threads` threads,
/// whatever the work costs (the row path, which decides its own split).
pub(crate) fn split_rows_as<E: Send>(
    (threads, rows_per_task): (usize, usize),
    n_rows: usize,
    per_row: usize,
    out: &mut [E],
    fill: &RowTask<'_, E>,
) -> std::result::Result<(), BadRow> {
    let tasks = n_rows.div_ceil(rows_per_task.max(1));
    let failed = AtomicBool::new(false);
    let base = Disjoint::new(out.as_mut_ptr());
    debug_assert_eq!(out.len(), n_rows * per_row);
    for_each_task(threads, tasks, &|t| {
        if failed.load(Ordering::Relaxed) {
            return;
        }
        let start = t * rows_per_task;
        let rows = rows_per_task.min(n_rows - start);
        // SAFETY: task t owns rows start..start + rows of `out`, which
        // no other task touches (for_each_task runs each t once), and
        // which lie inside `out` (start + rows <= n_rows, and `out` holds
        // n_rows rows of `per_row` elements: the callers' buffers).
        let chunk =
            unsafe { std::slice::from_raw_parts_mut(base.at(start * per_row), rows * per_row) };
        if fill(start, chunk).is_err() {
            failed.store(true, Ordering::Relaxed);
        }
    });
    if failed.load(Ordering::Relaxed) {
        Err(BadRow)
    } else {
        Ok(())
    }
}

/// Runs `task` over the rows `0..n_rows` (costing `cost`, as for
/// [`task_rows`]): on this thread, all at once, if the work is small, else
/// in ranges of whole rows split over up to `threads` threads.
pub(crate) fn split_ranges(
    threads: usize,
    n_rows: usize,
    cost: usize,
    task: &(dyn Fn(Range<usize>) + Sync),
) {
    match task_rows_now(threads, n_rows, cost) {
        None => task(0..n_rows),
        Some((threads, per_task)) => for_each_task(threads, n_rows.div_ceil(per_task), &|t| {
            task(t * per_task..((t + 1) * per_task).min(n_rows))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_splits_make_two_tasks_a_thread_and_long_ones_bounded_tasks() {
        // ov_gnd8_xml1 on two threads: 3,125 rows costing about 860 KB.
        let per_task = task_rows(2, 3125, 860_000).expect("worth splitting");
        assert_eq!(3125_usize.div_ceil(per_task), 4);
        // More threads, more tasks each: 16,384 rows of 256 bytes on 16.
        let per_task = task_rows(16, 16_384, 16_384 * 448).expect("worth splitting");
        assert_eq!(16_384_usize.div_ceil(per_task), 16 * 8);
        // A long split: no task much above TASK_MAX_COST.
        let (rows, cost) = (1 << 20, (1 << 20) * 448);
        let per_task = task_rows(2, rows, cost).expect("worth splitting");
        assert!(per_task * (cost / rows) <= TASK_MAX_COST + cost / rows);
        // Never below TASK_MIN_COST, never split when small or single.
        let per_task = task_rows(1024, 100_000, 100_000 * 8).expect("worth splitting");
        assert!(per_task * 8 >= TASK_MIN_COST);
        assert_eq!(task_rows(2, 1000, PARALLEL_MIN_COST - 1), None);
        assert_eq!(task_rows(1, 1 << 20, 1 << 30), None);
    }

    #[test]
    fn the_row_path_splits_only_many_lines_and_leaves_the_rest_as_before() {
        let min = crate::machine::tuning().row_split_min_lines;
        // Few lines: the calling thread, or the general path for work it
        // would split.
        for requested in [false, true] {
            assert_eq!(row_path_threads(2, 10, 1000, requested), Some(1));
            assert_eq!(row_path_threads(1, 10, 1 << 40, requested), Some(1));
            assert_eq!(row_path_threads(2, 10, 1 << 40, requested), None);
        }
        // Many, from a table beyond the caches: the row path splits it
        // itself, work worth waking for included.
        if min < usize::MAX {
            assert_eq!(row_path_threads(2, min, 1 << 40, true), Some(2));
            assert_eq!(row_path_threads(1, min, 1 << 40, true), Some(1));
        }
        // Many rows in cache: as few, never split by the row path.
        assert_eq!(row_path_threads(2, 4096, 1000, false), Some(1));
        assert_eq!(row_path_threads(2, 4096, 1 << 40, false), None);
    }

    #[test]
    fn two_phase_splits_make_one_task_a_thread() {
        // Work worth waking every helper for, whatever the wake-up measured.
        let huge = 1 << 40;
        assert_eq!(phase_rows_now(2, 3125, huge), Some((2, 1563)));
        assert_eq!(phase_rows_now(16, 3125, huge), Some((16, 196)));
        // More threads than rows: a row a task, every row covered.
        let (threads, rows) = phase_rows_now(16, 5, huge).expect("worth splitting");
        assert!(threads * rows >= 5 && rows == 1);
        // Small or single: the calling thread alone.
        assert_eq!(phase_rows_now(2, 3125, PARALLEL_MIN_COST - 1), None);
        assert_eq!(phase_rows_now(1, 3125, huge), None);
        assert_eq!(phase_rows_now(2, 1, huge), None);
    }

    #[test]
    fn work_splits_with_the_helpers_awake_or_when_worth_waking_them() {
        // The Intel VM's 45 us from wake-up call to a helper at work: 900 KB
        // of copying, twice that time.
        assert_eq!(wake_min_cost_for(45_000), 900_000);
        assert_eq!(wake_min_cost_for(0), 0);
        assert!(wake_min_cost_for(u64::MAX) > 1 << 50);
        let (small, mid, large) = (PARALLEL_MIN_COST - 1, 300_000, 1 << 20);
        let wake_min = wake_min_cost_for(45_000);
        for awake in [0, 1, 3] {
            assert_eq!(threads_for(2, small, PARALLEL_MIN_COST, wake_min, awake), 1);
            assert_eq!(threads_for(1, large, PARALLEL_MIN_COST, wake_min, awake), 1);
            assert_eq!(
                threads_for(16, large, PARALLEL_MIN_COST, wake_min, awake),
                16
            );
            // Helpers awake join at once; a sleeping one would start after
            // most of this work is done.
            assert_eq!(
                threads_for(2, mid, PARALLEL_MIN_COST, wake_min, awake),
                2.min(awake + 1)
            );
            assert_eq!(
                threads_for(16, mid, PARALLEL_MIN_COST, wake_min, awake),
                awake + 1
            );
            // Before any wake-up was measured, as if waking were free.
            assert_eq!(threads_for(16, mid, PARALLEL_MIN_COST, 0, awake), 16);
            // The row path's split: small work too, with helpers awake.
            assert_eq!(threads_for(2, 1000, 0, wake_min, awake), 2.min(awake + 1));
            assert_eq!(threads_for(1, 1000, 0, wake_min, awake), 1);
        }
    }
}
