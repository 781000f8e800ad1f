//! Buffers a calling thread keeps from one call to its next: a call's own
//! scratch (its rows' offsets, a staged result, the rows of `out=` it saves)
//! of a few KiB to a few hundred, which a new allocation every call would
//! zero every time (`calloc`, `Vec::resize`): 6% of `ov_gnd8_xml3`'s 5 us
//! `out=` call (docs/performance.md, tuning log: `kept`). Larger buffers
//! are allocated for the call, or come from the `pool`.

use std::cell::Cell;
use std::thread::LocalKey;

/// A thread's kept buffer: `thread_local!` of a `Cell<Vec<T>>`.
pub(crate) type Slot<T> = LocalKey<Cell<Vec<T>>>;

/// Buffers of at most this many bytes are kept: a thread that calls holds
/// at most this much in each slot.
pub(crate) const KEPT_MAX_BYTES: usize = 256 * 1024;

/// A buffer of at least `len` elements: this thread's kept one from `slot`
/// (grown with `T::default()` if shorter, so that only growing writes it),
/// or a new one where `len` elements are more than is kept or the kept one
/// is out (taken by a call that made this one). `None` if no memory could
/// be had. Give it back with [`keep`].
pub(crate) fn take<T: Copy + Default>(slot: &'static Slot<T>, len: usize) -> Option<Vec<T>> {
    let mut buffer = if fits::<T>(len) {
        slot.take()
    } else {
        Vec::new()
    };
    if buffer.len() < len {
        buffer.try_reserve_exact(len - buffer.len()).ok()?;
        buffer.resize(len, T::default());
    }
    Some(buffer)
}

/// Keeps `buffer` for this thread's next [`take`] from `slot`, unless it
/// is larger than is kept.
pub(crate) fn keep<T>(slot: &'static Slot<T>, buffer: Vec<T>) {
    if fits::<T>(buffer.capacity()) {
        slot.set(buffer);
    }
}

/// Whether `len` elements of `T` are few enough to keep.
pub(crate) fn fits<T>(len: usize) -> bool {
    len.saturating_mul(std::mem::size_of::<T>()) <= KEPT_MAX_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    thread_local! {
        static SLOT: Cell<Vec<u32>> = const { Cell::new(Vec::new()) };
    }

    #[test]
    fn a_buffer_is_reused_and_only_what_it_grows_by_is_written() {
        let mut first = take(&SLOT, 100).unwrap();
        assert_eq!(first.len(), 100);
        first.fill(7);
        let at = first.as_ptr();
        keep(&SLOT, first);
        // Shorter: the same buffer, as the last call left it.
        let again = take(&SLOT, 10).unwrap();
        assert_eq!((again.as_ptr(), again[..100].to_vec()), (at, vec![7; 100]));
        // Taken while out: a new one; the one given back last is kept.
        let inner = take(&SLOT, 10).unwrap();
        assert_ne!(inner.as_ptr(), at);
        keep(&SLOT, inner);
        keep(&SLOT, again);
        let grown = take(&SLOT, 200).unwrap();
        assert_eq!(&grown[..100], &[7; 100][..]);
        assert_eq!(&grown[100..], &[0; 100][..]);
        keep(&SLOT, grown);
    }

    #[test]
    fn a_buffer_larger_than_is_kept_is_dropped() {
        let over = KEPT_MAX_BYTES / 4 + 1;
        let big = take(&SLOT, over).unwrap();
        keep(&SLOT, big);
        assert_eq!(SLOT.take().capacity(), 0);
    }
}
