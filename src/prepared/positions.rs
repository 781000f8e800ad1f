//! The resolved positions of a prepared gather, one word a row (32 or 64
//! bits), and the allocation that holds them.

use crate::error::{GatherError, Result};

/// The resolved position of every output row: 32 bits when every position
/// of the shape fits with room for the zero-fill marker (the word's largest
/// value), else 64.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Positions {
    /// Positions of a shape with fewer than `u32::MAX` leading elements.
    U32(Vec<u32>),
    /// Positions of any other shape.
    U64(Vec<u64>),
}

impl Positions {
    pub(super) fn len(&self) -> usize {
        match self {
            Positions::U32(v) => v.len(),
            Positions::U64(v) => v.len(),
        }
    }

    /// The bytes they take.
    pub(super) fn bytes(&self) -> usize {
        match self {
            Positions::U32(v) => v.len() * 4,
            Positions::U64(v) => v.len() * 8,
        }
    }
}

/// A position word: `MARK` (its largest value) marks a zero-filled row.
pub(super) trait Word: Copy + Send + Sync + 'static {
    const MARK: Self;
    fn from_offset(off: usize) -> Self;
    fn get(self) -> usize;
    fn is_mark(self) -> bool;
}

macro_rules! word {
    ($t:ty) => {
        impl Word for $t {
            const MARK: Self = <$t>::MAX;
            #[inline(always)]
            fn from_offset(off: usize) -> Self {
                // Below MARK: positions are below the count of leading
                // elements, which is at most MARK for this word (`wide`).
                off as $t
            }
            #[inline(always)]
            fn get(self) -> usize {
                self as usize
            }
            #[inline(always)]
            fn is_mark(self) -> bool {
                self == Self::MARK
            }
        }
    };
}
word!(u32);
word!(u64);

/// The number of elements of `shape` (no overflow: the planners bound
/// every non-empty axis product by `isize::MAX`).
pub(super) fn count(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// An empty vector with room for `n` items, or `OutOfMemory`. A large one
/// asks for huge pages, as NumPy does for its arrays: its pages are touched
/// once, right away, and a fault per 4 KiB page costs more than the work.
pub(super) fn with_capacity<T>(n: usize) -> Result<Vec<T>> {
    let mut v: Vec<T> = Vec::new();
    v.try_reserve_exact(n).map_err(|_| {
        GatherError::OutOfMemory(format!("cannot allocate {n} words of a prepared gather"))
    })?;
    crate::huge_pages::advise(v.as_mut_ptr().cast(), n * std::mem::size_of::<T>());
    Ok(v)
}
