//! The movers: a block of rows taken from `data` to the output, copied as
//! they are (`copy`) or converted to a wider type on the way (`convert`,
//! `dtype=`). The choice between the two is made here, once, for every
//! path that moves rows by offsets (the one-shot kernel, prepared gathers).

use std::ptr;

use crate::convert::Cast;
use crate::copy::copy_block;
use crate::copy::copy_contiguous;
use crate::hints::Ahead;
use crate::layout::{for_each_run, SliceLayout};
use crate::offsets::{prefetch_row, ZERO_FILL};
use crate::plan::Plan;

/// Moves the slices of the first `count` rows of `offsets` into
/// consecutive output rows at `dst`: converted if the plan has a cast,
/// else copied; the offsets after them are only prefetched from.
///
/// # Safety
/// `count <= offsets.len()`; offsets from
/// [`compute_offsets`](crate::offsets::compute_offsets) on the same plan
/// with the same `ZERO`; `dst` exactly `count * plan.slice_bytes` writable
/// bytes, not overlapping `data`. `ahead` is `plan.ahead()`, computed once
/// a call by the caller (a round of 64 rows computing it again took 2-3% of
/// a call of 2M points).
#[inline]
pub(crate) unsafe fn move_block<const ZERO: bool>(
    plan: &Plan<'_>,
    ahead: Ahead,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
) {
    match plan.cast {
        // SAFETY: forwarded from the caller; `slice_bytes` counts the
        // output type's bytes of a row.
        Some(cast) => unsafe { convert_block::<ZERO>(plan, ahead, cast, offsets, count, dst) },
        // SAFETY: forwarded from the caller.
        None => unsafe { copy_block::<ZERO>(plan, ahead, offsets, count, dst) },
    }
}

/// Converts the slices of one block of rows, at `offsets` from
/// [`compute_offsets`](crate::offsets::compute_offsets), into consecutive
/// output rows of `plan.slice_bytes` (in the cast's output type), the next
/// rows prefetched when `data` is beyond the caches; a zero-filled row
/// (`ZERO`) is all zero bytes, which is zero in every type.
///
/// # Safety
/// As for [`copy_block`](crate::copy::copy_block): offsets from the same
/// plan, `count <= offsets.len()` of them converted (the rest only
/// prefetched from), `dst` exactly `count * plan.slice_bytes` bytes.
unsafe fn convert_block<const ZERO: bool>(
    plan: &Plan<'_>,
    ahead: Ahead,
    cast: Cast,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
) {
    // SAFETY: as in `copy_block`: a checked view's data pointer is within
    // its bytes or one past them.
    let src = unsafe { plan.data.bytes.as_ptr().add(plan.data.offset) };
    let out_row = plan.slice_bytes;
    for (i, &off) in offsets[..count].iter().enumerate() {
        // SAFETY: row i's bytes lie in `dst` (caller).
        let d = unsafe { dst.add(i * out_row) };
        if ZERO && off == ZERO_FILL {
            // SAFETY: as above.
            unsafe { ptr::write_bytes(d, 0, out_row) };
            continue;
        }
        if let (SliceLayout::Contiguous { bytes }, true) = (&plan.slice, plan.prefetch) {
            // As far ahead, and to the same cache, as the plain copy (the
            // offsets past `count` are there to prefetch from).
            if let Some(&next) = offsets.get(i + ahead.rows) {
                prefetch_row::<ZERO>(src, next, *bytes, ahead.far, ahead.tail);
            }
        }
        // SAFETY: the slice at `off` lies in `data` (offsets from the plan),
        // and row i's `out_row` bytes, its elements in the output type, lie
        // in `dst` (caller).
        unsafe {
            let row = std::slice::from_raw_parts_mut(d, out_row);
            move_slice(src.offset(off), &plan.slice, Some(cast), row);
        }
    }
}

/// Moves one slice laid out as `slice` from `src` into `dst` (C order):
/// converted by `cast` if given (`dst` then holds the slice's elements in
/// the cast's output type), else copied.
///
/// # Safety
/// Every byte the layout addresses from `src` must be readable, and `dst`
/// must hold exactly the slice's bytes (converted) and not overlap them.
#[inline]
pub(crate) unsafe fn move_slice(
    src: *const u8,
    slice: &SliceLayout,
    cast: Option<Cast>,
    dst: &mut [u8],
) {
    match (slice, cast) {
        // SAFETY: forwarded from the caller; `dst` is the slice's length.
        (SliceLayout::Contiguous { .. }, None) => unsafe { copy_contiguous(src, dst) },
        (SliceLayout::Contiguous { .. }, Some(cast)) => {
            // SAFETY: forwarded: `dst` holds the slice's elements as
            // `cast.to()`, and `src` as many of `cast.from()`.
            unsafe { cast.run(src, dst.as_mut_ptr(), dst.len() / cast.to().size()) }
        }
        (SliceLayout::Strided { run, outer }, cast) => {
            let (per_run, width) = match cast {
                Some(c) => (run / c.from().size(), run / c.from().size() * c.to().size()),
                None => (0, *run),
            };
            let mut d = dst.as_mut_ptr();
            for_each_run(outer, |at| {
                // SAFETY: each run at `at` is part of the slice (caller);
                // `d` walks `dst` one converted run at a time.
                unsafe {
                    match cast {
                        Some(c) => c.run(src.offset(at), d, per_run),
                        None => std::ptr::copy_nonoverlapping(src.offset(at), d, width),
                    }
                    d = d.add(width);
                }
            });
        }
    }
}
