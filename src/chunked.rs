//! Gathering from an array held as a grid of chunks (a dask or zarr array's
//! blocks), in one pass: each output row is copied straight from the chunk
//! its coordinates fall in, in index order, with no intermediate pieces.
//!
//! The rules, the output shape and the validation of the indices are the
//! one-shot gather's: a plan is made on a stand-in of the whole array (every
//! stride 0, one element of bytes) and its checks run unchanged, so errors
//! are exactly `plan_gather_nd`'s and `plan_gather`'s. Only the copy differs:
//! each row finds its chunk by the chunk boundaries of every axis. The axes
//! of the gathered slice must hold one chunk each (a caller splits its
//! output along them); every other axis may be chunked any way. A chunk
//! that is not given is never read: an index landing in one is an error.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use smallvec::SmallVec;

use crate::error::{fmt_tuple, GatherError, Result};
use crate::hints::{self, PREFETCH_MAX};
use crate::index::{with_index_type, IndexElem, IndexType};
use crate::layout::{ArrayView, SliceLayout};
use crate::mode::Mode;
use crate::offsets::resolve;
use crate::plan::{plan_gather, plan_gather_nd, Operator, Plan};
use crate::threads::{for_each_task, Disjoint, ReadShared, MAX_THREADS};
use crate::validate::{check_numpy_size, checked_sizes};

mod flat;
use flat::{tuple_axes, Flat, Tuples, TABLE_MAX};

/// Where the array and the indices of a call lie in larger ones, so that an
/// out-of-range index is reported as the one-shot gather on those would:
/// its position moved by `index_offset` (one entry per axis of `indices`
/// before the tuple axis), and `data_shape` as the data's shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Whole {
    /// The larger array's shape.
    pub data_shape: Vec<usize>,
    /// The position of `indices[0, ...]` in the larger indices.
    pub index_offset: Vec<usize>,
}

/// What the rules say about a call, from the shapes alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The result's shape.
    pub out_shape: Vec<usize>,
    /// The result's size in bytes.
    pub out_bytes: usize,
    /// The number of batch axes (`batch_dims`, normalized).
    pub batch_dims: usize,
    /// The axes of `data` an index tuple addresses, in tuple order.
    pub indexed: Vec<usize>,
}

/// An array held as chunks: the chunk sizes along every axis, and the
/// chunks given, each a checked-or-to-be-checked view with its grid
/// coordinates.
#[derive(Clone, Debug)]
pub struct ChunkGrid<'a> {
    /// Per axis, the sizes of its chunks in order (their sum is the axis).
    pub chunk_sizes: Vec<Vec<usize>>,
    /// The chunks given: grid coordinates and the chunk's view.
    pub chunks: Vec<(Vec<usize>, ArrayView<'a>)>,
    /// Bytes per element.
    pub itemsize: usize,
}

/// A whole-array stand-in: every stride 0 over one element of zero bytes,
/// so that the one-shot planner checks shapes and indices against `shape`
/// without an array behind it (its rows are never copied from). Its
/// elements are one byte (none for an itemsize of 0), whatever the
/// array's: a stand-in of the real itemsize held that many bytes, and an
/// absurd one (the Rust API takes any) aborted on the allocation; see
/// [`plan_whole`].
struct StandIn {
    shape: Vec<usize>,
    strides: Vec<isize>,
    bytes: Vec<u8>,
}

impl StandIn {
    /// The stand-in of an array of `shape` and `itemsize` (counted by
    /// [`plan_whole`], held as one byte).
    fn new(shape: &[usize], itemsize: usize) -> Self {
        StandIn {
            shape: shape.to_vec(),
            strides: vec![0; shape.len()],
            bytes: vec![0; itemsize.min(1)],
        }
    }

    fn view(&self) -> ArrayView<'_> {
        ArrayView {
            bytes: &self.bytes,
            offset: 0,
            shape: &self.shape,
            strides: &self.strides,
            itemsize: self.bytes.len(),
        }
    }
}

/// The one-shot plan of `indices` on an array of `shape` and `itemsize`,
/// over a stand-in of one-byte elements (`StandIn`), and the result's bytes
/// at the real `itemsize`: the same checks and errors as planning on the
/// array itself (its own size bound first, as the planner checks it before
/// the attributes; the result's after).
fn plan_whole<'a>(
    data: &'a StandIn,
    itemsize: usize,
    indices: ArrayView<'a>,
    ty: IndexType,
    op: Operator,
) -> Result<(Plan<'a>, usize)> {
    check_numpy_size("data", &data.shape, itemsize)?;
    let plan = plan_on(data.view(), indices, ty, op)?;
    let out_bytes = checked_sizes(plan.out_shape(), itemsize)?;
    Ok((plan, out_bytes))
}

