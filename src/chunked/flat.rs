//! The common shape of a chunked gather, with no per-row generality: a
//! flat list of index tuples (no batch axes, no outer axes of gather) over
//! the leading axes of `data`, at most [`FLAT_MAX_AXES`] of them, each cut
//! in chunks not much shorter than the axis. The tuple length is then a
//! constant of the loops (unrolled), a position's chunk is one load from a
//! small table of buckets (and a compare, for chunks that do not start at
//! multiples of a common power of two), and a chunk's address is one base
//! and its strides: each row costs a few loads and multiplies, in the scan
//! that finds the touched chunks as in the gather.
//!
//! By callgrind, 2-D points cost 323 instructions a row in the general walk
//! (`Walk::copy`), against 9 in the one-shot gather; a first flat walk with
//! the tuple length as a run-time value still took about twice the one-shot
//! gather's time.

use std::ops::Range;

use super::{locate, Bounds, Ready, Stop, ZERO_ROW};
use crate::copy::{prefetch, stream_copy, PREFETCH_LINES};
use crate::hints::fence;
use crate::index::IndexElem;
use crate::layout::SliceLayout;
use crate::mode::Mode;
use crate::offsets::resolve;
use crate::plan::streams;

/// At most this many index axes take the flat loops.
pub(super) const FLAT_MAX_AXES: usize = 4;

