//! The chunks a list of indices reads, found before any is read, so that
//! a caller fetches only those.

use std::sync::Mutex;

use smallvec::SmallVec;

use super::flat::{self, tuple_axes, Tuples};
use super::grid::{bounds, chunk_of, chunk_tables, grid_strides};
use super::{relocate, row_axes, RowAxis, Whole};
use crate::error::{GatherError, Result};
use crate::index::{with_index_type, IndexElem, IndexType};
use crate::layout::ArrayView;
use crate::mode::Mode;
use crate::offsets::resolve;
use crate::plan::plan_op;
use crate::plan::Operator;
use crate::stand_in::StandIn;
use crate::threads::{for_each_task, ReadShared, MAX_THREADS};

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
        // part into a set of its own, merged after.
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
pub(super) const SCAN_PARALLEL_MIN: usize = 1 << 16;
#[cfg(test)]
pub(super) const SCAN_PARALLEL_MIN: usize = 8;

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
