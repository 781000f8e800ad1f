//! The copy loops. Work goes in blocks of rows: first every row's source
//! offset is computed (reading and resolving its indices), then the block's
//! slices are copied with a loop specialised for the slice's byte width.

use std::ptr;

use crate::index::IndexElem;
use crate::layout::SliceLayout;
use crate::plan::{Plan, TupleAxis};
use crate::stream;
use crate::walk::Odometer;

/// What an index outside `[-s, s)` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Report an `IndexError`.
    Raise,
    /// Fill the slice it addresses with zero bytes.
    Zero,
    /// Wrap negatives, then clamp into `[0, s - 1]`.
    Clip,
}

impl Mode {
    /// Parses the Python-facing spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "raise" => Some(Mode::Raise),
            "zero" => Some(Mode::Zero),
            "clip" => Some(Mode::Clip),
            _ => None,
        }
    }
}

/// Rows per block: the block's offsets (4 KiB) stay in L1 between the two
/// phases.
pub(crate) const BLOCK: usize = 512;

/// Offset marking a row whose slice is zero-filled (`Mode::Zero`). Never a
/// real offset: those lie within one allocation, far from `isize::MIN`.
const ZERO_FILL: isize = isize::MIN;

/// Resolves an index on an axis of `size`: negatives count from the end
/// when `wrap`, else they address nothing (or clip to 0); `None` if it
/// addresses nothing (with `CLIP`, only on an empty axis).
#[inline(always)]
pub(crate) fn resolve<const CLIP: bool>(v: i64, size: usize, wrap: bool) -> Option<usize> {
    let s = size as i64;
    if CLIP {
        // No overflow: s >= 0, so v + s >= i64::MIN + 0 when v < 0.
        let v = if v < 0 && wrap { v + s } else { v };
        return (s > 0).then(|| v.clamp(0, s - 1) as usize);
    }
    // Branch-free, as the offsets loop wants: a negative `v` gains `s` when
    // wrapping (v >> 63 is all ones exactly when v < 0), and one unsigned
    // compare then rejects every value outside 0..s, negatives included.
    let v = v + ((v >> 63) & s & -(wrap as i64));
    ((v as u64) < (s as u64)).then_some(v as usize)
}

/// A row whose index addresses nothing (at the row's position in the
/// walked range).
pub(crate) struct BadRow;

/// Fills `offsets` with the byte offsets, from element `[0, ..., 0]` of
/// `data`, of the slices of the next `offsets.len()` rows. Runs along the
/// innermost row axis, where both strides are constant.
///
/// # Safety
/// `plan` must have been checked (views inside their buffers), and `od` must
/// walk rows of `plan.rows` that exist.
#[inline(always)]
unsafe fn compute_offsets<T: IndexElem, const CLIP: bool, const ZERO: bool>(
    plan: &Plan<'_>,
    od: &mut Odometer,
    offsets: &mut [isize],
) -> Result<(), BadRow> {
    let mut done = 0;
    while done < offsets.len() {
        let run = od.inner_left(&plan.rows).min(offsets.len() - done);
        let slots = &mut offsets[done..done + run];
        // SAFETY: forwarded; the run stays on existing rows.
        unsafe {
            match plan.tuple.as_slice() {
                // Short tuples as arrays: their loop unrolls.
                [axis] => run_offsets::<T, CLIP, ZERO, _>(plan, od, [*axis], slots)?,
                [a, b] => run_offsets::<T, CLIP, ZERO, _>(plan, od, [*a, *b], slots)?,
                [a, b, c] => run_offsets::<T, CLIP, ZERO, _>(plan, od, [*a, *b, *c], slots)?,
                all => run_offsets::<T, CLIP, ZERO, _>(plan, od, all, slots)?,
            }
        }
        od.skip_inner(&plan.rows, run);
        done += run;
    }
    Ok(())
}