fn plan_on<'a>(
    data: ArrayView<'a>,
    indices: ArrayView<'a>,
    ty: IndexType,
    op: Operator,
) -> Result<Plan<'a>> {
    match op {
        Operator::GatherNd { batch_dims } => plan_gather_nd(data, indices, ty, batch_dims),
        Operator::Gather { axis, batch_dims } => plan_gather(data, indices, ty, axis, batch_dims),
    }
}

/// One axis of the output rows: its length, its stride in `indices` (0
/// for gather's outer axes) and the axis of `data` it walks, if any.
#[derive(Clone, Copy, Debug)]
struct RowAxis {
    size: usize,
    index_stride: isize,
    data_axis: Option<usize>,
}

/// The rows of a plan as axes with their data axes (the plan's own walk is
/// coalesced and has lost them), the batch count and the first slice axis.
fn row_axes(plan: &Plan<'_>) -> (SmallVec<[RowAxis; 8]>, usize, usize) {
    let (ds, is, st) = (plan.data.shape, plan.indices.shape, plan.indices.strides);
    let first = plan.tuple[0].axis;
    let axis = |i: usize, data_axis| RowAxis {
        size: is[i],
        index_stride: st[i],
        data_axis,
    };
    if plan.is_nd {
        // Tuple axes are b..b + k, so b is the first one.
        let b = first;
        let rows = (0..is.len() - 1)
            .map(|i| axis(i, (i < b).then_some(i)))
            .collect();
        (rows, b, b + plan.tuple.len())
    } else {
        // The output is ds[..a] + is[b..] + ds[a + 1..]: b from its rank.
        let b = is.len() + ds.len() - 1 - plan.out_shape.len();
        let outer = (b..first).map(|i| RowAxis {
            size: ds[i],
            index_stride: 0,
            data_axis: Some(i),
        });
        let rows = (0..b)
            .map(|i| axis(i, Some(i)))
            .chain(outer)
            .chain((b..is.len()).map(|i| axis(i, None)))
            .collect();
        (rows, b, first + 1)
    }
}

/// The shapes' verdict: the one-shot gather's errors for these shapes and
/// attributes (never for index values), and the result's layout.
pub fn chunked_layout(
    data_shape: &[usize],
    itemsize: usize,
    index_shape: &[usize],
    ty: IndexType,
    op: Operator,
) -> Result<Layout> {
    let data = StandIn::new(data_shape, itemsize);
    let one = vec![0u8; ty.itemsize()];
    let zeros = vec![0isize; index_shape.len()];
    let indices = ArrayView {
        bytes: &one,
        offset: 0,
        shape: index_shape,
        strides: &zeros,
        itemsize: ty.itemsize(),
    };
    let (plan, out_bytes) = plan_whole(&data, itemsize, indices, ty, op)?;
    let (_, batch_dims, _) = row_axes(&plan);
    Ok(Layout {
        out_shape: plan.out_shape().to_vec(),
        out_bytes,
        batch_dims,
        indexed: plan.tuple.iter().map(|t| t.axis).collect(),
    })
}

/// Per axis: chunk starts (with the end last).
type Bounds = Vec<Vec<usize>>;

fn bounds(chunk_sizes: &[Vec<usize>]) -> Result<(Bounds, Vec<usize>)> {
    let mut all = Vec::with_capacity(chunk_sizes.len());
    let mut shape = Vec::with_capacity(chunk_sizes.len());
    for sizes in chunk_sizes {
        if sizes.is_empty() {
            return Err(GatherError::InvalidArgument(
                "every axis needs at least one chunk (an empty axis: one chunk of size 0)".into(),
            ));
        }
        let mut starts = vec![0usize];
        for &s in sizes {
            let next = starts[starts.len() - 1].checked_add(s).ok_or_else(|| {
                GatherError::Overflow("the chunk sizes of an axis overflow".into())
            })?;
            starts.push(next);
        }
        shape.push(starts[starts.len() - 1]);
        all.push(starts);
    }
    Ok((all, shape))
}

/// The chunk a coordinate falls in along an axis with `starts`, and the
/// coordinate inside it. Zero-size chunks are skipped: the last chunk whose
/// start is at or before `c`.
#[inline(always)]
fn locate(starts: &[usize], c: usize) -> (usize, usize) {
    let i = starts[..starts.len() - 1].partition_point(|&s| s <= c) - 1;
    (i, c - starts[i])
}

/// Per axis (the first `axes`), the chunk of each position when the axis
/// is at most [`TABLE_MAX`] long: a load instead of a binary search.
fn chunk_tables(starts: &Bounds, axes: usize) -> Vec<Option<Vec<u32>>> {
    starts
        .iter()
        .take(axes)
        .map(|st| {
            let size = st[st.len() - 1];
            (size <= TABLE_MAX).then(|| {
                let mut t = vec![0u32; size];
                for (c, w) in st.windows(2).enumerate() {
                    t[w[0]..w[1]].fill(c as u32);
                }
                t
            })
        })
        .collect()
}

