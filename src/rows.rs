//! The service path: whole rows of a table, by a short list of ids, with no
//! plan. A Python service gathers a request's few ids from a large table
//! on every call; for 1 to a few hundred rows, planning the general walk
//! costs more than the copy, and the rows' cache misses, taken one after
//! the other, cost more than both. Here the ids are resolved into a small
//! array on the stack while every row is requested into L2, then the rows
//! are copied: all their misses are in flight at once (tuning log:
//! `rows`). Where the machine's model says that requests made all at once
//! are worth less than requests spread over the copy
//! (`machine::Tuning::rows_requested_ahead`), rows of 65 to 512 bytes are
//! requested the far calls' distance ahead of the one copied instead, the
//! first of them while the ids are resolved. With a helper awake and many
//! lines of rows, each thread requests and copies its own part instead,
//! doubling the misses in flight (`take_tuples_split_in`).
//!
//! Only the plain case is taken: the table's rows contiguous, the ids
//! `i32` or `i64` counting from the end when negative (what
//! `gather(table, ids)` and `gather_nd(table, ids[:, None])` mean with
//! `mode="raise"`, or `mode="clip"`, which then clamps them into their
//! axis), or tuples of them into the table's leading axes (what
//! `gather_nd(table, tuples)` means: a row is then the slice a tuple
//! names, down to one element). Anything else, and any id out of range
//! (without clipping), is [`Declined`]: the caller runs the general path,
//! which gives every answer and every error its full form.

use std::mem::MaybeUninit;

use crate::convert::Cast;
use crate::copy::{copy_medium_rows, copy_small, MEDIUM_ROW, SMALL_ROW};
use crate::hints;
use crate::machine::tuning;
use crate::offsets;
use crate::plan::prefetches;
use crate::split::split_rows_as;

/// At most this many ids take the row path; longer lists are planned (the
/// planner's split balances many tasks over many threads; this path's, where
/// the machine's model says, halves one copy: `machine::Tuning::row_split_min_lines`).
/// Their offsets live on the stack (at most 4 KiB).
pub const MAX_ROW_IDS: usize = 512;

/// At most this many bytes of rows are read by the row path: every line
/// of them is requested before any is copied, and beyond about 2,048 lines
/// the requests outrun what the core tracks, so that the general kernel's
/// prefetch a fixed distance ahead does better. Where the copy requests
/// the rows ahead as it goes, the bound is [`max_row_bytes`]'s.
pub const MAX_ROW_BYTES: usize = 128 * 1024;

/// Rows the copy of rows of `row_bytes` (from a table of `table_bytes`,
/// `converted` or not) requests ahead of the one it copies, the first that
/// many requested while the ids are resolved; 0: every row is requested
/// before the copy (or none, from a table in a core's L2:
/// `plan::prefetches`). Ahead where the machine's model says
/// (`machine::Tuning::rows_requested_ahead`), for rows of 65 to 512 bytes
/// copied by `copy_medium_rows` (512 bytes only where
/// `machine::Tuning::half_kib_rows_by_moves`; not converted), the far
/// calls' distance (`hints::far_rows`).
fn ahead_rows(row_bytes: usize, converted: bool, table_bytes: usize) -> usize {
    let medium = !converted
        && row_bytes > SMALL_ROW
        && row_bytes <= MEDIUM_ROW
        && (row_bytes != 512 || tuning().half_kib_rows_by_moves);
    if medium && tuning().rows_requested_ahead && prefetches(table_bytes) {
        hints::far_rows(row_bytes)
    } else {
        0
    }
}

/// The most bytes of rows of `row_bytes` (from a table of `table_bytes`,
/// `converted` or not) the row path reads: [`MAX_ROW_BYTES`], or, where
/// the copy requests the rows ahead as it goes ([`ahead_rows`]), as many as
/// [`MAX_ROW_IDS`] rows of [`MEDIUM_ROW`] bytes: the bound's reason, requests
/// that outrun what the core tracks, is then gone (AMD EPYC Zen 3 VM, 512
/// random 512-byte rows of a 512 MiB table: 0.85-0.92x the general path's
/// time on one thread, 0.81-1.00x on two; docs/performance.md).
pub fn max_row_bytes(row_bytes: usize, converted: bool, table_bytes: usize) -> usize {
    bound(ahead_rows(row_bytes, converted, table_bytes))
}