/// One run along the innermost row axis; `axes` are the tuple's axes.
///
/// # Safety
/// As for [`compute_offsets`]; `slots.len() <= od.inner_left()`.
#[inline(always)]
unsafe fn run_offsets<T: IndexElem, const CLIP: bool, const ZERO: bool, A: AsRef<[TupleAxis]>>(
    plan: &Plan<'_>,
    od: &Odometer,
    axes: A,
    slots: &mut [isize],
) -> Result<(), BadRow> {
    let inner = plan.rows[plan.rows.len() - 1];
    // SAFETY: `indices.offset <= indices.bytes.len()` (checked view, even an
    // empty one): the pointer stays within the slice or one past its end.
    let index_base = unsafe { plan.indices.bytes.as_ptr().add(plan.indices.offset) };
    let (mut data_off, mut index_off) = (od.data_off, od.index_off);
    for slot in slots.iter_mut() {
        // SAFETY: `index_off` addresses an existing position of `indices`.
        let tuple = unsafe { index_base.offset(index_off) };
        let mut off = data_off;
        let mut ok = true;
        for (j, axis) in axes.as_ref().iter().enumerate() {
            // SAFETY: position j < k of the tuple exists in `indices`.
            let v = unsafe { T::load(tuple.offset(j as isize * plan.tuple_stride)) };
            // No branch per index: a bad one only clears `ok`, and the
            // offset it spoils is never used.
            let x = resolve::<CLIP>(v, axis.size, plan.wrap_negative);
            ok &= x.is_some();
            off = off.wrapping_add((x.unwrap_or(0) as isize).wrapping_mul(axis.data_stride));
        }
        *slot = if ok {
            off
        } else if ZERO {
            ZERO_FILL
        } else {
            return Err(BadRow);
        };
        data_off += inner.data_stride;
        index_off += inner.index_stride;
    }
    Ok(())
}

/// How many cache lines the copy keeps requested ahead of the row it
/// copies: random rows of a large array are memory-latency bound, and the
/// more lines in flight, the more of the latency is hidden, up to what the
/// core can track. Measured on the 2-core EPYC VM (in-process A/B, 24 to 96
/// lines): 32 was best or even everywhere; 2M point lookups took 10-20%
/// less time than with the 12 lines of the former fixed 12 rows ahead.
const PREFETCH_LINES: usize = 32;

/// How many rows ahead to prefetch for slices of `width` bytes, so that
/// about [`PREFETCH_LINES`] lines are in flight (a slice that does not start
/// on a line touches one more line than its width needs).
#[inline(always)]
fn prefetch_rows(width: usize) -> usize {
    (PREFETCH_LINES / (width.min(PREFETCH_MAX) / 64 + 1)).max(2)
}

/// At most this many bytes of a slice are prefetched (larger slices are
/// streamed well by the hardware prefetcher once started).
const PREFETCH_MAX: usize = 1024;

/// Asks the cache for the first bytes of the slice at `src + off` (none
/// for a zero-filled row, which only `ZERO` plans have). A hint only: never
/// faults, whatever the address.
#[inline(always)]
fn prefetch<const ZERO: bool>(src: *const u8, off: isize, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        if ZERO && off == ZERO_FILL {
            return;
        }
        let p = src.wrapping_offset(off);
        // The first line; the loop below only runs for slices longer than one.
        // SAFETY: prefetch is a hint that never faults and reads nothing
        // architecturally; the address need not be valid.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(p.cast()) };
        let mut line = 64;
        while line < bytes.min(PREFETCH_MAX) {
            // SAFETY: prefetch is a hint that never faults and reads nothing
            // architecturally; the address need not be valid.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line).cast()) };
            line += 64;
        }
        // A slice that does not start on a cache line ends on one more line
        // than the loop asked for (a 60-byte row almost always spans two).
        if bytes > 1 && bytes <= PREFETCH_MAX {
            // SAFETY: as above.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(bytes - 1).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (src, off, bytes);
}

/// Copies `W`-byte slices; `W` known at compile time becomes plain moves.
///
/// # Safety
/// Every offset addresses `W` readable bytes from `src`, or is the
/// zero-fill marker and `ZERO` is set; `dst` holds `offsets.len() * W`
/// writable bytes not overlapping `data`.
#[inline(always)]
unsafe fn copy_fixed<const W: usize, const PREFETCH: bool, const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    dst: *mut u8,
) {
    let ahead = prefetch_rows(W);
    for (i, &off) in offsets.iter().enumerate() {
        if !PREFETCH {
        } else if let Some(&next) = offsets.get(i + ahead) {
            prefetch::<ZERO>(src, next, W);
        }
        // SAFETY: row i of the block lies in `dst` (caller).
        let d = unsafe { dst.add(i * W) };
        if ZERO && off == ZERO_FILL {
            // SAFETY: as above.
            unsafe { ptr::write_bytes(d, 0, W) };
        } else {
            // SAFETY: the source slice is inside `data` (caller), the
            // destination inside the output, and they do not overlap.
            unsafe { ptr::copy_nonoverlapping(src.offset(off), d, W) };
        }
    }
}

