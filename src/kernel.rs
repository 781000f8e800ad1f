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
    if n <= MID_BLOCK {
        // Service-sized batches: clearing 4 KiB of offsets for a few dozen
        // rows cost more instructions than computing them.
        // SAFETY: forwarded from the caller.
        return unsafe { gather_rows_in::<T, CLIP, ZERO, MID_BLOCK>(plan, start, out, n) };
    }
    // SAFETY: forwarded from the caller.
    unsafe { gather_rows_in::<T, CLIP, ZERO, BLOCK>(plan, start, out, n) }
}

/// Rows of a call small enough for a small offsets buffer.
const SMALL_BLOCK: usize = 16;

/// Rows of a call that still fits one block of 1 KiB of offsets.
const MID_BLOCK: usize = 128;

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

#[cfg(test)]
mod tests {
    use crate::{plan_gather, ArrayView, IndexType, Mode, Validation};

    /// Calls on either side of each offsets-buffer size (16, 128 and 512
    /// rows), in every mode, against `data[ids]` computed naively: a row
    /// lost or repeated at a block's edge would show.
    #[test]
    fn every_row_count_around_the_block_sizes() {
        let (rows, width) = (97usize, 3usize);
        let data: Vec<u8> = (0..rows * width).map(|v| (v % 251) as u8).collect();
        let (shape, strides) = ([rows, width], [width as isize, 1]);
        for n in [1, 15, 16, 17, 127, 128, 129, 511, 512, 513, 1100] {
            // Some indices out of range (every 7th), some negative.
            let ids: Vec<i64> = (0..n as i64)
                .map(|i| {
                    if i % 7 == 3 {
                        rows as i64 + i
                    } else {
                        (i * 37) % 97 - 40
                    }
                })
                .collect();
            let bytes: Vec<u8> = ids.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let (ishape, istrides) = ([n], [8isize]);
            let view = |bytes, shape, strides, itemsize| ArrayView {
                bytes,
                offset: 0,
                shape,
                strides,
                itemsize,
            };
            let d = view(&data[..], &shape[..], &strides[..], 1);
            let i = view(&bytes[..], &ishape[..], &istrides[..], 8);
            let plan = plan_gather(d, i, IndexType::I64, 0, 0).unwrap();
            for mode in [Mode::Raise, Mode::Zero, Mode::Clip] {
                let mut out = vec![0xEEu8; n * width];
                let got = plan.execute(mode, &mut out, Validation::WhileCopying, 1);
                if mode == Mode::Raise && n > 3 {
                    assert!(got.is_err(), "{n} rows");
                    continue;
                }
                got.unwrap();
                for (row, &v) in out.chunks(width).zip(&ids) {
                    let v = if v < 0 { v + rows as i64 } else { v };
                    let want = match mode {
                        Mode::Zero if v >= rows as i64 => vec![0; width],
                        _ => {
                            let r = v.min(rows as i64 - 1) as usize;
                            data[r * width..(r + 1) * width].to_vec()
                        }
                    };
                    assert_eq!(row, &want[..], "{n} rows, {mode:?}");
                }
            }
        }
    }
}