/// [`max_row_bytes`] for a copy that requests `ahead` rows ahead.
fn bound(ahead: usize) -> usize {
    if ahead > 0 {
        MAX_ROW_IDS * MEDIUM_ROW
    } else {
        MAX_ROW_BYTES
    }
}

/// Index types the row path reads: NumPy's default integers.
pub trait RowId: Copy {
    /// The id as a signed 64-bit value.
    fn get(self) -> i64;
}

impl RowId for i64 {
    #[inline(always)]
    fn get(self) -> i64 {
        self
    }
}

impl RowId for i32 {
    #[inline(always)]
    fn get(self) -> i64 {
        i64::from(self)
    }
}

/// The row path did not run, and `out` was not written: an id lies outside
/// `[-rows, rows)` (without clipping; clipping, an axis is empty), there are more than [`MAX_ROW_IDS`] ids or none, their
/// rows add up to more than [`MAX_ROW_BYTES`], or the sizes do not describe
/// whole rows. The general path takes the call.
#[derive(Debug, PartialEq, Eq)]
pub struct Declined;

/// A C-contiguous array as the row path sees it.
#[derive(Clone, Copy, Debug)]
pub struct RowTable<'a> {
    /// Its bytes, every one of them.
    pub bytes: &'a [u8],
    /// How many blocks it is, one after the other: GatherND's `batch_dims`
    /// axes, flattened (1 without them).
    pub batches: usize,
    /// The axes of a block that an index tuple names.
    pub dims: &'a [usize],
    /// The bytes of a row: the slice past those axes.
    pub row_bytes: usize,
}

/// The rows of `table` named by `ids` (tuples of indices, GatherND), into
/// `out`, converted by `cast` if given: `ids` holds one tuple of
/// `table.dims.len()` indices per row taken, each counting from the end of
/// its axis when negative, the tuples of each batch (block of the table)
/// one after the other, as many for each; a row is the slice its tuple
/// names in its batch's block (with one batch and one axis, rows by ids).
/// With `clip`, an index outside its axis is clamped into it (after
/// counting from the end), as `Mode::Clip` does.
/// Short lists of points, rows or slices, as a service's request names
/// them, skip the plan.
///
/// In two steps: every id is read and checked, and its row requested, on
/// the calling thread; then `run` is handed the copy, which reads only
/// `table` and writes only `out`, to run where it likes (the bindings
/// release the GIL for a large one: the ids are not read again). Every id
/// is checked before anything is written: on [`Declined`], `out` is
/// untouched and `run` is not called.
#[inline(always)] // into its one caller per id type, as the planner-free path needs every instruction
pub fn take_tuples_in<I: RowId>(
    table: RowTable<'_>,
    ids: &[I],
    out: &mut [u8],
    cast: Option<Cast>,
    clip: bool,
    run: impl FnOnce(&mut (dyn FnMut() + Send)),
) -> Result<(), Declined> {
    take_tuples_split_in(table, ids, out, cast, clip, 1, run)
}