/// The longest table of an axis: of buckets here, of positions in the
/// general walk (`chunk_tables`). In tests, a few: the random cases take
/// both kinds of bucket, the flat loops and the general ones.
#[cfg(not(test))]
pub(super) const TABLE_MAX: usize = 1 << 16;
#[cfg(test)]
pub(super) const TABLE_MAX: usize = 3;

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
    /// compiles without them: their test cost the scan 1.4x).
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
        let count = size.div_ceil(1 << aligned);
        if count <= TABLE_MAX {
            // Chunk by chunk, the buckets its positions start (in one pass:
            // a search per bucket cost 150-360 us a call on 31-62k buckets).
            let mut ids = vec![0u32; count];
            for (c, w) in st.windows(2).enumerate().filter(|(_, w)| w[1] > w[0]) {
                ids[w[0] >> aligned..w[1].div_ceil(1 << aligned)].fill(id(c));
            }
            return Some(TupleAxis {
                size,
                shift: aligned,
                ids,
                buckets: vec![],
            });
        }
        let shortest = st.windows(2).map(|w| w[1] - w[0]).filter(|&n| n > 0).min();
        let shift = shortest.map_or(0, |n| n.ilog2());
        let count = size.div_ceil(1 << shift);
        if count > TABLE_MAX {
            return None;
        }
        // In one pass: `c` is the chunk of the bucket's first position, `next`
        // that of `split`, each found by walking on from the chunk before.
        let mut c = 0;
        let buckets = (0..count)
            .map(|b| {
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
            })
            .collect();
        Some(TupleAxis {
            size,
            shift,
            ids: vec![],
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

/// Marks in `bits` (a bitmap over the grid) the chunks that tuples `rows`
/// read; `Err` when one addresses nothing outside mode "zero".
///
/// # Safety
/// `rows` are tuples of `at`.
pub(super) unsafe fn scan<T: IndexElem>(
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
                        match mode {
                            Mode::Raise if exact => scan_k::<T, $k, false, false, true>(at, axes, rows, bits),
                            Mode::Zero if exact => scan_k::<T, $k, false, true, true>(at, axes, rows, bits),
                            Mode::Clip if exact => scan_k::<T, $k, true, false, true>(at, axes, rows, bits),
                            Mode::Raise => scan_k::<T, $k, false, false, false>(at, axes, rows, bits),
                            Mode::Zero => scan_k::<T, $k, false, true, false>(at, axes, rows, bits),
                            Mode::Clip => scan_k::<T, $k, true, false, false>(at, axes, rows, bits),
                        }
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
        // through a store (512k points in a 4x4 grid: 4.4 -> 3.9 ms on one
        // thread).
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

/// A chunk as the flat gather addresses it: the slice at resolved
/// positions `p` starts at `base + sum(p[j] * strides[j])`.
struct FlatChunk {
    /// The address element [0, ..., 0] of the whole array would have if the
    /// chunk extended to it (a plain address, only ever offset back into
    /// the chunk before a read).
    base: *const u8,
    strides: [isize; FLAT_MAX_AXES],
}

/// Rows whose sources are found at a time (as the one-shot kernel's
/// `CHUNK`).
const CHUNK: usize = 64;

/// Sources found and not yet copied are kept in a ring of this many:
/// at most `ahead` ([`PREFETCH_LINES`] lines' worth of rows, at most
/// `RING - CHUNK`) plus a chunk.
const RING: usize = 256;

/// The flat gather of a chunked call.
pub(super) struct Flat<'p> {
    at: Tuples,
    axes: Vec<TupleAxis>,
    /// Per grid number, the chunk's place in `chunks` ([`ZERO_ROW`]: not
    /// given).
    dense: &'p [u32],
    chunks: Vec<FlatChunk>,
    starts: &'p Bounds,
    row_bytes: usize,
    /// How many rows the copy follows behind the rows found.
    ahead: usize,
    /// Whether the rows are written with non-temporal stores, as the
    /// one-shot gather writes the same output (`plan::streams`).
    stream: bool,
}

impl<'p> Flat<'p> {
    /// The flat gather, if the call has its shape: `at` are the tuples,
    /// `axes` the tuple axes (`tuple_axes` over the leading axes of
    /// `data`), `ready` the given chunks, `grid_strides` the grid's strides
    /// in chunks, then the bytes of a row and of the output; every slice
    /// must be contiguous.
    pub(super) fn new(
        at: Tuples,
        axes: Vec<TupleAxis>,
        ready: &[Ready<'_>],
        dense: &'p [u32],
        starts: &'p Bounds,
        grid_strides: &[u64],
        (row_bytes, out_bytes): (usize, usize),
    ) -> Option<Self> {
        let k = axes.len();
        if !ready
            .iter()
            .all(|r| matches!(r.slice, SliceLayout::Contiguous { .. }))
        {
            return None;
        }
        let chunks = ready
            .iter()
            .map(|r| {
                let mut strides = [0isize; FLAT_MAX_AXES];
                strides[..k].copy_from_slice(&r.view.strides[..k]);
                // The chunk's first position on each tuple axis, from its
                // number in the grid.
                let back: isize = (0..k)
                    .map(|j| {
                        let count = (starts[j].len() - 1) as u64;
                        let c = ((r.id / grid_strides[j]) % count) as usize;
                        starts[j][c] as isize * strides[j]
                    })
                    .fold(0isize, isize::wrapping_add);
                FlatChunk {
                    base: r.view.first().wrapping_offset(back.wrapping_neg()),
                    strides,
                }
            })
            .collect();
        Some(Flat {
            at,
            axes,
            dense,
            chunks,
            starts,
            row_bytes,
            ahead: (PREFETCH_LINES / lines_of(row_bytes)).clamp(2, RING - CHUNK),
            stream: streams(&SliceLayout::Contiguous { bytes: row_bytes }, out_bytes),
        })
    }

    /// Copies rows `start..` into `out` (whole rows), each straight from its
    /// chunk.
    pub(super) fn copy<T: IndexElem, const CLIP: bool, const ZERO: bool>(
        &self,
        start: usize,
        out: &mut [u8],
    ) -> Result<(), Stop> {
        let exact = self.axes.iter().all(TupleAxis::exact);
        macro_rules! by_k {
            ($($k:literal)*) => {
                match self.axes.len() {
                    $($k => match <&[TupleAxis; $k]>::try_from(&self.axes[..]) {
                        Ok(axes) if exact => self.copy_k::<T, $k, CLIP, ZERO, true>(axes, start, out),
                        Ok(axes) => self.copy_k::<T, $k, CLIP, ZERO, false>(axes, start, out),
                        Err(_) => Err(Stop::Bad),
                    },)*
                    _ => Err(Stop::Bad),
                }
            };
        }
        by_k!(1 2 3 4)
    }

    /// [`Flat::copy`] for tuples of `K`, as the one-shot kernel reads
    /// random rows: the rows' sources are found [`CHUNK`] at a time, each
    /// requested into L2 as it is found, and the copy follows `ahead` rows
    /// behind, so that many rows are always on their way (see
    /// `copy::prefetch` for why L2). In-process A/B, 512k random points of
    /// 16 chunks of 1024x1024 float32: the sources of 256 rows found and
    /// requested into L1, then copied, 7.4-8.3 ms on one thread and 4.2 ms
    /// on two; into L2, 4.4-6.8 ms and 2.6-3.1 ms; this loop 4.2-4.6 ms and
    /// 2.7-3.0 ms (the one-shot gather of the whole array: 3.4-3.9 ms and
    /// 2.1-2.6 ms).
    fn copy_k<
        T: IndexElem,
        const K: usize,
        const CLIP: bool,
        const ZERO: bool,
        const EXACT: bool,
    >(
        &self,
        axes: &[TupleAxis; K],
        start: usize,
        out: &mut [u8],
    ) -> Result<(), Stop> {
        let rows = out.len() / self.row_bytes;
        let lk = lookups(axes);
        let mut ring = [std::ptr::null::<u8>(); RING];
        // Rows copied, rows whose sources are found (ring[r % RING]).
        let (mut done, mut found) = (0, 0);
        while done < rows {
            let len = CHUNK.min(rows - found);
            for r in found..found + len {
                // SAFETY: `start + r` is an output row of this call, so a
                // tuple of the checked indices (the plan checked them).
                let tuple =
                    unsafe { resolve_tuple::<T, K, CLIP, ZERO, EXACT>(&self.at, &lk, start + r) };
                ring[r % RING] = match tuple.map_err(|()| Stop::Bad)? {
                    None => std::ptr::null(),
                    Some((id, pos)) => {
                        let place = self.dense[id as usize];
                        if place == ZERO_ROW {
                            return Err(self.missing(start + r, &pos));
                        }
                        let chunk = &self.chunks[place as usize];
                        let off = (0..K).fold(0isize, |s, j| {
                            s.wrapping_add((pos[j] as isize).wrapping_mul(chunk.strides[j]))
                        });
                        // In bounds: `pos` lies in this chunk on the tuple
                        // axes (its number says so), so `base + off` is the
                        // chunk's element at `pos` minus the chunk's start,
                        // and the contiguous slice from there lies inside its
                        // bytes by the checked-view invariant (b).
                        let src = chunk.base.wrapping_offset(off);
                        prefetch::<false>(src, 0, self.row_bytes, true);
                        src
                    }
                };
            }
            found += len;
            let upto = if found == rows {
                rows
            } else {
                found.saturating_sub(self.ahead)
            };
            if self.stream {
                copy_out::<true>(&ring, done..upto, out, self.row_bytes);
            } else {
                copy_out::<false>(&ring, done..upto, out, self.row_bytes);
            }
            done = done.max(upto);
        }
        if self.stream {
            // The non-temporal stores must be visible before this task
            // reports itself done to the thread that returns the output.
            fence();
        }
        Ok(())
    }

    /// The error of row `row`, at `pos`, which reads a chunk not given.
    #[cold]
    fn missing(&self, row: usize, pos: &[usize]) -> Stop {
        let mut which: Vec<usize> = pos
            .iter()
            .enumerate()
            .map(|(j, &p)| locate(&self.starts[j], p).0)
            .collect();
        which.resize(self.starts.len(), 0);
        Stop::Missing(row, which)
    }
}

/// Copies rows `rows` (of `width` bytes) from their sources in `ring` (as
/// `Flat::copy_k` found them: null for a zero-filled row) into `out`, with
/// non-temporal stores if `STREAM`. A separate loop for each kind of store:
/// a test of the kind in the loop made 512k points take 1.5x the time.
#[inline(always)]
fn copy_out<const STREAM: bool>(
    ring: &[*const u8; RING],
    rows: Range<usize>,
    out: &mut [u8],
    width: usize,
) {
    for r in rows {
        let src = ring[r % RING];
        let dst = &mut out[r * width..(r + 1) * width];
        if src.is_null() {
            dst.fill(0);
        } else if STREAM {
            // SAFETY: as below; `stream_copy` writes exactly `dst`.
            unsafe { stream_copy(src, dst.as_mut_ptr(), dst.len()) };
        } else {
            // SAFETY: `src` starts a contiguous slice of `width` bytes inside
            // its chunk (`Flat::copy_k`); `dst` is one output row, and the
            // output overlaps no chunk (`gather_chunks`' caller).
            unsafe { super::copy_contiguous(src, dst) };
        }
    }
}

/// The cache lines a row of `width` bytes is requested on (see
/// `copy::prefetch`: at most 1 KiB of it, plus the line of its last byte
/// when a row of that width can straddle lines).
fn lines_of(width: usize) -> usize {
    let w = width.clamp(1, 1024);
    if w % 64 == 0 || 64 % w == 0 {
        w.div_ceil(64)
    } else {
        w / 64 + 2
    }
}

/// The chunk of position `pos` of an axis cut at `st` (the last one starting
/// at or before it, as `locate` finds it), walking on from chunk `from`,
/// which starts at or before `pos`.
fn chunk_from(st: &[usize], from: usize, pos: usize) -> usize {
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
