//! The chunked gather itself: the given chunks checked and ordered, then
//! each output row copied straight from the chunk it falls in.

use std::sync::Mutex;

use smallvec::SmallVec;

use super::flat::{tuple_axes, Flat, Tuples};
use super::grid::{bounds, chunk_of, chunk_tables, grid_strides, locate, Bounds};
use super::ready::{ready_chunks, Ready, Stop, ZERO_ROW};
use super::{plan_whole, relocate, row_axes, ChunkGrid, RowAxis, Whole};
use crate::convert::Cast;
use crate::error::{fmt_tuple, GatherError, Result};
use crate::hints::{self, PREFETCH_MAX};
use crate::index::{with_index_type, IndexElem, IndexType};
use crate::layout::ArrayView;
use crate::mode::Mode;
use crate::mover::move_slice;
use crate::offsets::resolve;
use crate::offsets::BadRow;
use crate::plan::{Operator, Plan};
use crate::split::split_rows;
use crate::stand_in::StandIn;
use crate::threads::{ReadShared, MAX_THREADS};
use crate::validate::checked_sizes;

/// What finding a row's chunk costs, in bytes of copying.
pub(super) const ROW_COST: usize = 64;

/// Gathers from the chunks of `grid` into `out` (exactly the result's
/// bytes, C order, not overlapping any chunk): the one-shot gather of the
/// array the chunks tile, with its errors (moved to `whole` if given),
/// each element converted by `cast` if given (`dtype=`, as
/// [`Plan::with_cast`] converts).
#[allow(clippy::too_many_arguments)] // the operator's inputs, as the one-shot planners take them
pub fn gather_chunks(
    grid: &ChunkGrid<'_>,
    indices: ArrayView<'_>,
    ty: IndexType,
    op: Operator,
    mode: Mode,
    whole: Option<&Whole>,
    cast: Option<Cast>,
    out: &mut [u8],
    threads: usize,
) -> Result<()> {
    let threads = threads.min(MAX_THREADS);
    let (starts, shape) = bounds(&grid.chunk_sizes)?;
    let data = StandIn::new(&shape, grid.itemsize);
    let (plan, mut out_bytes) = plan_whole(&data, grid.itemsize, indices, ty, op)?;
    if let Some(cast) = cast {
        if cast.from().size() != grid.itemsize {
            return Err(GatherError::InvalidArgument(format!(
                "a cast from {:?} reads {}-byte elements, but the chunks' are {} bytes",
                cast.from(),
                cast.from().size(),
                grid.itemsize
            )));
        }
        out_bytes = checked_sizes(plan.out_shape(), cast.to().size())?;
    }
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
        // The slice as read from a chunk.
        prefetch_bytes: cast
            .map_or(row_bytes, |c| row_bytes / c.to().size() * c.from().size())
            .min(PREFETCH_MAX),
        cast,
    };
    // SAFETY: the flat gather's raw addresses are those of the indices and
    // of the given chunks, which the caller's views borrow (shared,
    // read-only) for as long as the gather runs.
    let flat = flat_gather(&walk, &strides, out_bytes).map(|f| unsafe { ReadShared::new(f) });
    let missing: Mutex<Option<(usize, Vec<usize>)>> = Mutex::new(None);
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
            Ok(()) => Ok(()),
            Err(Stop::Bad) => Err(BadRow),
            Err(Stop::Missing(row, coords)) => {
                let mut m = missing.lock().unwrap_or_else(|e| e.into_inner());
                if m.as_ref().is_none_or(|(r, _)| row < *r) {
                    *m = Some((row, coords));
                }
                Err(BadRow)
            }
        }
    };
    if split_rows(threads, n_rows, cost, row_bytes, out, &run).is_ok() {
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
pub(super) fn flat_gather<'p>(
    walk: &Walk<'p, '_>,
    grid_strides: &[u64],
    out_bytes: usize,
) -> Option<Flat<'p>> {
    let plan = walk.plan;
    if walk.cast.is_some() {
        return None; // the flat loops copy; a conversion takes the general walk
    }
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

/// Everything a run of rows reads.
pub(super) struct Walk<'p, 'a> {
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
    /// The conversion of every element, if any (`dtype=`).
    cast: Option<Cast>,
}

/// Grids up to this many chunks find a chunk's place in a table.
#[cfg(not(test))]
pub(super) const DENSE_MAX: u64 = 1 << 16;
#[cfg(test)]
pub(super) const DENSE_MAX: u64 = 8;

/// Rows whose sources are found before any is copied: their reads are then
/// independent, so the memory system serves many at once (a row's chunk
/// lookup is long enough that out-of-order execution alone would not reach
/// the next row's read).
pub(super) const BLOCK: usize = 256;

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
                    unsafe { move_slice(src, &self.ready[k as usize].slice, self.cast, dst) };
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
        // Into L2, not L1, as `hints::line` says.
        hints::lines(src, self.prefetch_bytes, true);
        Ok((src, k as u32))
    }
}