/// The chunk position `p` falls in, by table or by search.
#[inline(always)]
fn chunk_of(table: &Option<Vec<u32>>, starts: &[usize], p: usize) -> usize {
    match table {
        Some(t) => t[p] as usize,
        None => locate(starts, p).0,
    }
}

/// The one-shot error moved to the larger arrays of `whole`.
fn relocate(e: GatherError, whole: Option<&Whole>) -> GatherError {
    match (e, whole) {
        (GatherError::IndexOutOfRange(mut bad), Some(w)) => {
            for (p, o) in bad.position.iter_mut().zip(&w.index_offset) {
                *p += o;
            }
            bad.data_shape.clone_from(&w.data_shape);
            GatherError::IndexOutOfRange(bad)
        }
        (e, _) => e,
    }
}

/// The grid coordinates (batch axes, then indexed axes) of every chunk some
/// index reads, sorted and each once; validates the indices exactly as the
/// one-shot gather would (moved to `whole` if given).
pub fn touched_chunks(
    chunk_sizes: &[Vec<usize>],
    indices: ArrayView<'_>,
    ty: IndexType,
    op: Operator,
    mode: Mode,
    whole: Option<&Whole>,
    threads: usize,
) -> Result<Vec<Vec<usize>>> {
    let (starts, shape) = bounds(chunk_sizes)?;
    let data = StandIn::new(&shape, 1);
    let plan = plan_on(data.view(), indices, ty, op)?;
    let (rows, b, _) = row_axes(&plan);
    // Index positions only: gather's outer axes choose no chunk of the
    // indexed axes, and the batch axes' chunks are reported with them.
    let axes: SmallVec<[RowAxis; 8]> = rows
        .into_iter()
        .filter(|r| r.data_axis.is_none_or(|a| a < b))
        .collect();
    let n: usize = axes.iter().map(|a| a.size).product();
    // Chunks are numbered in C order over the batch and indexed axes.
    let dims: SmallVec<[usize; 8]> = (0..b).chain(plan.tuple.iter().map(|t| t.axis)).collect();
    let counts: Vec<Vec<usize>> = dims.iter().map(|&a| chunk_sizes[a].clone()).collect();
    let strides = grid_strides(&counts)?;
    let total: u64 = counts.iter().map(|c| c.len() as u64).product();
    let tables = chunk_tables(&starts, starts.len());
    // The scan checks every index as it resolves it: the indices are read
    // once. Only when one is bad does the plan's own check run, for the
    // one-shot function's error (the first bad index in C order).
    let threads = threads.min(MAX_THREADS);
    // A flat list of tuples (no batch axes): the scan needs no coordinates.
    let flat = (b == 0 && matches!(axes.as_slice(), [a] if a.data_axis.is_none()))
        .then(|| {
            let each = plan
                .tuple
                .iter()
                .enumerate()
                .map(|(j, t)| (t.axis, strides[j]));
            tuple_axes(&starts, each, total)
        })
        .flatten();
    // SAFETY: `base` is the address of the checked indices view the plan
    // borrows (shared, read-only) while the scan's tasks run.
    let tuples = unsafe {
        ReadShared::new(Tuples {
            base: plan.indices.first(),
            stride: axes.first().map_or(0, |a| a.index_stride),
            tuple_stride: plan.tuple_stride,
            wrap: plan.wrap_negative,
        })
    };
    let (seen, bad) = with_index_type!(ty, T => {
        // The chunks read by index positions `start..start + count` (C
        // order), and whether one of them addresses nothing outside mode
        // "zero".
        let scan = |start: usize, count: usize| -> (Seen, bool) {
            let mut seen = Seen::new(total);
            if count == 0 {
                return (seen, false); // an empty axis: no position to start from
            }
            let base = plan.indices.first();
            // What the tuple at byte `off` of `indices` adds to its chunk's
            // number; `Ok(None)` when it reads nothing (mode "zero"), `Err`
            // when it addresses nothing.
            let tuple_part = |off: isize| -> std::result::Result<Option<u64>, ()> {
                let mut id = 0u64;
                for (j, t) in plan.tuple.iter().enumerate() {
                    // SAFETY: the callers pass the offset of an in-range
                    // position of `indices`, and `j` is a place in its tuple:
                    // inside its bytes by the checked-view invariant (b) (the
                    // plan checked `indices`).
                    let v = unsafe { T::load(base.offset(off + j as isize * plan.tuple_stride)) };
                    let at = if mode == Mode::Clip {
                        resolve::<true>(v, t.size, plan.wrap_negative)
                    } else {
                        resolve::<false>(v, t.size, plan.wrap_negative)
                    };
                    match at {
                        Some(p) => {
                            id += chunk_of(&tables[t.axis], &starts[t.axis], p) as u64
                                * strides[b + j]
                        }
                        None if mode == Mode::Zero => return Ok(None),
                        None => return Err(()),
                    }
                }
                Ok(Some(id))
            };
            if let (Some(axes), Seen::Bits(bits)) = (&flat, &mut seen) {
                // SAFETY: `start..start + count` are positions of the
                // checked indices, each a tuple (`flat`).
                return match unsafe { flat::scan::<T>(&tuples, axes, mode, start..start + count, bits) } {
                    Ok(()) => (seen, false),
                    Err(()) => (Seen::new(total), true),
                };
            }
            let mut last = None;
            let mut coords: SmallVec<[usize; 8]> = smallvec::smallvec![0; axes.len()];
            let mut rest = start;
            for (c, a) in coords.iter_mut().zip(&axes).rev() {
                *c = rest % a.size;
                rest /= a.size;
            }
            for _ in 0..count {
                let mut off = 0isize;
                let mut id = 0u64;
                let mut at = 0;
                for (c, a) in coords.iter().zip(&axes) {
                    off += *c as isize * a.index_stride;
                    if let Some(d) = a.data_axis {
                        id += chunk_of(&tables[d], &starts[d], *c) as u64 * strides[at];
                        at += 1;
                    }
                }
                match tuple_part(off) {
                    Ok(Some(part)) if last != Some(id + part) => {
                        seen.insert(id + part);
                        last = Some(id + part);
                    }
                    Ok(_) => {}
                    Err(()) => return (seen, true),
                }
                for (c, a) in coords.iter_mut().zip(&axes).rev() {
                    *c += 1;
                    if *c < a.size {
                        break;
                    }
                    *c = 0;
                }
            }
            (seen, false)
        };
        // Long index lists are scanned in parts on the worker threads, each
        // part into a set of its own, merged after (2M points in 4 blocks:
        // 25 ms on one thread, by benches/dask_gather.py's case).
        if threads <= 1 || n < SCAN_PARALLEL_MIN {
            scan(0, n)
        } else {
            let per_task = n.div_ceil(threads * 4).max(SCAN_PARALLEL_MIN / 4);
            let merged = Mutex::new((Seen::new(total), false));
            for_each_task(threads, n.div_ceil(per_task), &|t| {
                let start = t * per_task;
                let (part, bad) = scan(start, per_task.min(n - start));
                let mut m = merged.lock().unwrap_or_else(|e| e.into_inner());
                m.0.merge(part);
                m.1 |= bad;
            });
            merged.into_inner().unwrap_or_else(|e| e.into_inner())
        }
    });
    if bad {
        plan.validate(mode, threads)
            .map_err(|e| relocate(e, whole))?;
        // The check found nothing the scan found: another thread changed
        // the indices meanwhile.
        return Err(GatherError::IndicesModified);
    }
    Ok(seen
        .sorted()
        .into_iter()
        .map(|id| {
            strides
                .iter()
                .zip(&counts)
                .map(|(&s, c)| ((id / s) % c.len() as u64) as usize)
                .collect()
        })
        .collect())
}