/// Rows up to this width are copied with two overlapping moves rather than
/// a call to `memcpy`.
const SMALL_ROW: usize = 64;

/// 16 bytes that load and store as one vector move.
#[cfg(target_arch = "x86_64")]
type V16 = std::arch::x86_64::__m128i;
#[cfg(not(target_arch = "x86_64"))]
type V16 = u128;

/// 32 bytes as two vector moves (`[u8; 32]` would go through the stack).
type V32 = [V16; 2];

/// Copies `width` bytes, `size_of::<M>() <= width <= 2 * size_of::<M>()`,
/// as two possibly overlapping moves of `M`: no loop, no call.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, width)`, and the bound above.
#[inline(always)]
unsafe fn two_moves<M: Copy>(src: *const u8, dst: *mut u8, width: usize) {
    let n = std::mem::size_of::<M>();
    // SAFETY: n <= width, so both moves stay inside the `width` bytes of
    // `src` and `dst` (caller); unaligned reads and writes take any address.
    unsafe {
        let head = src.cast::<M>().read_unaligned();
        let tail = src.add(width - n).cast::<M>().read_unaligned();
        dst.cast::<M>().write_unaligned(head);
        dst.add(width - n).cast::<M>().write_unaligned(tail);
    }
}

/// Copies `width <= SMALL_ROW` bytes as two possibly overlapping moves of
/// the largest power-of-two size that fits.
///
/// # Safety
/// As for `ptr::copy_nonoverlapping(src, dst, width)`.
#[inline(always)]
pub(crate) unsafe fn copy_small(src: *const u8, dst: *mut u8, width: usize) {
    // SAFETY: each arm's type is at most `width` and at least half of it.
    unsafe {
        match width {
            32.. => two_moves::<V32>(src, dst, width),
            16.. => two_moves::<V16>(src, dst, width),
            8.. => two_moves::<u64>(src, dst, width),
            4.. => two_moves::<u32>(src, dst, width),
            2.. => two_moves::<u16>(src, dst, width),
            1 => two_moves::<u8>(src, dst, width),
            _ => {}
        }
    }
}

/// As [`copy_fixed`] for a run-time `width <= SMALL_ROW` (a width with no
/// fixed copy, say 60 bytes): the moves are chosen once per block rather
/// than once per row.
///
/// # Safety
/// As for [`copy_fixed`] with `W = width`.
unsafe fn copy_small_rows<const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    dst: *mut u8,
    width: usize,
    prefetch_ahead: bool,
) {
    #[inline(always)]
    unsafe fn rows<M: Copy, const PREFETCH: bool, const ZERO: bool>(
        src: *const u8,
        offsets: &[isize],
        dst: *mut u8,
        width: usize,
    ) {
        let ahead = prefetch_rows(width);
        for (i, &off) in offsets.iter().enumerate() {
            if !PREFETCH {
            } else if let Some(&next) = offsets.get(i + ahead) {
                prefetch::<ZERO>(src, next, width);
            }
            // SAFETY: row i of the block lies in `dst` (caller).
            let d = unsafe { dst.add(i * width) };
            if ZERO && off == ZERO_FILL {
                // SAFETY: as above.
                unsafe { ptr::write_bytes(d, 0, width) };
            } else {
                // SAFETY: as in `copy_fixed`; `M` fits `width` (caller).
                unsafe { two_moves::<M>(src.offset(off), d, width) };
            }
        }
    }
    macro_rules! by_width {
        ($($m:ty => $lo:literal,)*) => {
            match width {
                $($lo.. => {
                    // SAFETY: forwarded; $lo <= width < 2 * $lo (or 64).
                    unsafe {
                        if prefetch_ahead {
                            rows::<$m, true, ZERO>(src, offsets, dst, width)
                        } else {
                            rows::<$m, false, ZERO>(src, offsets, dst, width)
                        }
                    }
                })*
                _ => {}
            }
        };
    }
    by_width!(V32 => 32, V16 => 16, u64 => 8, u32 => 4, u16 => 2, u8 => 1,);
}