/// [`take_tuples_in`], the copy split over up to `threads` threads: each
/// requests its part's rows and copies them (the ids are all checked
/// first, on the calling thread, as before).
#[inline(always)]
pub fn take_tuples_split_in<I: RowId>(
    table: RowTable<'_>,
    ids: &[I],
    out: &mut [u8],
    cast: Option<Cast>,
    clip: bool,
    threads: usize,
    run: impl FnOnce(&mut (dyn FnMut() + Send)),
) -> Result<(), Declined> {
    let mut rows = Rows::new(table, ids, clip, cast.is_some())?;
    rows.threads = threads.clamp(1, rows.count);
    let RowTable {
        bytes: table,
        row_bytes,
        ..
    } = table;
    let Some(cast) = cast else {
        // The common widths as constants, so that the prefetch of a row's
        // lines is straight-line code and its copy a few vector moves: up
        // to 64 bytes one move of that width, 128 and 256 bytes 32-byte
        // moves (`copy_medium_rows`), each width in a closure of its own:
        // one closure shared by the widths made one copy loop for all of
        // them, which called `memcpy` a row (tuning log: `rows`, copies by
        // width). 512-byte rows keep `memcpy` where it moves 64 bytes at
        // once (AVX-512), which copied them faster from a large table, and
        // go by 32-byte moves elsewhere (`machine::Tuning::
        // half_kib_rows_by_moves`). Other widths up to 64 bytes (a GatherND
        // slice of 3 or 15 elements) are two overlapping moves, and up to
        // `MEDIUM_ROW` (35 elements: 140 bytes) 32-byte moves, both cheaper
        // than `memcpy`'s call and dispatch.
        let copy = |src: &[u8], dst: &mut [u8]| dst.copy_from_slice(src);
        let small = |src: &[u8], dst: &mut [u8]| {
            debug_assert!(src.len() == dst.len() && src.len() <= 64);
            // SAFETY: two distinct slices of the same length, at most 64.
            unsafe { copy_small(src.as_ptr(), dst.as_mut_ptr(), src.len()) }
        };
        let ahead = rows.ahead;
        macro_rules! fixed {
            ($($w:literal)* ; $($m:literal)* ; $($c:literal)*) => {
                match row_bytes {
                    512 if tuning().half_kib_rows_by_moves => take_rows_by(table, &rows, 512, 512, out, |table, offsets, out, ahead| {
                        copy_medium_rows(table, offsets, 512, out, ahead)
                    }, ahead, run),
                    $($w => take_rows_with(table, &rows, $w, $w, out, |src: &[u8], dst: &mut [u8]| {
                        dst[..$w].copy_from_slice(&src[..$w])
                    }, run),)*
                    $($m => take_rows_by(table, &rows, $m, $m, out, |table, offsets, out, ahead| {
                        copy_medium_rows(table, offsets, $m, out, ahead)
                    }, ahead, run),)*
                    $($c => take_rows_with(table, &rows, $c, $c, out, copy, run),)*
                    ..=64 => take_rows_with(table, &rows, row_bytes, row_bytes, out, small, run),
                    ..=MEDIUM_ROW => take_rows_by(table, &rows, row_bytes, row_bytes, out, |table, offsets, out, ahead| {
                        copy_medium_rows(table, offsets, row_bytes, out, ahead)
                    }, ahead, run),
                    _ => take_rows_with(table, &rows, row_bytes, row_bytes, out, copy, run),
                }
            };
        }
        return fixed!(4 8 16 32 64; 128 256; 512);
    };
    let (from, to) = (cast.from().size(), cast.to().size());
    if row_bytes % from != 0 {
        return Err(Declined);
    }
    let out_row = (row_bytes / from).checked_mul(to).ok_or(Declined)?;
    let convert = |src: &[u8], dst: &mut [u8]| {
        // SAFETY: `src` is a row, `row_bytes / from` elements of the source
        // type; `dst` its output row, as many of the output type; distinct
        // slices.
        unsafe { cast.run(src.as_ptr(), dst.as_mut_ptr(), src.len() / from) }
    };
    take_rows_with(table, &rows, row_bytes, out_row, out, convert, run)
}

/// The ids of a row-path call, checked to describe whole rows of the
/// table: `dims.len()` ids a row, as many rows for each batch, at most
/// [`MAX_ROW_IDS`] rows and [`MAX_ROW_BYTES`] of them, and the batches'
/// blocks of `dims` over `row_bytes` making up the table.
struct Rows<'a, I> {
    ids: &'a [I],
    dims: &'a [usize],
    /// Tuples a batch, and rows a batch's block.
    per_batch: usize,
    block_rows: usize,
    count: usize,
    /// Whether an index outside its axis is clamped into it.
    clip: bool,
    /// The threads the copy is split over.
    threads: usize,
    /// Rows the copy requests ahead of the one it copies ([`ahead_rows`]).
    ahead: usize,
}