/// Index lists at least this long are scanned on several threads (in
/// tests, a few: the random cases take both ways).
#[cfg(not(test))]
const SCAN_PARALLEL_MIN: usize = 1 << 16;
#[cfg(test)]
const SCAN_PARALLEL_MIN: usize = 8;

/// Grids up to this many chunks count touched ones in a bitmap (in tests,
/// a few: the random cases take both ways).
#[cfg(not(test))]
const BITMAP_MAX: u64 = 1 << 20;
#[cfg(test)]
const BITMAP_MAX: u64 = 4;

/// A set of chunk numbers: a bitmap for grids of up to [`BITMAP_MAX`]
/// chunks, else a hash set (a grid of 10^8 chunks touched at two points
/// costs two).
enum Seen {
    Bits(Vec<u64>),
    Hashed(std::collections::HashSet<u64>),
}

impl Seen {
    fn new(total: u64) -> Self {
        if total <= BITMAP_MAX {
            Seen::Bits(vec![0; total.div_ceil(64) as usize])
        } else {
            Seen::Hashed(Default::default())
        }
    }

    fn insert(&mut self, id: u64) {
        match self {
            Seen::Bits(bits) => bits[(id / 64) as usize] |= 1 << (id % 64),
            Seen::Hashed(set) => {
                set.insert(id);
            }
        }
    }

