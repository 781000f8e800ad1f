//! The address order of a prepared gather of short slices: its positions
//! sorted (a radix sort of position and row pairs, split over threads when
//! large), with the output row of each, so that a call reads `data` almost
//! in order and scatters the slices to their rows (see `call`).

use super::positions::{count, with_capacity, Word};
use crate::error::Result;
use crate::machine::tuning;
use crate::split::split_rows;
use crate::threads::Disjoint;

/// Whether `order` holds each of `0..n` once.
pub(super) fn is_permutation(order: &[u32], n: usize) -> bool {
    let mut seen = vec![false; n];
    order.len() == n
        && order.iter().all(|&r| {
            let r = r as usize;
            r < n && !std::mem::replace(&mut seen[r], true)
        })
}

/// Slices of at most this many elements are gathered in address order
/// (points, short rows: bound by the latency of random reads; a longer
/// slice's read already streams, and scattering it would cost more).
const SORT_MAX_SLICE_ELEMENTS: usize = 8;

/// ... by a gather of at least this many rows (below, the sort's pass and
/// the scatter's buffer cost more than they save) ...
const SORT_MIN_ROWS: usize = 1 << 15;

/// ... from an array far beyond the last-level cache: at least 32 times it
/// (16 times `machine::Tuning::far_min_data_bytes`) were its elements 4
/// bytes, the usual table (the shape is all a prepared gather knows). Below
/// that it was measured not to pay on either kind: the calls' scatter of
/// the address order costs more than the random reads it saves. 2M points,
/// 10 calls, AMD kind (32 MiB last level), the address order against the
/// rows' order: of 64 MiB, `prepare + 10` 0.78x against 1.33x the one-shot
/// speed, the 10 prepared calls 1.12x against 1.43x; of 128 MiB 0.69x and
/// 0.82x against 1.32x and 1.39x; of 512 MiB 0.73x and 0.88x against 1.28x
/// and 1.36x. Intel VM (260 MiB): of 64 MiB 0.75x and 1.00x against 1.1-1.3x
/// and 1.2-1.4x (docs/performance.md, "Prepared gathers"). Whether the
/// order pays beyond 32 times the cache was not measured.
fn beyond_the_caches(elements: usize) -> bool {
    #[cfg(test)]
    if SORT_ANY_SIZE.load(std::sync::atomic::Ordering::Relaxed) {
        return true;
    }
    elements.saturating_mul(4) >= tuning().far_min_data_bytes.saturating_mul(16)
}

/// Set by the tests that exercise the address order on arrays small enough
/// for a unit test.
#[cfg(test)]
pub(super) static SORT_ANY_SIZE: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Positions that differ only in these low bits are left in any order:
/// 16 slices of at most 8 elements, a few cache lines apart for the usual
/// dtypes.
pub(super) const SORT_IGNORED_BITS: u32 = 4;

/// At most this many bits of the position are sorted by each pass of the
/// radix sort: at most 2048 buckets, whose write positions stay in the L2
/// cache; two passes cover the positions of an array of up to 2^26
/// elements.
const SORT_DIGIT_BITS: u32 = 11;

/// Sorts of at least this many positions are split over threads: each
/// counts and moves its own range of items.
pub(super) const SORT_PARALLEL_MIN_ROWS: usize = 1 << 18;

/// One stable counting pass over items `0..n`, cut in `parts` ranges run as
/// tasks ([`split_rows`], a row of slots each) on up to `threads` threads:
/// `digit(i)` is item i's bucket (below `buckets`), and `emit(i, slot)`
/// writes item i at its slot. The slots of all items are `0..n`, each once:
/// the buckets tile `0..n` in order, and within a bucket each part gets the
/// range after the previous part's.
fn counting_pass(
    n: usize,
    parts: usize,
    threads: usize,
    buckets: usize,
    digit: impl Fn(usize) -> usize + Sync,
    emit: impl Fn(usize, usize) + Sync,
) {
    let per = n.div_ceil(parts);
    let items = |t: usize| (t * per).min(n)..((t + 1) * per).min(n);
    // Part t's row of `buckets` slots: its count of each bucket, then its
    // next slot in each. Each item is read and moved once a pass: about 16
    // bytes of copying. Neither pass fails.
    let mut slots = vec![0usize; parts * buckets];
    let cost = n.saturating_mul(16);
    let count = |first: usize, counts: &mut [usize]| {
        for (t, count) in counts.chunks_mut(buckets).enumerate() {
            for i in items(first + t) {
                count[digit(i)] += 1;
            }
        }
        Ok(())
    };
    let _ = split_rows(threads, parts, cost, buckets, &mut slots, &count);
    // Part t's first slot in each bucket.
    let mut at = 0;
    for b in 0..buckets {
        for t in 0..parts {
            at += std::mem::replace(&mut slots[t * buckets + b], at);
        }
    }
    let place = |first: usize, starts: &mut [usize]| {
        for (t, next) in starts.chunks_mut(buckets).enumerate() {
            for i in items(first + t) {
                let slot = &mut next[digit(i)];
                emit(i, *slot);
                *slot += 1;
            }
        }
        Ok(())
    };
    let _ = split_rows(threads, parts, cost, buckets, &mut slots, &place);
}

