//! Running a plan: the order of validation and copying that makes errors
//! deterministic and leaves a caller's output untouched, and the split of
//! the work over threads.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use smallvec::SmallVec;

use crate::error::{GatherError, OutOfRange, Result};
use crate::index::{load_exact, with_index_and_mode, with_index_type};
use crate::kept;
use crate::kernel::{copy_rows_at, gather_rows};
use crate::mode::Mode;
use crate::offsets::{compute_offsets, first_bad, BadRow};
use crate::plan::{distinct_positions, Plan};
use crate::pool;
use crate::split::{
    phase_rows_now, split_ranges, split_rows, task_rows, threads_without_waking, RANDOM_ROW_COST,
};
use crate::threads::{for_each_task, Disjoint};
use crate::validate::check_out_len;
use crate::walk::{unravel, Odometer};

/// When [`Plan::execute`] validates the indices, which decides what the
/// output buffer holds if one turns out bad.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validation {
    /// All indices are validated before a byte of the output is written, so
    /// an error leaves it untouched: for the caller's own array (`out=`).
    BeforeWriting,
    /// Indices are validated while copying, and only on an error is the
    /// first bad one searched for: for a fresh array the caller drops on
    /// error.
    WhileCopying,
}

/// A validation pass reading fewer index bytes than this runs on the
/// calling thread (the bound the copies had when it was measured).
const VALIDATE_PARALLEL_MIN_BYTES: usize = 512 * 1024;

/// A [`Validation::BeforeWriting`] call with at most this many rows
/// computes every row's source offset first (validating its indices), then copies from them; a larger
/// one validates all indices in a pass of their own and computes the offsets
/// again as it copies (the offsets of a huge call would not stay in cache).
const OFFSETS_FIRST_MAX_ROWS: usize = 16 * 1024;

/// A [`Validation::BeforeWriting`] call of at most this many rows keeps
/// the offsets `Plan::offsets_then_copy` computes on the stack, and is not
/// staged ([`STAGE_MIN_INDEX_BYTES_PER_OUT_BYTE`]): that costs it nothing a
/// buffer would (`tiny_gather_nd`'s two rows: 160 ns `out=` calls took
/// 200 ns staged through a kept buffer, Intel kind; docs/performance.md).
const FEW_ROWS: usize = 32;

/// A [`Validation::BeforeWriting`] call split over threads whose indices
/// take at most this many bytes (4,096 int64 ids) validates them on the
/// calling thread (a microsecond or two), then copies as a fresh array's
/// call does, computing the offsets on the way. `Plan::offsets_then_copy`
/// makes every copy task wait for all of them, which cost `out=` with 512
/// and 1,024 ids of 512-byte rows on two threads 1.3-1.5x the new array's
/// time, and 4,096 ids of rows in the caches 1.45-1.5x the time of checking
/// first (`ov_gnd8_xml3`'s 4,096 elements 1.12x); cold batches of 1,024 and
/// 4,096 ids were even. At the 9,375 indices of `ov_gnd8_xml1` the two were
/// even (docs/performance.md). Such a call that reads more bytes of indices
/// than it writes saves the rows of `out` it overwrites instead of checking
/// first ([`Plan::stages`]).
const CHECK_FIRST_MAX_BYTES: usize = 32 * 1024;

/// A [`Validation::BeforeWriting`] call whose indices take at least this
/// many bytes a byte of output checks them as a fresh array's call does,
/// while copying, instead of in a pass of its own first, and keeps `out`
/// untouched on an error by a copy of the output: one of more rows than
/// [`OFFSETS_FIRST_MAX_ROWS`], or one that runs on the calling thread alone,
/// gathers into a buffer of its own and then copies that into `out`
/// (`Plan::gather_staged`); a split one of fewer saves the rows of `out`
/// each task overwrites, and puts them back on an error
/// (`Plan::gather_undoable`). Such a check reads each index byte at
/// about the speed a copy moves an output byte (Intel kind, one thread: 2M
/// pairs of int64, 32 MB, checked in about 3.5 ms; their 8 MB of float32
/// points copied in about 0.6 ms), so the copy costs less from about one
/// index byte an output byte: element lookups by tuples (`points_2m`: 16
/// bytes of indices a 4-byte point; `ov_gnd8_xml3`: 8 bytes of index a
/// 4-byte element), not rows by ids.
const STAGE_MIN_INDEX_BYTES_PER_OUT_BYTE: usize = 1;