    /// Adds every chunk of `other` (a set over the same grid).
    fn merge(&mut self, other: Seen) {
        match (self, other) {
            (Seen::Bits(mine), Seen::Bits(theirs)) => {
                for (m, t) in mine.iter_mut().zip(theirs) {
                    *m |= t;
                }
            }
            (Seen::Hashed(mine), Seen::Hashed(theirs)) => mine.extend(theirs),
            (mine, theirs) => {
                for id in theirs.sorted() {
                    mine.insert(id);
                }
            }
        }
    }

    fn sorted(self) -> Vec<u64> {
        match self {
            Seen::Bits(bits) => {
                let mut ids = vec![];
                for (w, &word) in bits.iter().enumerate() {
                    let mut rest = word;
                    while rest != 0 {
                        ids.push(w as u64 * 64 + u64::from(rest.trailing_zeros()));
                        rest &= rest - 1;
                    }
                }
                ids
            }
            Seen::Hashed(set) => {
                let mut ids: Vec<u64> = set.into_iter().collect();
                ids.sort_unstable();
                ids
            }
        }
    }
}

/// A chunk ready to copy from: its view and how a slice lies in it.
struct Ready<'a> {
    id: u64,
    view: ArrayView<'a>,
    slice: SliceLayout,
}

/// Work below this many bytes (as `execute` counts) stays on one thread.
const PARALLEL_MIN_COST: usize = 256 * 1024;
/// What finding a row's chunk costs, in bytes of copying.
const ROW_COST: usize = 64;

/// Gathers from the chunks of `grid` into `out` (exactly the result's
/// bytes, C order, not overlapping any chunk): the one-shot gather of the
/// array the chunks tile, with its errors (moved to `whole` if given).
#[allow(clippy::too_many_arguments)] // the operator's inputs, as the one-shot planners take them
pub fn gather_chunks(
    grid: &ChunkGrid<'_>,
    indices: ArrayView<'_>,
    ty: IndexType,
    op: Operator,
    mode: Mode,
    whole: Option<&Whole>,
    out: &mut [u8],
    threads: usize,
) -> Result<()> {
    let threads = threads.min(MAX_THREADS);
    let (starts, shape) = bounds(&grid.chunk_sizes)?;
    let data = StandIn::new(&shape, grid.itemsize);
    let (plan, out_bytes) = plan_whole(&data, grid.itemsize, indices, ty, op)?;
    if out.len() != out_bytes {
        return Err(GatherError::InvalidArgument(format!(
            "output buffer has {} bytes, the result needs {}",
            out.len(),
            out_bytes
        )));
    }
    let (rows, _, slice_start) = row_axes(&plan);
    let ready = ready_chunks(grid, &starts, slice_start)?;
    let strides = grid_strides(&grid.chunk_sizes)?;
    let n_rows: usize = rows.iter().map(|r| r.size).product();
    if out_bytes == 0 || n_rows == 0 {
        return plan.validate(mode, threads).map_err(|e| relocate(e, whole));
    }
    let row_bytes = out_bytes / n_rows;
    let tables = chunk_tables(&starts, slice_start);
    let cells: u64 = grid.chunk_sizes.iter().map(|c| c.len() as u64).product();
    let dense: Option<Vec<u32>> = (cells <= DENSE_MAX).then(|| {
        let mut d = vec![ZERO_ROW; cells as usize];
        for (k, r) in ready.iter().enumerate() {
            d[r.id as usize] = k as u32;
        }
        d
    });
    let walk = Walk {
        plan: &plan,
        rows: &rows,
        starts: &starts,
        grid_strides: &strides,
        ready: &ready,
        slice_start,
        row_bytes,
        tables: &tables,
        dense: dense.as_deref(),
        prefetch_bytes: row_bytes.min(PREFETCH_MAX),
    };
    // SAFETY: the flat gather's raw addresses are those of the indices and
    // of the given chunks, which the caller's views borrow (shared,
    // read-only) for as long as the gather runs.
    let flat = flat_gather(&walk, &strides, out_bytes).map(|f| unsafe { ReadShared::new(f) });
    let missing: Mutex<Option<(usize, Vec<usize>)>> = Mutex::new(None);
    let failed = AtomicBool::new(false);
    let cost = out_bytes.saturating_add(n_rows.saturating_mul(ROW_COST));
    let run = |start: usize, chunk: &mut [u8]| {
        let result = match &flat {
            Some(flat) => with_index_type!(ty, T => match mode {
                Mode::Raise => flat.copy::<T, false, false>(start, chunk),
                Mode::Zero => flat.copy::<T, false, true>(start, chunk),
                Mode::Clip => flat.copy::<T, true, false>(start, chunk),
            }),
            None => with_index_type!(ty, T => match mode {
                Mode::Raise => walk.copy::<T, false, false>(start, chunk),
                Mode::Zero => walk.copy::<T, false, true>(start, chunk),
                Mode::Clip => walk.copy::<T, true, false>(start, chunk),
            }),
        };
        match result {
            Ok(()) => {}
            Err(Stop::Bad) => failed.store(true, Ordering::Relaxed),
            Err(Stop::Missing(row, coords)) => {
                failed.store(true, Ordering::Relaxed);
                let mut m = missing.lock().unwrap_or_else(|e| e.into_inner());
                if m.as_ref().is_none_or(|(r, _)| row < *r) {
                    *m = Some((row, coords));
                }
            }
        }
    };
    if threads <= 1 || cost < PARALLEL_MIN_COST || n_rows < 2 {
        run(0, out);
    } else {
        let per_task = n_rows
            .div_ceil(threads * 8)
            .max((32 * 1024usize).div_ceil((cost / n_rows).max(1)));
        let base = Disjoint::new(out.as_mut_ptr());
        for_each_task(threads, n_rows.div_ceil(per_task), &|t| {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let start = t * per_task;
            let count = per_task.min(n_rows - start);
            // SAFETY: task t owns rows start..start + count of `out`, which
            // no other task touches (for_each_task runs each t once), and
            // which lie inside it (start + count <= n_rows).
            let part = unsafe {
                std::slice::from_raw_parts_mut(base.at(start * row_bytes), count * row_bytes)
            };
            run(start, part);
        });
    }
    if !failed.load(Ordering::Relaxed) {
        return Ok(());
    }
    // The first bad index in C order, as the one-shot gather names it.
    plan.validate(mode, threads)
        .map_err(|e| relocate(e, whole))?;
    if let Some((_, coords)) = missing.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(GatherError::InvalidArgument(format!(
            "gather over chunks: an index reads chunk {} of the grid, which was not given",
            fmt_tuple(&coords)
        )));
    }
    Err(GatherError::IndicesModified)
}