impl<'a, I: RowId> Rows<'a, I> {
    fn new(
        table: RowTable<'a>,
        ids: &'a [I],
        clip: bool,
        converted: bool,
    ) -> Result<Self, Declined> {
        let RowTable {
            bytes,
            batches,
            dims,
            row_bytes,
        } = table;
        let k = dims.len();
        let Some(block_rows) = dims.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n)) else {
            return Err(Declined);
        };
        let whole = block_rows
            .checked_mul(batches)
            .and_then(|n| n.checked_mul(row_bytes));
        if k == 0 || row_bytes == 0 || batches == 0 || whole != Some(bytes.len()) {
            return Err(Declined);
        }
        let count = ids.len() / k;
        if !ids.len().is_multiple_of(k) || !count.is_multiple_of(batches) {
            return Err(Declined);
        }
        let ahead = ahead_rows(row_bytes, converted, bytes.len());
        if count == 0 || count > MAX_ROW_IDS || count.saturating_mul(row_bytes) > bound(ahead) {
            return Err(Declined);
        }
        Ok(Rows {
            ids,
            dims,
            per_batch: count / batches,
            block_rows,
            count,
            clip,
            threads: 1,
            ahead,
        })
    }

    /// Pushes every row's byte offset in the table onto `offsets`, the
    /// first `requested` rows (all of them with `usize::MAX`) requested
    /// into L2 as they are found if the table is beyond a core's L2 (the
    /// general path's rule, `plan::prefetches`: the requests for the 180
    /// rows of `ov_gnd8_xml2`, from a table of 840 KiB, took a third of its
    /// call); [`Declined`] at the first index outside its axis (without
    /// clipping; clipping, at an empty axis).
    #[inline(always)]
    fn offsets(
        &self,
        table: &[u8],
        row_bytes: usize,
        offsets: &mut Offsets,
        requested: usize,
    ) -> Result<(), Declined> {
        match (requested > 0 && prefetches(table.len()), self.clip) {
            (true, false) => {
                self.offsets_requested::<true, false>(table, row_bytes, offsets, requested)
            }
            (false, false) => self.offsets_requested::<false, false>(table, row_bytes, offsets, 0),
            (true, true) => {
                self.offsets_requested::<true, true>(table, row_bytes, offsets, requested)
            }
            (false, true) => self.offsets_requested::<false, true>(table, row_bytes, offsets, 0),
        }
    }

    /// [`Rows::offsets`], the first `requested` rows requested into L2 if
    /// `REQUEST`, the indices clamped into their axes if `CLIP`.
    #[inline(always)]
    fn offsets_requested<const REQUEST: bool, const CLIP: bool>(
        &self,
        table: &[u8],
        row_bytes: usize,
        offsets: &mut Offsets,
        requested: usize,
    ) -> Result<(), Declined> {
        // A function, not a closure, so that it is inlined at each of its
        // calls with `row_bytes` a constant: a closure called twice was
        // not, and its prefetch of a row's lines became a loop.
        #[inline(always)]
        fn request<const REQUEST: bool>(
            table: &[u8],
            row_bytes: usize,
            row: usize,
            at: &mut [MaybeUninit<usize>; MAX_ROW_IDS],
            len: &mut usize,
            requested: usize,
        ) {
            // The row is in the table (`Rows::new`), so the product is
            // below `table.len()`.
            let offset = row * row_bytes;
            if REQUEST && *len < requested {
                // Every line of the row into L2 rather than L1: the core
                // tracks more misses in flight to L2, and L1 could not hold
                // 64 KiB of rows anyway.
                hints::span(table[offset..offset + row_bytes].as_ptr(), row_bytes, true);
            }
            // `Rows::new` bounds the count, and the index is checked anyway.
            at[*len].write(offset);
            *len += 1;
        }
        // The count in a local, stored once at the end: kept in `offsets`,
        // it was loaded, incremented and stored for every row, a chain of
        // store-to-load forwards where most of the loop's time sat (perf,
        // 512 cached rows; tuning log: `rows`, copies by width).
        let (at, mut len) = (&mut offsets.at, 0);
        // Row-major over `dims`, a row lies below their product, the rows
        // of a block; the blocks' rows add up to the table's, so nothing
        // overflows. Ids and pairs (points) have loops of their own,
        // cheaper than the walk over a tuple's axes.
        let k = self.dims.len();
        for (batch, ids) in self.ids.chunks_exact(self.per_batch * k).enumerate() {
            let base = batch * self.block_rows;
            match *self.dims {
                [rows] => {
                    for id in ids {
                        request::<REQUEST>(
                            table,
                            row_bytes,
                            base + resolve::<CLIP>(id.get(), rows)?,
                            at,
                            &mut len,
                            requested,
                        );
                    }
                }
                [n0, n1] => {
                    for pair in ids.chunks_exact(2) {
                        let row = resolve::<CLIP>(pair[0].get(), n0)? * n1
                            + resolve::<CLIP>(pair[1].get(), n1)?;
                        request::<REQUEST>(table, row_bytes, base + row, at, &mut len, requested);
                    }
                }
                _ => {
                    for tuple in ids.chunks_exact(k) {
                        let mut row = 0;
                        for (id, &n) in tuple.iter().zip(self.dims) {
                            row = row * n + resolve::<CLIP>(id.get(), n)?;
                        }
                        request::<REQUEST>(table, row_bytes, base + row, at, &mut len, requested);
                    }
                }
            }
        }
        offsets.len = len;
        debug_assert_eq!(offsets.len, self.count);
        Ok(())
    }
}

