//! Gathering a range of output rows, a block at a time: first every row's
//! source offset is computed, reading and resolving its indices
//! ([`offsets`](crate::offsets)), then the block's slices are copied
//! ([`copy`](crate::copy)).

use crate::copy::{copy_block, fence};
use crate::index::IndexElem;
use crate::offsets::{compute_offsets, BadRow};
use crate::plan::Plan;
use crate::walk::Odometer;

/// Rows per block: the block's offsets (4 KiB) stay in L1 between the two
/// phases.
pub(crate) const BLOCK: usize = 512;

/// Gathers output rows `start..start + n` into `out` (their bytes).
///
/// # Safety
/// `start + n <= plan.n_rows`; `out.len() == n * slice_bytes`; `out` does
/// not overlap `data`. (The plan's views need no promise: every plan's are
/// checked views.)
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
/// `start + offsets.len() <= plan.n_rows`.
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
        fence();
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
        fence();
    }
    Ok(())
}