/// The flat gather of `walk`, if its call has that shape (see [`Flat`]): a
/// flat list of tuples over the leading axes of `data`, in a grid small
/// enough for the dense table.
fn flat_gather<'p>(
    walk: &Walk<'p, '_>,
    grid_strides: &[u64],
    out_bytes: usize,
) -> Option<Flat<'p>> {
    let plan = walk.plan;
    let k = plan.tuple.len();
    let flat_rows = matches!(walk.rows, [r] if r.data_axis.is_none());
    let leading = plan.tuple.iter().enumerate().all(|(j, t)| t.axis == j);
    if !flat_rows || !leading || walk.slice_start != k {
        return None;
    }
    let total: u64 = walk.starts.iter().map(|s| (s.len() - 1) as u64).product();
    let axes = tuple_axes(walk.starts, (0..k).map(|j| (j, grid_strides[j])), total)?;
    let tuples = Tuples {
        base: plan.indices.first(),
        stride: walk.rows[0].index_stride,
        tuple_stride: plan.tuple_stride,
        wrap: plan.wrap_negative,
    };
    Flat::new(
        tuples,
        axes,
        walk.ready,
        walk.dense?,
        walk.starts,
        grid_strides,
        (walk.row_bytes, out_bytes),
    )
}

/// C-order strides of the grid, in chunks.
fn grid_strides(chunk_sizes: &[Vec<usize>]) -> Result<Vec<u64>> {
    let mut strides = vec![0u64; chunk_sizes.len()];
    let mut acc = 1u64;
    for (s, sizes) in strides.iter_mut().zip(chunk_sizes).rev() {
        *s = acc;
        acc = acc
            .checked_mul(sizes.len() as u64)
            .ok_or_else(|| GatherError::Overflow("the chunk grid has too many chunks".into()))?;
    }
    Ok(strides)
}

/// Checks the given chunks against the grid and sorts them by position.
fn ready_chunks<'a>(
    grid: &ChunkGrid<'a>,
    starts: &Bounds,
    slice_start: usize,
) -> Result<Vec<Ready<'a>>> {
    let bad = |msg: String| GatherError::InvalidArgument(format!("gather over chunks: {msg}"));
    for (a, sizes) in grid.chunk_sizes.iter().enumerate().skip(slice_start) {
        if sizes.len() != 1 {
            return Err(bad(format!(
                "axis {a} is an axis of the gathered slice and must be one chunk, got chunks {}",
                fmt_tuple(sizes)
            )));
        }
    }
    let strides = grid_strides(&grid.chunk_sizes)?;
    let mut ready = Vec::with_capacity(grid.chunks.len());
    for (coords, view) in &grid.chunks {
        let place = fmt_tuple(coords);
        if coords.len() != starts.len() || coords.iter().zip(starts).any(|(&c, s)| c + 1 >= s.len())
        {
            return Err(bad(format!("chunk {place} lies outside the grid")));
        }
        let want: Vec<usize> = coords
            .iter()
            .zip(starts)
            .map(|(&c, s)| s[c + 1] - s[c])
            .collect();
        if view.shape != want.as_slice() {
            return Err(bad(format!(
                "chunk {place} has shape {} but the grid says {}",
                fmt_tuple(view.shape),
                fmt_tuple(&want)
            )));
        }
        if view.itemsize != grid.itemsize {
            return Err(bad(format!("chunk {place} has another itemsize")));
        }
        view.check("a chunk")?;
        let id = coords
            .iter()
            .zip(&strides)
            .map(|(&c, &s)| c as u64 * s)
            .sum();
        let slice = SliceLayout::new(
            &view.shape[slice_start..],
            &view.strides[slice_start..],
            view.itemsize,
        );
        ready.push(Ready {
            id,
            view: *view,
            slice,
        });
    }
    ready.sort_unstable_by_key(|r| r.id);
    if ready.windows(2).any(|w| w[0].id == w[1].id) {
        return Err(bad("a chunk is given twice".into()));
    }
    Ok(ready)
}