/// As [`copy_fixed`] with the width known only at run time.
///
/// # Safety
/// As for [`copy_fixed`] with `W = width`.
unsafe fn copy_var<const STREAM: bool, const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    dst: *mut u8,
    width: usize,
) {
    let ahead = prefetch_rows(width);
    for (i, &off) in offsets.iter().enumerate() {
        if let Some(&next) = offsets.get(i + ahead) {
            prefetch::<ZERO>(src, next, width);
        }
        // SAFETY: row i of the block lies in `dst` (caller).
        let d = unsafe { dst.add(i * width) };
        if ZERO && off == ZERO_FILL {
            // SAFETY: as above.
            unsafe { ptr::write_bytes(d, 0, width) };
        } else if STREAM {
            // SAFETY: as in `copy_fixed`.
            unsafe { stream::copy(src.offset(off), d, width) };
        } else {
            // SAFETY: as in `copy_fixed`.
            unsafe { ptr::copy_nonoverlapping(src.offset(off), d, width) };
        }
    }
}

/// Copies slices that are not contiguous in `data`: runs of `run` bytes at
/// the positions of `outer`.
///
/// # Safety
/// Every offset is the start of a slice of `data` whose runs are all
/// readable, or is the zero-fill marker and `ZERO` is set; `dst` holds
/// `offsets.len() * slice_bytes` writable bytes.
unsafe fn copy_strided<const ZERO: bool>(
    src: *const u8,
    offsets: &[isize],
    dst: *mut u8,
    run: usize,
    outer: &[(usize, isize)],
    slice_bytes: usize,
) {
    let runs: usize = outer.iter().map(|o| o.0).product();
    let mut coords: smallvec::SmallVec<[usize; 8]> = smallvec::smallvec![0; outer.len()];
    for (i, &off) in offsets.iter().enumerate() {
        // SAFETY: row i of the block lies in `dst` (caller).
        let mut d = unsafe { dst.add(i * slice_bytes) };
        if ZERO && off == ZERO_FILL {
            // SAFETY: as above.
            unsafe { ptr::write_bytes(d, 0, slice_bytes) };
            continue;
        }
        let mut s = off;
        for _ in 0..runs {
            // SAFETY: `s` is the offset of one run of this slice (caller);
            // `d` walks the row's `slice_bytes` bytes one run at a time.
            unsafe {
                ptr::copy_nonoverlapping(src.offset(s), d, run);
                d = d.add(run);
            }
            for (c, &(n, stride)) in coords.iter_mut().zip(outer).rev() {
                *c += 1;
                s += stride;
                if *c < n {
                    break;
                }
                s -= stride * n as isize;
                *c = 0;
            }
        }
    }
}