/// `positions` in address order, with the output row of each in `order`,
/// when the gather is one that pays for it (see [`SORT_MAX_SLICE_ELEMENTS`]);
/// else `positions` as they are. A least-significant-digit radix sort of
/// (position, row) pairs packed in a word: a stable counting pass per digit
/// (the first reads the positions, the last writes positions and rows
/// apart), the zero-filled rows last.
pub(super) fn by_address(
    positions: Vec<u32>,
    shape: &[usize],
    lead: usize,
    threads: usize,
    order: &mut Option<Vec<u32>>,
) -> Result<Vec<u32>> {
    let n = positions.len();
    let elements = count(&shape[..lead]);
    let slice = count(&shape[lead..]);
    if slice > SORT_MAX_SLICE_ELEMENTS
        || n < SORT_MIN_ROWS
        || n > u32::MAX as usize
        || !beyond_the_caches(elements.saturating_mul(slice))
    {
        return Ok(positions);
    }
    // Sort keys 0..=elements: a position, or `elements` for a zero-filled
    // row (positions are 32-bit words here: elements <= u32::MAX).
    let key = |p: u32| if p.is_mark() { elements } else { p as usize };
    let bits = (usize::BITS - elements.leading_zeros()).saturating_sub(SORT_IGNORED_BITS);
    // At least two passes, so that the last one may write the sorted
    // positions over the positions, which only the first one reads.
    let passes = bits.div_ceil(SORT_DIGIT_BITS).max(2) as usize;
    // Passes of equal width.
    let width = bits.div_ceil(passes as u32);
    let buckets = 1usize << width;
    let digit =
        |p: u32, pass: usize| (key(p) >> (SORT_IGNORED_BITS + pass as u32 * width)) & (buckets - 1);
    let parts = if n >= SORT_PARALLEL_MIN_ROWS {
        threads.clamp(1, 16)
    } else {
        1
    };
    let pack = |p: u32, row: u32| (p as u64) << 32 | row as u64;
    let unpack = |pair: u64| ((pair >> 32) as u32, pair as u32);
    let mut pairs: Vec<u64> = with_capacity(n)?;
    let dst = Disjoint::new(pairs.as_mut_ptr());
    counting_pass(
        n,
        parts,
        threads,
        buckets,
        |i| digit(positions[i], 0),
        // SAFETY: slot < n, inside the capacity of `pairs`, written by this
        // task alone (`counting_pass` gives each item its own slot).
        // No truncation: i < n <= u32::MAX.
        |i, slot| unsafe { dst.put(slot, pack(positions[i], i as u32)) },
    );
    // SAFETY: the pass wrote every one of the n slots (`counting_pass`).
    unsafe { pairs.set_len(n) };
    let mut to: Vec<u64> = with_capacity(if passes > 2 { n } else { 0 })?;
    for pass in 1..passes - 1 {
        let dst = Disjoint::new(to.as_mut_ptr());
        let src = &pairs;
        counting_pass(
            n,
            parts,
            threads,
            buckets,
            |i| digit(unpack(src[i]).0, pass),
            // SAFETY: as for the first pass; `to` has room for n.
            |i, slot| unsafe { dst.put(slot, src[i]) },
        );
        // SAFETY: the pass wrote every one of the n slots.
        unsafe { to.set_len(n) };
        std::mem::swap(&mut pairs, &mut to);
        to.clear();
    }
    // The sorted positions reuse the positions' memory, which only the
    // first pass read.
    let mut sorted = positions;
    let mut rows: Vec<u32> = with_capacity(n)?;
    let (to_sorted, to_rows) = (
        Disjoint::new(sorted.as_mut_ptr()),
        Disjoint::new(rows.as_mut_ptr()),
    );
    let src = &pairs;
    counting_pass(
        n,
        parts,
        threads,
        buckets,
        |i| digit(unpack(src[i]).0, passes - 1),
        |i, slot| {
            let (p, row) = unpack(src[i]);
            // SAFETY: slot < n, inside `sorted` (n items) and the capacity
            // of `rows`, written by this task alone (`counting_pass`).
            unsafe {
                to_sorted.put(slot, p);
                to_rows.put(slot, row);
            }
        },
    );
    // SAFETY: the pass wrote every one of the n slots.
    unsafe { rows.set_len(n) };
    *order = Some(rows);
    Ok(sorted)
}