/// Why a run of rows stopped.
enum Stop {
    /// An index addresses nothing: the caller reports the first in C order.
    Bad,
    /// A row reads a chunk that was not given (the row, the chunk).
    Missing(usize, Vec<usize>),
}

/// Everything a run of rows reads.
struct Walk<'p, 'a> {
    plan: &'p Plan<'p>,
    rows: &'p [RowAxis],
    starts: &'p Bounds,
    grid_strides: &'p [u64],
    ready: &'p [Ready<'a>],
    slice_start: usize,
    row_bytes: usize,
    /// Per leading axis, the chunk of each position when the axis is
    /// short (a load instead of a binary search).
    tables: &'p [Option<Vec<u32>>],
    /// The place in `ready` of each chunk of a small grid ([`ZERO_ROW`]:
    /// not given), instead of a binary search.
    dense: Option<&'p [u32]>,
    /// Bytes of a slice worth prefetching.
    prefetch_bytes: usize,
}

/// Grids up to this many chunks find a chunk's place in a table.
#[cfg(not(test))]
const DENSE_MAX: u64 = 1 << 16;
#[cfg(test)]
const DENSE_MAX: u64 = 8;

/// Rows whose sources are found before any is copied: their reads are then
/// independent, so the memory system serves many at once (a row's chunk
/// lookup is long enough that out-of-order execution alone would not reach
/// the next row's read).
const BLOCK: usize = 256;

/// No chunk: the row is zero-filled (mode "zero").
const ZERO_ROW: u32 = u32::MAX;

impl Walk<'_, '_> {
    /// Copies rows `start..` into `out` (whole rows), each straight from
    /// its chunk: block by block, the rows' sources first, then the copies.
    fn copy<T: IndexElem, const CLIP: bool, const ZERO: bool>(
        &self,
        start: usize,
        out: &mut [u8],
    ) -> std::result::Result<(), Stop> {
        let mut coords: SmallVec<[usize; 8]> = smallvec::smallvec![0; self.rows.len()];
        let mut rest = start;
        for (c, a) in coords.iter_mut().zip(self.rows).rev() {
            *c = rest % a.size;
            rest /= a.size;
        }
        let mut place: SmallVec<[usize; 8]> = smallvec::smallvec![0; self.starts.len()];
        let mut sources = [(std::ptr::null::<u8>(), ZERO_ROW); BLOCK];
        let mut cached: Option<usize> = None;
        let mut row = start;
        for part in out.chunks_mut(BLOCK * self.row_bytes) {
            let n = part.len() / self.row_bytes;
            for source in &mut sources[..n] {
                *source = self.source::<T, CLIP, ZERO>(&coords, &mut place, &mut cached, row)?;
                for (c, a) in coords.iter_mut().zip(self.rows).rev() {
                    *c += 1;
                    if *c < a.size {
                        break;
                    }
                    *c = 0;
                }
                row += 1;
            }
            for (&(src, k), dst) in sources[..n]
                .iter()
                .zip(part.chunks_exact_mut(self.row_bytes))
            {
                if k == ZERO_ROW {
                    dst.fill(0);
                } else {
                    // SAFETY: `src` is the start of a slice of chunk `k` (see
                    // `source`), laid out as its `slice`; `dst` holds exactly
                    // one slice, and the output overlaps no chunk (caller).
                    unsafe { copy_slice(src, &self.ready[k as usize].slice, dst) };
                }
            }
        }
        Ok(())
    }

