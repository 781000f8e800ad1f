//! Gathering a range of output rows, a block at a time: first every row's
//! source offset is computed, reading and resolving its indices
//! ([`offsets`](crate::offsets)), then the block's slices are copied
//! ([`copy`](crate::copy)).

use crate::hints::{fence, Ahead};
use crate::index::IndexElem;
use crate::layout::SliceLayout;
use crate::mover::move_block;
use crate::offsets::{compute_offsets, prefetch_index_rows, prefetch_row, BadRow};
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

/// Rows whose offsets a round computes, in blocks of [`BLOCK`] rows whose
/// copy prefetches far ahead: a few hundred nanoseconds of work, about a
/// miss's latency, so the prefetched lines keep arriving meanwhile. Against
/// 128, 256 and whole blocks the time was even within the noise, but only
/// 64 (with the index prefetch) cut the offsets loop's share of the
/// profile of 2M points, from about 35% to 23%.
const CHUNK: usize = 64;

/// Copies the slices at `offsets`, made by `Plan::row_offsets` on the same plan,
/// into `out`: the second half of [`gather_rows`].
///
/// # Safety
/// `offsets` from `Plan::row_offsets` on `plan` with the same `ZERO`;
/// `out.len() == offsets.len() * plan.slice_bytes`; `out` does not overlap
/// `data`.
pub(crate) unsafe fn copy_rows_at<const ZERO: bool>(
    plan: &Plan<'_>,
    offsets: &[isize],
    out: &mut [u8],
) {
    let ahead = plan.ahead();
    prefetch_first::<ZERO>(plan, ahead, offsets);
    // SAFETY: the rows of `offsets` occupy `out` (caller).
    unsafe { move_block::<ZERO>(plan, ahead, offsets, offsets.len(), out.as_mut_ptr()) };
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
    let mut od = Odometer::new(&plan.rows, start);
    let fill = |offsets: &mut [isize], chunk: usize, ahead: usize| {
        // SAFETY: the rounds ask for the offsets of rows start.. start+n in
        // order, which exist (caller).
        unsafe { compute_offsets::<T, CLIP, ZERO>(plan, &mut od, offsets)? };
        if ahead > 0 {
            // The chunk after next: the next one's indices are on their way.
            prefetch_index_rows(plan, &od, chunk, chunk);
        }
        Ok(())
    };
    // SAFETY: forwarded from the caller; `fill` gives `plan`'s offsets.
    unsafe { copy_in_rounds::<ZERO, B>(plan, out, n, fill) }
}

/// Copies `n` rows into `out`, their offsets given in order by `fill`, a
/// chunk at a time (`fill(offsets, chunk, ahead)` fills `offsets`: the
/// next rows'). The copy prefetches `ahead` rows ahead, so the offsets of
/// `ahead` more rows than it copies must be known: each round computes a
/// chunk of offsets and copies the rows that have `ahead` computed rows
/// after them (all, at the end). Small chunks keep the prefetches going
/// while the offsets are computed, instead of letting them drain at each
/// block's end. The one loop of the one-shot and prepared copies.
///
/// # Safety
/// `fill` gives offsets as `Plan::row_offsets` on `plan` with the same
/// `ZERO` does; `out.len() == n * plan.slice_bytes`; `out` does not
/// overlap `data`.
#[inline(always)]
pub(crate) unsafe fn copy_in_rounds<const ZERO: bool, const B: usize>(
    plan: &Plan<'_>,
    out: &mut [u8],
    n: usize,
    mut fill: impl FnMut(&mut [isize], usize, usize) -> Result<(), BadRow>,
) -> Result<(), BadRow> {
    let sb = plan.slice_bytes;
    let hints = plan.ahead();
    let ahead = plan.lookahead(hints).min(B / 2);
    let chunk = if ahead == 0 || n <= B { B } else { CHUNK };
    let mut offsets = [0isize; B];
    // Rows copied; rows whose offsets are computed; where row `done`'s
    // offset is: rows done..computed wait in offsets[first..].
    let (mut done, mut computed, mut first) = (0, 0, 0);
    // Whether the first rows' slices are requested (`prefetch_first`).
    let mut primed = false;
    while done < n {
        let mut pending = computed - done;
        if first + pending + chunk > B {
            offsets.copy_within(first..first + pending, 0);
            first = 0;
        }
        let at = first + pending;
        let len = chunk.min(n - computed);
        fill(&mut offsets[at..at + len], chunk, ahead)?;
        computed += len;
        pending += len;
        let count = if computed == n {
            pending
        } else {
            pending.saturating_sub(ahead)
        };
        let block = &offsets[first..first + pending];
        if !primed {
            prefetch_first::<ZERO>(plan, hints, block);
            primed = true;
        }
        // SAFETY: these rows occupy out[done*sb .. (done+count)*sb], and
        // their offsets are `plan`'s (caller).
        unsafe { move_block::<ZERO>(plan, hints, block, count, out.as_mut_ptr().add(done * sb)) };
        first += count;
        done += count;
    }
    if plan.stream {
        // Our non-temporal stores must be visible before this task reports
        // itself done to the thread that returns the output.
        fence();
    }
    Ok(())
}

