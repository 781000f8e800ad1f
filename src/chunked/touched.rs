//! The chunks a list of indices reads, found before any is read, so that
//! a caller fetches only those.

use std::ops::Range;
use std::sync::Mutex;

use smallvec::SmallVec;

use super::flat;
use super::grid::{bounds, chunk_tables, grid_strides};
use super::{check_indices, row_axes, Coords, GridRows, Whole};
use crate::error::{GatherError, Result};
use crate::index::{with_index_type, IndexType};
use crate::layout::ArrayView;
use crate::mode::Mode;
use crate::plan::{plan_op, Operator};
use crate::split::split_ranges;
use crate::stand_in::StandIn;
use crate::threads::ReadShared;
use crate::walk::unravel;

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
    let plan = plan_op(op, data.view(), indices, ty, None)?;
    let b = plan.batch_dims;
    // Index positions only: gather's outer axes choose no chunk of the
    // indexed axes, and the batch axes' chunks are reported with them.
    let mut axes = row_axes(&plan);
    axes.retain(|r| r.data_axis.is_none_or(|a| a < b));
    let n: usize = axes.iter().map(|a| a.size).product();
    // Chunks are numbered in C order over the batch and indexed axes (every
    // other axis counted as one chunk).
    let dims: SmallVec<[usize; 8]> = (0..b).chain(plan.tuple.iter().map(|t| t.axis)).collect();
    let count = |a: usize| starts[a].len() - 1;
    let counts = (0..starts.len()).map(|a| if dims.contains(&a) { count(a) } else { 1 });
    let (strides, total) = grid_strides(counts)?;
    let rows = GridRows {
        plan: &plan,
        axes,
        starts: &starts,
        // Tabled up to the last indexed axis: no row places the slice's.
        tables: chunk_tables(&starts, dims[dims.len() - 1] + 1),
        strides,
    };
    // A flat list of tuples (no batch axes): the scan needs no coordinates.
    // SAFETY: the raw addresses of `Tuples` are those of the checked
    // indices view the plan borrows (shared, read-only) while the scan's
    // tasks run.
    let flat = rows.flat(total).map(|f| unsafe { ReadShared::new(f) });
    // The scan checks every index as it resolves it: the indices are read
    // once. Only when one is bad does the plan's own check run, for the
    // one-shot function's error (the first bad index in C order).
    let (seen, bad) = with_index_type!(ty, T => {
        // The chunks read by index positions `part` (C order), and whether
        // one of them addresses nothing outside mode "zero".
        let scan = |part: Range<usize>| -> (Seen, bool) {
            let mut seen = Seen::new(total);
            if let (Some(flat), Seen::Bits(bits)) = (&flat, &mut seen) {
                // SAFETY: `part` are positions of the checked indices, each
                // a tuple (`GridRows::flat`).
                let bad = unsafe { flat::scan::<T>(&flat.0, &flat.1, mode, part, bits) };
                return (seen, bad.is_err());
            }
            let mut coords = Coords::new(&rows.axes, part.start);
            let mut place = vec![0; starts.len()];
            let mut last = None;
            for _ in part {
                // SAFETY: `coords` is one of `part`, rows of `rows.axes`.
                // Out-of-range indices read nothing here (`ZERO`); outside
                // mode "zero", that is the error.
                let chunk = unsafe {
                    if mode == Mode::Clip {
                        rows.chunk::<T, true, true>(&coords, &mut place)
                    } else {
                        rows.chunk::<T, false, true>(&coords, &mut place)
                    }
                };
                match chunk {
                    Ok(Some(id)) if last != Some(id) => {
                        seen.insert(id);
                        last = Some(id);
                    }
                    Ok(Some(_)) => {}
                    Ok(None) if mode == Mode::Zero => {}
                    _ => return (seen, true),
                }
                coords.step(&rows.axes);
            }
            (seen, false)
        };
        // Long lists are scanned in parts on the worker threads, each part
        // into a set of its own, merged as they end.
        let cost = n.saturating_mul(plan.tuple.len() * ty.itemsize() * SCAN_COST);
        let merged: Mutex<Option<(Seen, bool)>> = Mutex::new(None);
        split_ranges(threads, n, cost, &|rows| {
            let (part, bad) = scan(rows);
            let mut all = merged.lock().unwrap_or_else(|e| e.into_inner());
            match all.as_mut() {
                Some((seen, any_bad)) => {
                    seen.merge(part);
                    *any_bad |= bad;
                }
                None => *all = Some((part, bad)),
            }
        });
        let merged = merged.into_inner().unwrap_or_else(|e| e.into_inner());
        merged.unwrap_or_else(|| (Seen::new(total), false))
    });
    if bad {
        check_indices(&plan, mode, threads, whole)?;
        // The check found nothing the scan found: another thread changed
        // the indices meanwhile.
        return Err(GatherError::IndicesModified);
    }
    // A chunk's number unravelled over the grid of the numbered axes.
    let grid: SmallVec<[usize; 8]> = dims.iter().map(|&d| count(d)).collect();
    let coords = |id: u64| unravel(id as usize, &grid);
    Ok(seen.sorted().into_iter().map(coords).collect())
}

/// What scanning an index position costs, per byte of its tuple, in the
/// split's unit (bytes of sequential copying): the scan reads each index
/// once, as a copy of the indices would. In tests, far more, so that the
/// random cases' short lists are split too.
#[cfg(not(test))]
const SCAN_COST: usize = 1;
#[cfg(test)]
const SCAN_COST: usize = 1 << 14;

/// Grids up to this many chunks count touched ones in a bitmap (in tests,
/// a few: the random cases take both ways).
#[cfg(not(test))]
pub(super) const BITMAP_MAX: u64 = 1 << 20;
#[cfg(test)]
pub(super) const BITMAP_MAX: u64 = 4;

/// A set of chunk numbers: a bitmap for grids of up to [`BITMAP_MAX`]
/// chunks, else a hash set (a grid of 10^8 chunks touched at two points
/// costs two).
pub(super) enum Seen {
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
            (mine, theirs) => theirs.sorted().into_iter().for_each(|id| mine.insert(id)),
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
