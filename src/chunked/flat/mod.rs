//! The common shape of a chunked gather, with no per-row generality: a
//! flat list of index tuples (no batch axes, no outer axes of gather) over
//! the leading axes of `data`, at most [`FLAT_MAX_AXES`] of them, each cut
//! in chunks not much shorter than the axis. The tuple length is then a
//! constant of the loops (unrolled), a position's chunk is one load from a
//! small table of buckets (and a compare, for chunks that do not start at
//! multiples of a common power of two), and a chunk's address is one base
//! and its strides: each row costs a few loads and multiplies, in the scan
//! that finds the touched chunks as in the gather, where the general walk
//! (`Walk::copy`) pays for its generality on every row.

use super::grid::{fill_buckets, Bounds, TABLE_MAX};
use crate::index::IndexElem;
use crate::offsets::resolve;

mod gather;
mod scan;

pub(super) use gather::Flat;
pub(super) use scan::scan;

/// At most this many index axes take the flat loops.
pub(super) const FLAT_MAX_AXES: usize = 4;

/// Where the tuples are: tuple `r` starts `r * stride` bytes after `base`,
/// its entries `tuple_stride` apart.
#[derive(Clone, Copy)]
pub(super) struct Tuples {
    pub(super) base: *const u8,
    pub(super) stride: isize,
    pub(super) tuple_stride: isize,
    /// Whether negative indices count from the end.
    pub(super) wrap: bool,
}

/// One axis a tuple addresses.
pub(super) struct TupleAxis {
    /// Its length, which the indices are resolved against.
    size: usize,
    /// Positions `b << shift ..` share bucket `b`.
    shift: u32,
    /// When every chunk starts at a multiple of `1 << shift`, so a bucket
    /// lies in one chunk: per bucket, what its chunk adds to the chunk's
    /// number in the grid (one load a position). Else empty.
    ids: Vec<u32>,
    /// Else, with `1 << shift` at most the shortest chunk of the axis (zero-
    /// size ones aside), so that a bucket meets at most two chunks: per
    /// bucket, those two.
    buckets: Vec<Bucket>,
}

/// The chunks a bucket of positions meets, as what each adds to a chunk's
/// number in the grid: `lo` below position `split`, `lo + step` from it on.
#[derive(Clone, Copy)]
struct Bucket {
    split: usize,
    lo: u32,
    step: u32,
}

impl TupleAxis {
    /// Whether a position's chunk is one load (`ids`, not `buckets`).
    fn exact(&self) -> bool {
        self.buckets.is_empty()
    }

    /// The axis as a loop keeps it at hand (in registers, not behind the
    /// vectors).
    fn lookup(&self) -> Lookup {
        Lookup {
            size: self.size,
            shift: self.shift,
            ids: if self.exact() {
                self.ids.as_ptr()
            } else {
                std::ptr::null()
            },
            buckets: self.buckets.as_ptr(),
        }
    }
}

/// A [`TupleAxis`] borrowed by a loop: its tables' addresses.
#[derive(Clone, Copy)]
struct Lookup {
    size: usize,
    shift: u32,
    /// The axis' `ids`, or null when it has `buckets`.
    ids: *const u32,
    buckets: *const Bucket,
}

impl Lookup {
    /// What the chunk of position `p` adds to the chunk's number; `EXACT`
    /// if the axis has `ids` (every axis of a loop that has no buckets
    /// compiles without them: their test cost the scan).
    ///
    /// # Safety
    /// `p < self.size`, the axis it was made from is alive, and has `ids`
    /// if `EXACT`.
    #[inline(always)]
    unsafe fn id<const EXACT: bool>(&self, p: usize) -> u32 {
        let b = p >> self.shift;
        // SAFETY: `p < size`, so `b` is one of the `size.div_ceil(1 << shift)`
        // buckets made (`tuple_axes`), in whichever table is in use.
        unsafe {
            if EXACT || !self.ids.is_null() {
                *self.ids.add(b)
            } else {
                let b = &*self.buckets.add(b);
                // `lo`, plus `step` from `split` on: a mask, no branch.
                b.lo + (b.step & 0u32.wrapping_sub(u32::from(p >= b.split)))
            }
        }
    }
}

/// The axes of `axes` at hand.
fn lookups<const K: usize>(axes: &[TupleAxis; K]) -> [Lookup; K] {
    std::array::from_fn(|j| axes[j].lookup())
}