/// The rows' byte offsets, at most [`MAX_ROW_IDS`], on the stack and left
/// uninitialised until written: zeroing 4 KiB would cost a one-row call
/// more than its copy, and a growable `SmallVec`'s push was not inlined
/// in the loops over tuples.
struct Offsets {
    at: [MaybeUninit<usize>; MAX_ROW_IDS],
    len: usize,
}

impl Offsets {
    #[inline(always)]
    fn new() -> Self {
        Offsets {
            at: [const { MaybeUninit::uninit() }; MAX_ROW_IDS],
            len: 0,
        }
    }

    fn as_slice(&self) -> &[usize] {
        // SAFETY: the first `len` entries were written
        // (`offsets_requested` sets `len` after writing them), and
        // `MaybeUninit<usize>` has the layout of `usize`.
        unsafe { std::slice::from_raw_parts(self.at.as_ptr().cast::<usize>(), self.len) }
    }
}

/// `id` resolved on an axis of `n` (negatives count from the end; clamped
/// into the axis if `CLIP`), or [`Declined`] when out of range (the general
/// path raises the error; clipping, only on an empty axis).
#[inline(always)]
fn resolve<const CLIP: bool>(id: i64, n: usize) -> Result<usize, Declined> {
    offsets::resolve::<CLIP>(id, n, true).ok_or(Declined)
}

/// The row path with `copy` moving each row (`row_bytes` from `table`) to
/// its output row (`out_row` bytes of `out`): every id is read and checked
/// (and its row requested) first, then `run` is given the copy.
#[inline(always)]
fn take_rows_with<I: RowId>(
    table: &[u8],
    rows: &Rows<'_, I>,
    row_bytes: usize,
    out_row: usize,
    out: &mut [u8],
    copy: impl Fn(&[u8], &mut [u8]) + Sync,
    run: impl FnOnce(&mut (dyn FnMut() + Send)),
) -> Result<(), Declined> {
    // Requests nothing ahead: every row is requested before the copy.
    let copy_all = |table: &[u8], offsets: &[usize], out: &mut [u8], _ahead: usize| {
        for (dst, &from) in out.chunks_exact_mut(out_row).zip(offsets) {
            copy(&table[from..from + row_bytes], dst);
        }
    };
    take_rows_by(table, rows, row_bytes, out_row, out, copy_all, 0, run)
}

/// [`take_rows_with`] with `copy_all` moving every row at once: given the
/// table, the rows' byte offsets in it, `out` (`out_row` bytes a row) and
/// how many rows ahead of the one it copies it requests, the first that
/// many rows requested before it (`ahead`; 0: it requests none, and every
/// row is requested before it).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn take_rows_by<I: RowId>(
    table: &[u8],
    rows: &Rows<'_, I>,
    row_bytes: usize,
    out_row: usize,
    out: &mut [u8],
    copy_all: impl Fn(&[u8], &[usize], &mut [u8], usize) + Sync,
    ahead: usize,
    run: impl FnOnce(&mut (dyn FnMut() + Send)),
) -> Result<(), Declined> {
    if out_row == 0 || Some(out.len()) != rows.count.checked_mul(out_row) {
        return Err(Declined);
    }
    let request = prefetches(table.len());
    // The rows requested before the copy.
    let first = if ahead > 0 { ahead } else { usize::MAX };
    let mut offsets = Offsets::new();
    let split = rows.threads > 1;
    rows.offsets(
        table,
        row_bytes,
        &mut offsets,
        if split { 0 } else { first },
    )?;
    let offsets = offsets.as_slice();
    if !split {
        run(&mut || copy_all(table, offsets, out, ahead));
        return Ok(());
    }
    // Each thread requests the lines of its own rows, into its own L2, and
    // copies them.
    let threads = rows.threads;
    let per_task = offsets.len().div_ceil(threads);
    let fill = |start: usize, chunk: &mut [u8]| {
        let offsets = &offsets[start..start + chunk.len() / out_row];
        if request {
            for &from in offsets.iter().take(first) {
                hints::span(table[from..from + row_bytes].as_ptr(), row_bytes, true);
            }
        }
        copy_all(table, offsets, chunk, ahead);
        Ok(())
    };
    run(&mut || {
        // The fill never fails.
        let _ = split_rows_as((threads, per_task), offsets.len(), out_row, out, &fill);
    });
    Ok(())
}

#[cfg(test)]
#[path = "rows_tests.rs"]
mod tests;
