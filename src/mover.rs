//! The movers: a block of rows taken from `data` to the output, copied as
//! they are (`copy`) or converted to a wider type on the way (`convert`,
//! `dtype=`). The choice between the two is made here, once, for every
//! path that moves rows by offsets (the one-shot kernel, prepared gathers).

use std::ptr;

use crate::convert::Cast;
use crate::copy::copy_block;
use crate::layout::SliceLayout;
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
/// bytes, not overlapping `data`.
#[inline]
pub(crate) unsafe fn move_block<const ZERO: bool>(
    plan: &Plan<'_>,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
) {
    match plan.cast {
        // SAFETY: forwarded from the caller; `slice_bytes` counts the
        // output type's bytes of a row.
        Some(cast) => unsafe { convert_block::<ZERO>(plan, cast, offsets, count, dst) },
        // SAFETY: forwarded from the caller.
        None => unsafe { copy_block::<ZERO>(plan, offsets, count, dst) },
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
    cast: Cast,
    offsets: &[isize],
    count: usize,
    dst: *mut u8,
) {
    // SAFETY: as in `copy_block`: a checked view's data pointer is within
    // its bytes or one past them.
    let src = unsafe { plan.data.bytes.as_ptr().add(plan.data.offset) };
    let out_row = plan.slice_bytes;
    let (fs, ts) = (cast.from().size(), cast.to().size());
    let ahead = plan.ahead();
    for (i, &off) in offsets[..count].iter().enumerate() {
        // SAFETY: row i's bytes lie in `dst` (caller).
        let d = unsafe { dst.add(i * out_row) };
        if ZERO && off == ZERO_FILL {
            // SAFETY: as above.
            unsafe { ptr::write_bytes(d, 0, out_row) };
            continue;
        }
        match &plan.slice {
            SliceLayout::Contiguous { bytes } => {
                if plan.prefetch {
                    // As far ahead, and to the same cache, as the plain copy
                    // (the offsets past `count` are there to prefetch from).
                    if let Some(&next) = offsets.get(i + ahead.rows) {
                        prefetch_row::<ZERO>(src, next, *bytes, ahead.far);
                    }
                }
                // SAFETY: the slice at `off` is `bytes` readable bytes of
                // `data` (offsets from the plan), `bytes / fs` elements,
                // and the output row holds as many of the output type.
                unsafe { cast.run(src.offset(off), d, bytes / fs) };
            }
            SliceLayout::Strided { run, outer } => {
                let per_run = run / fs;
                let runs: usize = outer.iter().map(|o| o.0).product();
                let mut coords: smallvec::SmallVec<[usize; 8]> =
                    smallvec::smallvec![0; outer.len()];
                for r in 0..runs {
                    let at: isize = coords
                        .iter()
                        .zip(outer.iter())
                        .map(|(&c, &(_, stride))| c as isize * stride)
                        .sum();
                    // SAFETY: every run of a slice at `off` lies in `data`
                    // (offsets from the plan); run r of the output row is
                    // `per_run` output elements at `r * per_run * ts`.
                    unsafe { cast.run(src.offset(off + at), d.add(r * per_run * ts), per_run) };
                    for (c, &(size, _)) in coords.iter_mut().zip(outer.iter()).rev() {
                        *c += 1;
                        if *c < size {
                            break;
                        }
                        *c = 0;
                    }
                }
            }
        }
    }
}