    /// Where output row `row` (at `coords`) starts in its chunk, and which
    /// chunk (or [`ZERO_ROW`]); asks the cache for it.
    #[inline(always)]
    fn source<T: IndexElem, const CLIP: bool, const ZERO: bool>(
        &self,
        coords: &[usize],
        place: &mut [usize],
        cached: &mut Option<usize>,
        row: usize,
    ) -> std::result::Result<(*const u8, u32), Stop> {
        let plan = self.plan;
        let base = plan.indices.first();
        let mut off = 0isize;
        for (c, a) in coords.iter().zip(self.rows) {
            off += *c as isize * a.index_stride;
            if let Some(d) = a.data_axis {
                place[d] = *c;
            }
        }
        for (j, t) in plan.tuple.iter().enumerate() {
            // SAFETY: `coords` is an in-range row, so `off` plus the tuple
            // place `j` is an in-range position of `indices`, inside its
            // bytes by the checked-view invariant (b).
            let v = unsafe { T::load(base.offset(off + j as isize * plan.tuple_stride)) };
            match resolve::<CLIP>(v, t.size, plan.wrap_negative) {
                Some(p) => place[t.axis] = p,
                None if ZERO => return Ok((std::ptr::null(), ZERO_ROW)),
                None => return Err(Stop::Bad),
            }
        }
        let mut id = 0u64;
        let mut local: SmallVec<[usize; 8]> = SmallVec::new();
        for (d, &p) in place.iter().enumerate().take(self.slice_start) {
            let c = chunk_of(&self.tables[d], &self.starts[d], p);
            id += c as u64 * self.grid_strides[d];
            local.push(p - self.starts[d][c]);
        }
        let found = match (self.dense, *cached) {
            (Some(dense), _) => Some(dense[id as usize])
                .filter(|&k| k != ZERO_ROW)
                .map(|k| k as usize),
            (None, Some(k)) if self.ready[k].id == id => Some(k),
            (None, _) => self.ready.binary_search_by_key(&id, |r| r.id).ok(),
        };
        let Some(k) = found else {
            let mut which: Vec<usize> = place
                .iter()
                .enumerate()
                .take(self.slice_start)
                .map(|(d, &p)| locate(&self.starts[d], p).0)
                .collect();
            which.resize(self.starts.len(), 0);
            return Err(Stop::Missing(row, which));
        };
        *cached = Some(k);
        let chunk = &self.ready[k];
        let at: isize = local
            .iter()
            .zip(chunk.view.strides)
            .map(|(&l, &s)| l as isize * s)
            .sum();
        // In bounds: `local` is an in-range position of the chunk on its
        // leading axes (locate keeps it below the chunk's size, which
        // ready_chunks checked against the view's shape), and the slice
        // walks the rest whole, so every byte the copy reads from here lies
        // inside the chunk's bytes by the checked-view invariant (b).
        let src = chunk.view.first().wrapping_offset(at);
        // Into L2, not L1, as `copy::prefetch` says.
        hints::lines(src, self.prefetch_bytes, true);
        Ok((src, k as u32))
    }
}

/// Copies `dst.len()` bytes from `src`: the common element sizes as one
/// move each, not a call to memcpy.
///
/// # Safety
/// `src` must be readable for `dst.len()` bytes that do not overlap `dst`.
#[inline(always)]
unsafe fn copy_contiguous(src: *const u8, dst: &mut [u8]) {
    let d = dst.as_mut_ptr();
    // SAFETY: forwarded from the caller, for exactly `dst.len()` bytes.
    unsafe {
        match dst.len() {
            4 => d
                .cast::<u32>()
                .write_unaligned(src.cast::<u32>().read_unaligned()),
            8 => d
                .cast::<u64>()
                .write_unaligned(src.cast::<u64>().read_unaligned()),
            2 => d
                .cast::<u16>()
                .write_unaligned(src.cast::<u16>().read_unaligned()),
            n => std::ptr::copy_nonoverlapping(src, d, n),
        }
    }
}

/// Copies one slice laid out as `layout` from `src` into `dst` (C order).
///
/// # Safety
/// Every byte the layout addresses from `src` must be readable, and `dst`
/// must hold exactly the slice's bytes and not overlap them.
unsafe fn copy_slice(src: *const u8, layout: &SliceLayout, dst: &mut [u8]) {
    match layout {
        // SAFETY: forwarded from the caller; `dst` is the slice's length.
        SliceLayout::Contiguous { .. } => unsafe { copy_contiguous(src, dst) },
        SliceLayout::Strided { run, outer } => {
            let mut coords: SmallVec<[usize; 4]> = smallvec::smallvec![0; outer.len()];
            for part in dst.chunks_exact_mut(*run) {
                let off: isize = coords
                    .iter()
                    .zip(outer.iter())
                    .map(|(&c, &(_, s))| c as isize * s)
                    .sum();
                // SAFETY: `coords` is an in-range position of the outer
                // axes, so the run at `off` is part of the slice (caller).
                unsafe { std::ptr::copy_nonoverlapping(src.offset(off), part.as_mut_ptr(), *run) };
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

#[cfg(test)]
#[path = "chunked_tests.rs"]
mod tests;