/// Copies the slices of one block, dispatching on the slice layout.
///
/// # Safety
/// As for the copy functions: offsets from [`compute_offsets`] on the same
/// plan with the same `ZERO`, `dst` exactly `offsets.len() *
/// plan.slice_bytes` bytes.
unsafe fn copy_block<const ZERO: bool>(plan: &Plan<'_>, offsets: &[isize], dst: *mut u8) {
    // SAFETY: `data.offset <= data.bytes.len()` (checked view, even an empty
    // one, whose rows are all zero-filled): within the slice or one past it.
    let src = unsafe { plan.data.bytes.as_ptr().add(plan.data.offset) };
    macro_rules! fixed {
        ($($w:literal)*) => {
            match plan.slice {
                // `plan.stream` is only set for contiguous slices of 256 B+.
                SliceLayout::Contiguous { bytes } if plan.stream => {
                    // SAFETY: forwarded from the caller.
                    unsafe { copy_var::<true, ZERO>(src, offsets, dst, bytes) }
                }
                $(SliceLayout::Contiguous { bytes: $w } => {
                    // SAFETY: forwarded from the caller.
                    unsafe {
                        if plan.prefetch {
                            copy_fixed::<$w, true, ZERO>(src, offsets, dst)
                        } else {
                            copy_fixed::<$w, false, ZERO>(src, offsets, dst)
                        }
                    }
                })*
                SliceLayout::Contiguous { bytes } if bytes <= SMALL_ROW => {
                    // SAFETY: forwarded from the caller.
                    unsafe { copy_small_rows::<ZERO>(src, offsets, dst, bytes, plan.prefetch) }
                }
                SliceLayout::Contiguous { bytes } => {
                    // SAFETY: forwarded from the caller.
                    unsafe { copy_var::<false, ZERO>(src, offsets, dst, bytes) }
                }
                SliceLayout::Strided { run, ref outer } => {
                    // SAFETY: forwarded from the caller.
                    unsafe { copy_strided::<ZERO>(src, offsets, dst, run, outer, plan.slice_bytes) }
                }
            }
        };
    }
    fixed!(1 2 3 4 6 8 12 16 24 32 48 64 128);
}