/// Requests the slices of the first rows a copy starts with. The copy
/// loops ask for row `i + ahead` while they copy row `i`, so without this
/// the first `ahead` rows of a call would be missed one after another, as
/// many in flight as the out-of-order core finds by itself: a call of a
/// few hundred random rows spends most of its time there. (Tuning log: `prefetch_first`.)
///
/// `offsets` are the call's first rows' (from the same plan, with the same
/// `ZERO`); only the slices the copy itself would prefetch are requested.
fn prefetch_first<const ZERO: bool>(plan: &Plan<'_>, ahead: Ahead, offsets: &[isize]) {
    let SliceLayout::Contiguous { bytes } = plan.slice else {
        return;
    };
    if !plan.prefetch {
        return;
    }
    // Only an address for the hint: wrapping arithmetic, nothing is read.
    let src = plan.data.first();
    for &off in offsets.iter().take(ahead.rows) {
        prefetch_row::<ZERO>(src, off, bytes, ahead.far, ahead.tail);
    }
}

#[cfg(test)]
mod tests {
    use crate::machine::tuning;
    use crate::{plan_gather, ArrayView, IndexType, Mode, Validation};

    /// Calls on either side of each offsets-buffer size (16, 128 and 512
    /// rows), in every mode, against `data[ids]` computed naively: a row
    /// lost or repeated at a block's edge would show.
    #[test]
    fn every_row_count_around_the_block_sizes() {
        check_row_counts(97, 3, &[1, 15, 16, 17, 127, 128, 129, 511, 512, 513, 1100]);
    }

    /// The same with `data` beyond the caches' size, where the copy
    /// prefetches and, in calls of 16K rows and more, the kernel computes
    /// offsets in chunks ahead of it (a row lost where a chunk ends, or
    /// where the buffer wraps, would show),
    /// for each kind of copy: a fixed width, a short run-time width, a long
    /// one.
    #[test]
    fn every_row_count_with_prefetch_and_lookahead() {
        for width in [4, 60, 72] {
            let rows = (tuning().prefetch_min_data_bytes + (1 << 20)) / width;
            check_row_counts(rows, width, &[1, 17, 513, 3001, 16384, 40001]);
        }
    }

    /// Calls of a few hundred to a few thousand rows from a `data` past the
    /// machine's far threshold (64 MiB on the AMD kind), which prefetch far
    /// ahead too (`hints::Ahead`): each
    /// row's first bytes hold its number, the rest is zeros.
    #[test]
    fn service_sized_calls_from_a_huge_data() {
        let width = 128;
        let rows = (tuning().far_min_data_bytes + (1 << 20)) / width;
        let mut data = vec![0u8; rows * width];
        for (r, row) in data.chunks_exact_mut(width).enumerate() {
            row[..8].copy_from_slice(&(r as u64).to_ne_bytes());
        }
        check_rows_of(&data, rows, width, &[255, 256, 257, 700, 3001]);
    }

    fn check_row_counts(rows: usize, width: usize, counts: &[usize]) {
        let data: Vec<u8> = (0..rows * width).map(|v| (v % 251) as u8).collect();
        check_rows_of(&data, rows, width, counts);
    }

    /// Gathers rows of `data` (`rows` of `width` bytes) by ids that are
    /// multiples of `rows / 97` (and some out of range), checked naively.
    fn check_rows_of(data: &[u8], rows: usize, width: usize, counts: &[usize]) {
        let (shape, strides) = ([rows, width], [width as isize, 1]);
        for &n in counts {
            // Some indices out of range (every 7th), some negative.
            let ids: Vec<i64> = (0..n as i64)
                .map(|i| {
                    if i % 7 == 3 {
                        rows as i64 + i
                    } else {
                        (i * 7919) % 97 * (rows as i64 / 97) - 40
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
            let d = view(data, &shape[..], &strides[..], 1);
            let i = view(&bytes[..], &ishape[..], &istrides[..], 8);
            let plan = plan_gather(d, i, IndexType::I64, 0, 0).unwrap();
            assert_eq!(plan.prefetch, data.len() > tuning().prefetch_min_data_bytes);
            let validations = [Validation::WhileCopying, Validation::BeforeWriting];
            for (mode, validation) in [Mode::Raise, Mode::Zero, Mode::Clip]
                .into_iter()
                .flat_map(|m| validations.map(|v| (m, v)))
            {
                let mut out = vec![0xEEu8; n * width];
                let got = plan.execute(mode, &mut out, validation, 1);
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
                    assert_eq!(row, &want[..], "{n} rows of {width} bytes, {mode:?}");
                }
            }
        }
    }
}
