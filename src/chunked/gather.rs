//! The chunked gather itself: the given chunks checked and ordered, then
//! each output row copied straight from the chunk it falls in.

use std::sync::Mutex;

use super::flat::Flat;
use super::grid::{bounds, chunk_tables, locate};
use super::ready::{ready_chunks, Ready, Stop, ZERO_ROW};
use super::{check_indices, plan_whole, row_axes, ChunkGrid, Coords, GridRows, Whole};
use crate::convert::Cast;
use crate::error::{fmt_tuple, GatherError, Result};
use crate::hints::{self, PREFETCH_MAX};
use crate::index::{with_index_and_mode, IndexElem, IndexType};
use crate::layout::ArrayView;
use crate::mode::Mode;
use crate::mover::move_slice;
use crate::offsets::BadRow;
use crate::plan::Operator;
use crate::split::split_rows;
use crate::stand_in::StandIn;
use crate::threads::ReadShared;
use crate::validate::{check_out_len, checked_sizes};

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
    check_out_len(out, out_bytes)?;
    let slice_start = plan.tuple[plan.tuple.len() - 1].axis + 1;
    let (ready, strides, cells) = ready_chunks(grid, &starts, slice_start)?;
    let rows = GridRows {
        plan: &plan,
        axes: row_axes(&plan),
        starts: &starts,
        tables: chunk_tables(&starts, slice_start),
        strides,
    };
    let n_rows: usize = rows.axes.iter().map(|r| r.size).product();
    if out_bytes == 0 || n_rows == 0 {
        return check_indices(&plan, mode, threads, whole);
    }
    let row_bytes = out_bytes / n_rows;
    let dense: Option<Vec<u32>> = (cells <= DENSE_MAX).then(|| {
        let mut d = vec![ZERO_ROW; cells as usize];
        for (k, r) in ready.iter().enumerate() {
            d[r.id as usize] = k as u32;
        }
        d
    });
    // The flat loops, for a flat list of tuples over the leading axes of
    // `data` in a grid small enough for the dense table; they copy, so a
    // conversion takes the general walk.
    let leading = plan.tuple.iter().enumerate().all(|(j, t)| t.axis == j);
    let flat = match (&dense, cast) {
        (Some(dense), None) if leading => rows
            .flat(cells)
            .and_then(|tuples| Flat::new(tuples, &ready, dense, (row_bytes, out_bytes))),
        _ => None,
    };
    // SAFETY: the walk's raw addresses are those of the indices and of the
    // given chunks, which the caller's views borrow (shared, read-only) for
    // as long as the gather runs.
    let walk = unsafe {
        ReadShared::new(Walk {
            rows,
            ready: &ready,
            slice_start,
            row_bytes,
            dense: dense.as_deref(),
            // The slice as read from a chunk.
            prefetch_bytes: cast
                .map_or(row_bytes, |c| row_bytes / c.to().size() * c.from().size())
                .min(PREFETCH_MAX),
            cast,
            flat,
        })
    };
    let missing: Mutex<Option<(usize, Vec<usize>)>> = Mutex::new(None);
    let cost = out_bytes.saturating_add(n_rows.saturating_mul(ROW_COST));
    let run = |start: usize, chunk: &mut [u8]| {
        let result = with_index_and_mode!(ty, mode, T, CLIP, ZERO => walk.copy::<T, CLIP, ZERO>(start, chunk));
        match result {
            Ok(()) => Ok(()),
            Err(Stop::Bad) => Err(BadRow),
            Err(Stop::Missing(row, place)) => {
                let mut m = missing.lock().unwrap_or_else(|e| e.into_inner());
                if m.as_ref().is_none_or(|(r, _)| row < *r) {
                    *m = Some((row, place));
                }
                Err(BadRow)
            }
        }
    };
    if split_rows(threads, n_rows, cost, row_bytes, out, &run).is_ok() {
        return Ok(());
    }
    // The first bad index in C order, as the one-shot gather names it.
    check_indices(&plan, mode, threads, whole)?;
    if let Some((_, place)) = missing.into_inner().unwrap_or_else(|e| e.into_inner()) {
        // The chunk of each position (the slice's axes are one chunk).
        let chunk = |d: usize| place.get(d).map_or(0, |&p| locate(&starts[d], p).0);
        let which: Vec<usize> = (0..starts.len()).map(chunk).collect();
        return Err(GatherError::InvalidArgument(format!(
            "gather over chunks: an index reads chunk {} of the grid, which was not given",
            fmt_tuple(&which)
        )));
    }
    Err(GatherError::IndicesModified)
}

/// Everything a run of rows reads.
struct Walk<'p, 'a> {
    /// The output rows, numbered over every axis of the grid.
    rows: GridRows<'p>,
    ready: &'p [Ready<'a>],
    slice_start: usize,
    row_bytes: usize,
    /// The place in `ready` of each chunk of a small grid ([`ZERO_ROW`]:
    /// not given), instead of a binary search.
    dense: Option<&'p [u32]>,
    /// Bytes of a slice worth prefetching.
    prefetch_bytes: usize,
    /// The conversion of every element, if any (`dtype=`).
    cast: Option<Cast>,
    /// The flat loops, which take the rows when the call has their shape.
    flat: Option<Flat<'p>>,
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
        if let Some(flat) = &self.flat {
            return flat.copy::<T, CLIP, ZERO>(start, out);
        }
        let mut coords = Coords::new(&self.rows.axes, start);
        let mut place = vec![0; self.slice_start];
        let mut sources = [(std::ptr::null::<u8>(), ZERO_ROW); BLOCK];
        let mut cached: Option<usize> = None;
        let mut row = start;
        for part in out.chunks_mut(BLOCK * self.row_bytes) {
            let n = part.len() / self.row_bytes;
            for source in &mut sources[..n] {
                *source = self.source::<T, CLIP, ZERO>(&coords, &mut place, &mut cached, row)?;
                coords.step(&self.rows.axes);
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
        coords: &Coords,
        place: &mut [usize],
        cached: &mut Option<usize>,
        row: usize,
    ) -> std::result::Result<(*const u8, u32), Stop> {
        // SAFETY: `coords` is an output row of this call, a row of `rows`.
        let chunk = unsafe { self.rows.chunk::<T, CLIP, ZERO>(coords, place) };
        let Some(id) = chunk.map_err(|()| Stop::Bad)? else {
            return Ok((std::ptr::null(), ZERO_ROW));
        };
        let found = match (self.dense, *cached) {
            (Some(dense), _) => Some(dense[id as usize])
                .filter(|&k| k != ZERO_ROW)
                .map(|k| k as usize),
            (None, Some(k)) if self.ready[k].id == id => Some(k),
            (None, _) => self.ready.binary_search_by_key(&id, |r| r.id).ok(),
        };
        let Some(k) = found else {
            return Err(Stop::missing(row, place));
        };
        *cached = Some(k);
        let chunk = &self.ready[k];
        let at = place
            .iter()
            .zip(chunk.view.strides)
            .fold(0isize, |at, (&p, &s)| {
                at.wrapping_add((p as isize).wrapping_mul(s))
            });
        // In bounds: `place` lies in this chunk on the leading axes (its
        // number says so; `base` as `Ready::base` says), and the slice walks
        // the rest whole, so every byte the copy reads from here lies inside
        // the chunk's bytes by the checked-view invariant (b).
        let src = chunk.base.wrapping_offset(at);
        // Into L2, not L1, as `hints::line` says.
        hints::lines(src, self.prefetch_bytes, true);
        Ok((src, k as u32))
    }
}