/// Gathers output rows `start..start + n` into `out` (their bytes).
///
/// # Safety
/// `plan` checked; `start + n <= plan.n_rows`; `out.len() == n * slice_bytes`;
/// `out` does not overlap `data`.
pub(crate) unsafe fn gather_rows<T: IndexElem, const CLIP: bool, const ZERO: bool>(
    plan: &Plan<'_>,
    start: usize,
    out: &mut [u8],
) -> Result<(), BadRow> {
    let sb = plan.slice_bytes;
    let n = out.len().checked_div(sb).unwrap_or(0);
    if n <= SMALL_BLOCK {
        // Small calls: no 4 KiB buffer to clear.
        // SAFETY: forwarded from the caller.
        return unsafe { gather_rows_in::<T, CLIP, ZERO, SMALL_BLOCK>(plan, start, out, n) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { gather_rows_in::<T, CLIP, ZERO, BLOCK>(plan, start, out, n) }
}

/// Rows of a call small enough for a small offsets buffer.
const SMALL_BLOCK: usize = 16;

/// Computes the source offsets of output rows `start..start + offsets.len()`,
/// checking their indices as [`gather_rows`] does, without copying.
///
/// # Safety
/// `plan` checked; `start + offsets.len() <= plan.n_rows`.
pub(crate) unsafe fn row_offsets<T: IndexElem, const CLIP: bool, const ZERO: bool>(
    plan: &Plan<'_>,
    start: usize,
    offsets: &mut [isize],
) -> Result<(), BadRow> {
    let mut od = Odometer::new(&plan.rows, start);
    // SAFETY: forwarded from the caller.
    unsafe { compute_offsets::<T, CLIP, ZERO>(plan, &mut od, offsets) }
}

/// Copies the slices at `offsets`, made by [`row_offsets`] on the same plan,
/// into `out`: the second half of [`gather_rows`].
///
/// # Safety
/// `offsets` from `row_offsets` on `plan` with the same `ZERO`;
/// `out.len() == offsets.len() * plan.slice_bytes`; `out` does not overlap
/// `data`.
pub(crate) unsafe fn copy_rows_at<const ZERO: bool>(
    plan: &Plan<'_>,
    offsets: &[isize],
    out: &mut [u8],
) {
    let block_bytes = BLOCK * plan.slice_bytes;
    for (i, block) in offsets.chunks(BLOCK).enumerate() {
        // SAFETY: block i's rows occupy out[i * block_bytes ..] (caller).
        unsafe { copy_block::<ZERO>(plan, block, out.as_mut_ptr().add(i * block_bytes)) };
    }
    if plan.stream {
        // As in `gather_rows_in`.
        stream::fence();
    }
}

/// [`gather_rows`] with blocks of `B` rows.
///
/// # Safety
/// As for [`gather_rows`]; `n` is the number of rows in `out`.
#[inline(always)]
unsafe fn gather_rows_in<T: IndexElem, const CLIP: bool, const ZERO: bool, const B: usize>(
    plan: &Plan<'_>,
    start: usize,
    out: &mut [u8],
    n: usize,
) -> Result<(), BadRow> {
    let sb = plan.slice_bytes;
    let mut od = Odometer::new(&plan.rows, start);
    let mut offsets = [0isize; B];
    let mut done = 0;
    while done < n {
        let len = B.min(n - done);
        let block = &mut offsets[..len];
        // SAFETY: rows start+done .. start+done+len exist (caller).
        unsafe { compute_offsets::<T, CLIP, ZERO>(plan, &mut od, block)? };
        // SAFETY: the block's rows occupy out[done*sb .. (done+len)*sb].
        unsafe { copy_block::<ZERO>(plan, block, out.as_mut_ptr().add(done * sb)) };
        done += len;
    }
    if plan.stream {
        // Our non-temporal stores must be visible before this task reports
        // itself done to the thread that returns the output.
        stream::fence();
    }
    Ok(())
}

/// Finds the first stored index (C order of `indices`) among index rows
/// `rows` that addresses nothing: `(row, position in tuple)`.
///
/// # Safety
/// `plan` checked; `rows.end <= plan.n_index_rows`.
pub(crate) unsafe fn first_bad<T: IndexElem, const CLIP: bool>(
    plan: &Plan<'_>,
    rows: std::ops::Range<usize>,
) -> Option<(usize, usize)> {
    let dims = &plan.index_rows;
    let mut od = Odometer::new(dims, rows.start);
    let mut row = rows.start;
    while row < rows.end {
        let run = od.inner_left(dims).min(rows.end - row);
        // SAFETY: forwarded; the run stays on existing index rows.
        let bad = unsafe {
            match plan.tuple.as_slice() {
                [axis] => first_bad_in_run::<T, CLIP, _>(plan, &od, [*axis], run),
                [a, b] => first_bad_in_run::<T, CLIP, _>(plan, &od, [*a, *b], run),
                [a, b, c] => first_bad_in_run::<T, CLIP, _>(plan, &od, [*a, *b, *c], run),
                all => first_bad_in_run::<T, CLIP, _>(plan, &od, all, run),
            }
        };
        if let Some((r, j)) = bad {
            return Some((row + r, j));
        }
        od.skip_inner(dims, run);
        row += run;
    }
    None
}

/// Index rows validated between two looks at the verdict: the check
/// itself has no branch, so the loop runs at the speed of the loads.
const CHECK_CHUNK: usize = 64;

/// The first bad index in `run` index rows along the innermost axis from
/// the odometer's position: `(row within the run, position in tuple)`.
///
/// # Safety
/// As for [`first_bad`]; `run <= od.inner_left()`.
#[inline(always)]
unsafe fn first_bad_in_run<T: IndexElem, const CLIP: bool, A: AsRef<[TupleAxis]>>(
    plan: &Plan<'_>,
    od: &Odometer,
    axes: A,
    run: usize,
) -> Option<(usize, usize)> {
    let axes = axes.as_ref();
    let step = plan.index_rows[plan.index_rows.len() - 1].index_stride;
    // SAFETY: `indices.offset <= indices.bytes.len()` (checked view, even an
    // empty one): the pointer stays within the slice or one past its end.
    let index_base = unsafe { plan.indices.bytes.as_ptr().add(plan.indices.offset) };
    let good = |r: usize, j: usize| {
        // SAFETY: row r < run of this run and position j < k of its tuple
        // exist in `indices`, inside its span.
        let v = unsafe {
            let tuple = index_base.offset(od.index_off + r as isize * step);
            T::load(tuple.offset(j as isize * plan.tuple_stride))
        };
        resolve::<CLIP>(v, axes[j].size, plan.wrap_negative).is_some()
    };
    let mut start = 0;
    while start < run {
        let end = (start + CHECK_CHUNK).min(run);
        let all_good = (start..end).fold(true, |ok, r| {
            (0..axes.len()).fold(ok, |ok, j| ok & good(r, j))
        });
        if !all_good {
            for r in start..end {
                if let Some(j) = (0..axes.len()).find(|&j| !good(r, j)) {
                    return Some((r, j));
                }
            }
        }
        start = end;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_wraps_and_checks() {
        assert_eq!(resolve::<false>(-1, 3, true), Some(2));
        assert_eq!(resolve::<false>(-3, 3, true), Some(0));
        assert_eq!(resolve::<false>(-4, 3, true), None);
        assert_eq!(resolve::<false>(3, 3, true), None);
        assert_eq!(resolve::<false>(i64::MIN, 3, true), None);
        assert_eq!(resolve::<false>(i64::MAX, 3, true), None);
        assert_eq!(resolve::<false>(i64::MIN, isize::MAX as usize, true), None);
        assert_eq!(
            resolve::<false>(-(isize::MAX as i64), isize::MAX as usize, true),
            Some(0)
        );
        assert_eq!(resolve::<false>(0, 0, true), None);
    }

    #[test]
    fn resolve_clips_after_wrapping() {
        assert_eq!(resolve::<true>(-1, 3, true), Some(2));
        assert_eq!(resolve::<true>(-7, 3, true), Some(0));
        assert_eq!(resolve::<true>(9, 3, true), Some(2));
        assert_eq!(resolve::<true>(0, 0, true), None);
    }

    #[test]
    fn negatives_can_be_out_of_range() {
        assert_eq!(resolve::<false>(-1, 3, false), None);
        assert_eq!(resolve::<false>(2, 3, false), Some(2));
        assert_eq!(resolve::<true>(-1, 3, false), Some(0));
    }

    #[test]
    fn small_copies_of_every_width() {
        let src: Vec<u8> = (1..=64).collect();
        for width in 0..=64 {
            let mut dst = [0u8; 66];
            // SAFETY: width <= 64 bytes inside both buffers.
            unsafe { copy_small(src.as_ptr(), dst.as_mut_ptr().add(1), width) };
            assert_eq!(&dst[1..1 + width], &src[..width]);
            assert!(dst[1 + width..].iter().all(|&b| b == 0) && dst[0] == 0);
        }
    }

    #[test]
    fn small_rows_of_every_width_with_zero_fill() {
        let src: Vec<u8> = (1..=255).collect();
        let offsets = [7isize, ZERO_FILL, 0, 130, 3];
        for width in 1..=SMALL_ROW {
            for prefetch_ahead in [false, true] {
                let mut dst = vec![0xEEu8; offsets.len() * width + 1];
                // SAFETY: every offset + width <= 194 < src.len(); dst holds
                // offsets.len() rows of `width` bytes (and one spare).
                unsafe {
                    copy_small_rows::<true>(
                        src.as_ptr(),
                        &offsets,
                        dst.as_mut_ptr(),
                        width,
                        prefetch_ahead,
                    )
                };
                for (row, &off) in dst.chunks_exact(width).zip(&offsets) {
                    if off == ZERO_FILL {
                        assert!(row.iter().all(|&b| b == 0));
                    } else {
                        assert_eq!(row, &src[off as usize..off as usize + width]);
                    }
                }
                assert_eq!(dst[offsets.len() * width], 0xEE, "width {width}");
            }
        }
    }

    #[test]
    fn mode_names() {
        assert_eq!(Mode::parse("zero"), Some(Mode::Zero));
        assert_eq!(Mode::parse("wrap"), None);
    }
}