thread_local! {
    /// The row offsets a calling thread keeps for its next
    /// [`Plan::offsets_then_copy`] (see `kept`).
    static KEPT_OFFSETS: Cell<Vec<isize>> = const { Cell::new(Vec::new()) };
}

/// Counts a finished offsets task of [`Plan::offsets_then_copy`] when
/// dropped, and marks the call failed if the task panicked.
struct Computed<'a>(&'a AtomicUsize, &'a AtomicBool);

impl Drop for Computed<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.1.store(true, Ordering::Relaxed);
        }
        self.0.fetch_add(1, Ordering::Release);
    }
}

impl Plan<'_> {
    /// Gathers into `out`, which must hold exactly `out_bytes()` bytes and
    /// must not overlap `data`. Uses up to `threads` threads (at most
    /// [`MAX_THREADS`](crate::MAX_THREADS)).
    pub fn execute(
        &self,
        mode: Mode,
        out: &mut [u8],
        validation: Validation,
        threads: usize,
    ) -> Result<()> {
        check_out_len(out, self.out_bytes)?;
        let can_fail = self.can_fail(mode);
        let small = self.n_rows <= OFFSETS_FIRST_MAX_ROWS && self.out_bytes > 0;
        let before = can_fail && validation == Validation::BeforeWriting;
        // Asked only of calls few enough to compute every offset first.
        let splits = before && small && self.splits(threads);
        if before && self.stages() && !splits && self.n_rows > FEW_ROWS {
            // Checked while gathered into a buffer, then copied into `out`
            // (`ov_gnd8_xml3` on one thread: raise/clip 1.14 -> 1.06 against
            // computing every offset first; docs/performance.md).
            if let Some(done) = self.gather_staged(mode, out, threads) {
                return done;
            }
        }
        if before && small && !(splits && self.index_reads() <= CHECK_FIRST_MAX_BYTES) {
            // Every output row's offset, computed once: this validates every
            // index (each one is used by some row when there is output) and
            // spares the copy computing them again.
            if let Some(done) = self.offsets_then_copy(mode, out, threads) {
                return done.or_else(|BadRow| self.report_bad(mode, threads));
            }
        }
        if before && small && self.stages() {
            // A call of few rows that splits: saving its rows costs its
            // tasks a copy each of what they overwrite, in their own
            // caches, where a buffer they filled would be copied into `out`
            // by one thread, half of it from the other core's cache
            // (`ov_gnd8_xml3`, AMD kind, two threads: raise/clip 1.16x
            // checking first, 1.15x staging, 1.05-1.07x saving; Intel kind,
            // with every buffer kept, 1.08x saving, 1.11x staging;
            // docs/performance.md).
            if let Some(done) = self.gather_undoable(mode, out, threads) {
                return done;
            }
        }
        // Every index is visited by the copy only when there is output.
        if can_fail && (validation == Validation::BeforeWriting || self.out_bytes == 0) {
            self.check_all(mode, threads)?;
        }
        if self.out_bytes == 0 {
            return Ok(());
        }
        // Every row copied, its offset computed on the way.
        let copy_from = |start: usize, chunk: &mut [u8]| {
            // SAFETY: `chunk` holds whole rows from `start` on (split_rows
            // splits at row bounds) and does not overlap `data` (caller).
            with_index_and_mode!(self.index_type, mode, T, CLIP, ZERO => unsafe {
                gather_rows::<T, CLIP, ZERO>(self, start, chunk)
            })
        };
        let cost = self.copy_cost();
        split_rows(
            threads,
            self.n_rows,
            cost,
            self.slice_bytes,
            out,
            &copy_from,
        )
        .or_else(|BadRow| self.report_bad(mode, threads))
    }

    /// Whether a [`Validation::BeforeWriting`] call checks its indices while
    /// copying, keeping a copy of the output to leave `out` untouched on an
    /// error (see [`STAGE_MIN_INDEX_BYTES_PER_OUT_BYTE`]).
    pub(crate) fn stages(&self) -> bool {
        self.out_bytes > 0
            && self.index_reads()
                >= self
                    .out_bytes
                    .saturating_mul(STAGE_MIN_INDEX_BYTES_PER_OUT_BYTE)
    }

    /// Gathers into a buffer of the pool's (or the thread's kept one, or a
    /// new one: `pool::Scratch`), its indices checked on the way, then
    /// copies it into `out`: an error leaves `out`
    /// untouched, as [`Validation::BeforeWriting`] promises. `None` if no
    /// buffer could be had (the caller then checks in a pass of its own).
    pub(crate) fn gather_staged(
        &self,
        mode: Mode,
        out: &mut [u8],
        threads: usize,
    ) -> Option<Result<()>> {
        let len = out.len();
        let mut scratch = pool::Scratch::take(len)?;
        let staged = scratch.initialised();
        let gathered = self.execute(mode, staged, Validation::WhileCopying, threads);
        if gathered.is_ok() {
            let staged: &[u8] = staged;
            let sb = self.slice_bytes;
            let _ = split_rows(threads, self.n_rows, len, sb, out, &|start, chunk| {
                chunk.copy_from_slice(&staged[start * sb..start * sb + chunk.len()]);
                Ok(())
            });
        }
        Some(gathered)
    }

    /// Gathers into `out` checking the indices on the way, as a fresh
    /// array's call does, each task first saving the rows of `out` it is
    /// about to write in a buffer of the pool's (or the thread's kept one,
    /// or a new one: `pool::Scratch`); if an index
    /// was bad, every saved row is put back once all tasks are done, so an
    /// error leaves `out` as it was, as [`Validation::BeforeWriting`]
    /// promises. `None` if no buffer could be had (the caller then checks in
    /// a pass of its own).
    pub(crate) fn gather_undoable(
        &self,
        mode: Mode,
        out: &mut [u8],
        threads: usize,
    ) -> Option<Result<()>> {
        let len = out.len();
        let mut scratch = pool::Scratch::take(len)?;
        let saved = Disjoint::new(scratch.as_mut_ptr());
        let sb = self.slice_bytes;
        // Every task saves its rows, even one that starts after an index
        // was found bad (it then gathers nothing), so that all of `out` can
        // be put back without knowing which tasks ran.
        let failed = AtomicBool::new(false);
        let _ = split_rows(
            threads,
            self.n_rows,
            self.copy_cost(),
            sb,
            out,
            &|start, chunk| {
                // SAFETY: `saved` holds `len` bytes (`Scratch::take(len)`, alive
                // until this call returns), of which this task alone writes
                // its own rows' (split_rows gives each task whole rows of its
                // own), and `chunk` lies in `out`, which it does not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        chunk.as_ptr(),
                        saved.at(start * sb),
                        chunk.len(),
                    );
                }
                if failed.load(Ordering::Relaxed) {
                    return Ok(());
                }
                // SAFETY: `chunk` holds whole rows from `start` on and does not
                // overlap `data` (caller of `execute`).
                let gathered = with_index_and_mode!(self.index_type, mode, T, CLIP, ZERO => unsafe {
                    gather_rows::<T, CLIP, ZERO>(self, start, chunk)
                });
                if gathered.is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                Ok(())
            },
        );
        let done = if failed.into_inner() {
            // SAFETY: every task has finished (split_rows returned) and
            // each saved all its rows: `saved` holds all `len` bytes of
            // `out` as they were, and does not overlap it.
            unsafe {
                std::ptr::copy_nonoverlapping(saved.at(0).cast_const(), out.as_mut_ptr(), len)
            };
            self.report_bad(mode, threads)
        } else {
            Ok(())
        };
        Some(done)
    }

    /// Whether some stored index may address nothing in `mode`.
    pub(crate) fn can_fail(&self, mode: Mode) -> bool {
        self.n_index_rows > 0
            && match mode {
                Mode::Raise => true,
                Mode::Clip => self.tuple.iter().any(|t| t.size == 0),
                Mode::Zero => false,
            }
    }

    /// The error for an index the copy found bad: the first bad one in C
    /// order; if there is none now, `indices` changed under us.
    pub(crate) fn report_bad(&self, mode: Mode, threads: usize) -> Result<()> {
        self.check_all(mode, threads)?;
        Err(GatherError::IndicesModified)
    }

    /// Every output row's source offset, computed first (validating every
    /// index: each one is used by some row when there is output), then the
    /// copy from them, which spares computing them again. Split over
    /// threads, both phases run in one team of tasks, one task a thread and
    /// phase (`split::phase_rows_now`): the first half computes the offsets
    /// of a share of rows each, the second copies a share each once every
    /// offset is known, and copies nothing if an index was bad. (Two teams,
    /// one a phase, cost the calls this path serves a second wake-up of the
    /// helpers, and the offsets on the calling thread alone made `out=` with
    /// `mode="raise"` much slower than `mode="clip"` on two threads.)
    /// `None` if there was no memory for the offsets (the caller then
    /// validates another way).
    fn offsets_then_copy(
        &self,
        mode: Mode,
        out: &mut [u8],
        threads: usize,
    ) -> Option<std::result::Result<(), BadRow>> {
        let n = self.n_rows;
        if n <= FEW_ROWS {
            let mut offsets = [0isize; FEW_ROWS];
            return Some(self.offsets_then_copy_in(mode, out, threads, &mut offsets[..n]));
        }
        let mut offsets = kept::take(&KEPT_OFFSETS, n)?;
        let done = self.offsets_then_copy_in(mode, out, threads, &mut offsets[..n]);
        kept::keep(&KEPT_OFFSETS, offsets);
        Some(done)
    }

    /// [`Plan::offsets_then_copy`] with `offsets` to hold every row's.
    fn offsets_then_copy_in(
        &self,
        mode: Mode,
        out: &mut [u8],
        threads: usize,
        offsets: &mut [isize],
    ) -> std::result::Result<(), BadRow> {
        let (n, sb) = (self.n_rows, self.slice_bytes);
        debug_assert_eq!(out.len(), n * sb);
        debug_assert_eq!(offsets.len(), n);
        let Some((threads, rows_per_task)) = phase_rows_now(threads, n, self.copy_cost()) else {
            self.row_offsets(mode, 0, offsets)?;
            // SAFETY: the offsets were just made by `row_offsets` on this
            // plan, one per row of `out`.
            unsafe { self.copy_at(mode, offsets, out) };
            return Ok(());
        };
        let tasks = n.div_ceil(rows_per_task);
        let rows_of = |t: usize| {
            let start = t * rows_per_task;
            start..(start + rows_per_task).min(n)
        };
        let (slots, base) = (
            Disjoint::new(offsets.as_mut_ptr()),
            Disjoint::new(out.as_mut_ptr()),
        );
        let computed = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        for_each_task(threads, 2 * tasks, &|t| {
            if t < tasks {
                // Counted even if the task panics, so that no copy task
                // waits for it forever (the panic reaches the caller).
                let _count = Computed(&computed, &failed);
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                let rows = rows_of(t);
                // SAFETY: task t owns slots `rows` of `offsets`, inside it,
                // which no other task touches until every offsets task is
                // counted (the copy tasks wait for that).
                let mine =
                    unsafe { std::slice::from_raw_parts_mut(slots.at(rows.start), rows.len()) };
                if self.row_offsets(mode, rows.start, mine).is_err() {
                    failed.store(true, Ordering::Relaxed);
                }
                return;
            }
            // Every offsets task was claimed before this one (tasks are
            // claimed in order), so the threads running them are at work
            // and the wait is for their last few rows.
            while computed.load(Ordering::Acquire) < tasks {
                std::hint::spin_loop();
                std::thread::yield_now();
            }
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let rows = rows_of(t - tasks);
            // SAFETY: every offsets task is done (counted with Release,
            // read with Acquire above), so the slots are written and no
            // longer borrowed mutably; `rows` lie inside `offsets`, and
            // this task owns their bytes of `out`, inside it and disjoint
            // from every other task's, which `data` does not overlap
            // (caller of `execute`).
            unsafe {
                let mine =
                    std::slice::from_raw_parts(slots.at(rows.start).cast_const(), rows.len());
                let chunk =
                    std::slice::from_raw_parts_mut(base.at(rows.start * sb), rows.len() * sb);
                self.copy_at(mode, mine, chunk);
            }
        });
        if failed.load(Ordering::Relaxed) {
            Err(BadRow)
        } else {
            Ok(())
        }
    }

    /// Copies the rows at `offsets` into `out`.
    ///
    /// # Safety
    /// `offsets` made by `row_offsets` on this plan in `mode`, one per row
    /// of `out`; `out` does not overlap `data`.
    unsafe fn copy_at(&self, mode: Mode, offsets: &[isize], out: &mut [u8]) {
        // SAFETY: forwarded from the caller.
        unsafe {
            if mode == Mode::Zero {
                copy_rows_at::<true>(self, offsets, out);
            } else {
                copy_rows_at::<false>(self, offsets, out);
            }
        }
    }

    /// Computes the source offsets of output rows `start..start +
    /// offsets.len()`, checking their indices as the copy does, without
    /// copying.
    pub(crate) fn row_offsets(
        &self,
        mode: Mode,
        start: usize,
        offsets: &mut [isize],
    ) -> std::result::Result<(), BadRow> {
        assert!(start + offsets.len() <= self.n_rows);
        let mut od = Odometer::new(&self.rows, start);
        // SAFETY: rows start..start + offsets.len() exist (asserted), so
        // the odometer walks existing rows only.
        with_index_and_mode!(self.index_type, mode, T, CLIP, ZERO => unsafe {
            compute_offsets::<T, CLIP, ZERO>(self, &mut od, offsets)
        })
    }

    /// The time a copy takes, in bytes of sequential copying: the output
    /// written, the indices read and, when `data` is beyond the caches, a
    /// miss per row.
    fn copy_cost(&self) -> usize {
        let misses = if self.prefetch { self.n_rows } else { 0 };
        self.work_bytes()
            .saturating_add(misses.saturating_mul(RANDOM_ROW_COST))
    }

    /// Whether the copy would split over threads now (without waking a
    /// helper to find out).
    fn splits(&self, threads: usize) -> bool {
        let cost = self.copy_cost();
        task_rows(threads_without_waking(threads, cost), self.n_rows, cost).is_some()
    }

    /// The bytes of indices a validation pass reads. Saturating: zero-stride
    /// indices may hold far more index rows than bytes.
    fn index_reads(&self) -> usize {
        self.n_index_rows
            .saturating_mul(self.tuple.len())
            .saturating_mul(self.index_type.itemsize())
    }

    /// Validates every index as `execute` does, without copying: for a
    /// caller that copies by other means (`chunked`).
    pub(crate) fn validate(&self, mode: Mode, threads: usize) -> Result<()> {
        if self.can_fail(mode) {
            self.check_all(mode, threads)
        } else {
            Ok(())
        }
    }

    /// Validates every stored index; the error names the first bad one in
    /// C order of `indices`, whatever the thread count.
    pub(crate) fn check_all(&self, mode: Mode, threads: usize) -> Result<()> {
        let clip = mode == Mode::Clip;
        let n = self.n_index_rows;
        let scan = |rows: std::ops::Range<usize>| {
            // SAFETY: `rows` are existing index rows (a range of 0..n).
            with_index_type!(self.index_type, T => unsafe {
                if clip { first_bad::<T, true>(self, rows) } else { first_bad::<T, false>(self, rows) }
            })
        };
        let reads = self.index_reads();
        let threads = if reads < VALIDATE_PARALLEL_MIN_BYTES {
            1
        } else {
            threads
        };
        // Tasks finish in any order: keep the bad index of the lowest row
        // found, and skip the tasks that start after it.
        let first: Mutex<Option<(usize, usize)>> = Mutex::new(None);
        let lock = || first.lock().unwrap_or_else(|e| e.into_inner());
        split_ranges(threads, n, reads, &|rows| {
            if lock().is_some_and(|(row, _)| row < rows.start) {
                return;
            }
            if let Some(found) = scan(rows) {
                let mut first = lock();
                if first.is_none_or(|(row, _)| found.0 < row) {
                    *first = Some(found);
                }
            }
        });
        let bad = first.into_inner().unwrap_or_else(|e| e.into_inner());
        match bad {
            None => Ok(()),
            Some((row, j)) => Err(GatherError::IndexOutOfRange(Box::new(
                self.describe_bad(row, j),
            ))),
        }
    }

    fn describe_bad(&self, row: usize, j: usize) -> OutOfRange {
        let od = Odometer::new(&self.index_rows, row);
        // The lengths `index_rows` walks (broadcast axes at 1): unravelled
        // over them, `row` is the bad index's position in `indices`.
        let positions: SmallVec<[usize; 8]> = self.indices.shape[..self.position_rank]
            .iter()
            .zip(self.indices.strides)
            .map(|(&size, &stride)| distinct_positions(size, stride))
            .collect();
        let ty = self.index_type;
        // SAFETY: `row` is an existing index row and `pos` a position of its
        // tuple: an in-range position of `indices`, inside its bytes by the
        // checked-view invariant (a) and (b).
        let read = |pos: usize| unsafe {
            let base = self.indices.bytes.as_ptr().add(self.indices.offset);
            load_exact(
                ty,
                base.offset(od.index_off + pos as isize * self.tuple_stride),
            )
        };
        let axis = self.tuple[j];
        let mut position = unravel(row, &positions);
        if self.is_nd {
            position.push(j); // the value's place along the last axis
        }
        OutOfRange {
            value: read(j),
            position,
            tuple: self
                .is_nd
                .then(|| (0..self.tuple.len()).map(read).collect()),
            axis: axis.axis,
            axis_size: axis.size,
            data_shape: self.data.shape.to_vec(),
            negatives_allowed: self.wrap_negative,
        }
    }
}
