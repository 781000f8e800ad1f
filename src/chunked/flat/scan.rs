//! The scan of the flat loops: the chunks a list of tuples reads.

use std::ops::Range;

use super::{lookups, resolve_tuple, TupleAxis, Tuples};
use crate::index::IndexElem;
use crate::mode::{with_mode, Mode};

/// Marks in `bits` (a bitmap over the grid) the chunks that tuples `rows`
/// read; `Err` when one addresses nothing outside mode "zero".
///
/// # Safety
/// `rows` are tuples of `at`.
pub(in crate::chunked) unsafe fn scan<T: IndexElem>(
    at: &Tuples,
    axes: &[TupleAxis],
    mode: Mode,
    rows: Range<usize>,
    bits: &mut [u64],
) -> Result<(), ()> {
    let exact = axes.iter().all(TupleAxis::exact);
    macro_rules! by_k {
        ($($k:literal)*) => {
            match axes.len() {
                $($k => {
                    let axes: &[TupleAxis; $k] = axes.try_into().map_err(|_| ())?;
                    // SAFETY: forwarded from the caller.
                    unsafe {
                        with_mode!(mode, CLIP, ZERO => if exact {
                            scan_k::<T, $k, CLIP, ZERO, true>(at, axes, rows, bits)
                        } else {
                            scan_k::<T, $k, CLIP, ZERO, false>(at, axes, rows, bits)
                        })
                    }
                })*
                _ => Err(()),
            }
        };
    }
    by_k!(1 2 3 4)
}

/// [`scan`] for tuples of `K`.
///
/// # Safety
/// As for [`scan`].
unsafe fn scan_k<
    T: IndexElem,
    const K: usize,
    const CLIP: bool,
    const ZERO: bool,
    const EXACT: bool,
>(
    at: &Tuples,
    axes: &[TupleAxis; K],
    rows: Range<usize>,
    bits: &mut [u64],
) -> Result<(), ()> {
    let lk = lookups(axes);
    if let [only] = bits {
        // A grid of up to 64 chunks is marked in a register: marking the same
        // word in memory on every tuple chained each tuple to the last
        // through a store.
        let mut word = 0u64;
        for r in rows {
            // SAFETY: `r` is a tuple of `at` (caller).
            if let Some((id, _)) = unsafe { resolve_tuple::<T, K, CLIP, ZERO, EXACT>(at, &lk, r)? }
            {
                word |= 1 << id;
            }
        }
        *only |= word;
    } else {
        for r in rows {
            // SAFETY: `r` is a tuple of `at` (caller).
            if let Some((id, _)) = unsafe { resolve_tuple::<T, K, CLIP, ZERO, EXACT>(at, &lk, r)? }
            {
                bits[id as usize / 64] |= 1 << (id % 64);
            }
        }
    }
    Ok(())
}