/// The tuple axes as the flat loops read them: `axes` are the data axes in
/// tuple order with the grid stride of each, in chunks. `None` when an axis
/// needs more than [`TABLE_MAX`] buckets (chunks much shorter than the
/// axis), there are more than [`FLAT_MAX_AXES`], or a chunk's number does
/// not fit 32 bits.
pub(super) fn tuple_axes(
    starts: &Bounds,
    axes: impl ExactSizeIterator<Item = (usize, u64)>,
    total: u64,
) -> Option<Vec<TupleAxis>> {
    if axes.len() == 0 || axes.len() > FLAT_MAX_AXES || total > u64::from(u32::MAX) {
        return None;
    }
    axes.map(|(a, grid_stride)| {
        let st = &starts[a];
        let size = st[st.len() - 1];
        // Fits: a chunk number times its stride is below `total`.
        let id = |c: usize| (c as u64 * grid_stride) as u32;
        // Buckets inside chunks: the largest power of two that divides
        // every chunk start (dask's regular chunks: their size's).
        let aligned = st[1..st.len() - 1]
            .iter()
            .map(|&s| s.trailing_zeros())
            .min()
            .unwrap_or(usize::BITS - 1)
            .min(usize::BITS - 2);
        // Else buckets no longer than the shortest chunk (zero-size ones
        // aside), so that a bucket meets at most two chunks.
        let exact = size.div_ceil(1 << aligned) <= TABLE_MAX;
        let shortest = st.windows(2).map(|w| w[1] - w[0]).filter(|&n| n > 0).min();
        let shift = if exact {
            aligned
        } else {
            shortest.map_or(0, |n| n.ilog2())
        };
        let count = size.div_ceil(1 << shift);
        if count > TABLE_MAX {
            return None;
        }
        let (ids, buckets) = if exact {
            (fill_buckets(st, shift, id), vec![])
        } else {
            // In one pass: `c` is the chunk of the bucket's first position,
            // `next` that of `split`, each found by walking on from the chunk
            // before.
            let mut c = 0;
            let bucket = |b: usize| {
                c = chunk_from(st, c, b << shift);
                let split = st[c + 1];
                let next = if split < size {
                    chunk_from(st, c + 1, split)
                } else {
                    c
                };
                Bucket {
                    split,
                    lo: id(c),
                    step: id(next) - id(c),
                }
            };
            (vec![], (0..count).map(bucket).collect())
        };
        Some(TupleAxis {
            size,
            shift,
            ids,
            buckets,
        })
    })
    .collect()
}

/// The chunk number of tuple `r` and its resolved positions; `Ok(None)`
/// when it reads nothing (mode "zero"), `Err` when it addresses nothing.
///
/// # Safety
/// `r` is a tuple of `at` (in range of the checked `indices` view), and
/// the axes of `axes` are alive (each with `ids` if `EXACT`).
#[inline(always)]
unsafe fn resolve_tuple<
    T: IndexElem,
    const K: usize,
    const CLIP: bool,
    const ZERO: bool,
    const EXACT: bool,
>(
    at: &Tuples,
    axes: &[Lookup; K],
    r: usize,
) -> Result<Option<(u32, [usize; K])>, ()> {
    let off = r as isize * at.stride;
    let mut id = 0u32;
    let mut pos = [0usize; K];
    for j in 0..K {
        // SAFETY: tuple `r` is in range and `j` a place in it (caller): inside
        // the indices' bytes by the checked-view invariant (b).
        let v = unsafe { T::load(at.base.offset(off + j as isize * at.tuple_stride)) };
        match resolve::<CLIP>(v, axes[j].size, at.wrap) {
            Some(p) => {
                pos[j] = p;
                // SAFETY: `p < size` (resolved).
                id += unsafe { axes[j].id::<EXACT>(p) };
            }
            None if ZERO => return Ok(None),
            None => return Err(()),
        }
    }
    Ok(Some((id, pos)))
}

/// The chunk of position `pos` of an axis cut at `st` (the last one starting
/// at or before it, as `locate` finds it), walking on from chunk `from`,
/// which starts at or before `pos`.
pub(super) fn chunk_from(st: &[usize], from: usize, pos: usize) -> usize {
    let last = st.len() - 2;
    let mut c = from;
    while c < last && st[c + 1] <= pos {
        c += 1;
    }
    c
}

#[cfg(test)]
#[path = "flat_tests.rs"]
mod tests;
