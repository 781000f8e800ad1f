//! The chunks as the gathers read them: each given chunk checked against
//! the grid and put in order, and the copy of one slice from a chunk.

use super::grid::{grid_strides, Bounds};
use super::ChunkGrid;
use crate::error::{fmt_tuple, GatherError, Result};
use crate::layout::{ArrayView, SliceLayout};

/// A chunk ready to copy from: its view and how a slice lies in it.
pub(super) struct Ready<'a> {
    pub(super) id: u64,
    pub(super) view: ArrayView<'a>,
    /// The address element [0, ..., 0] of the whole array would have if
    /// the chunk extended to it, so that the slice at position `p` (on the
    /// axes before the slice) starts at `base + sum(p[d] * strides[d])`: a
    /// plain address, only ever offset back into the chunk before a read.
    pub(super) base: *const u8,
    pub(super) slice: SliceLayout,
}

/// Checks the given chunks against the grid and sorts them by position;
/// the grid's strides in chunks and its number of chunks.
pub(super) fn ready_chunks<'a>(
    grid: &ChunkGrid<'a>,
    starts: &Bounds,
    slice_start: usize,
) -> Result<(Vec<Ready<'a>>, Vec<u64>, u64)> {
    let bad = |msg: String| GatherError::InvalidArgument(format!("gather over chunks: {msg}"));
    for (a, sizes) in grid.chunk_sizes.iter().enumerate().skip(slice_start) {
        if sizes.len() != 1 {
            return Err(bad(format!(
                "axis {a} is an axis of the gathered slice and must be one chunk, got chunks {}",
                fmt_tuple(sizes)
            )));
        }
    }
    let (strides, cells) = grid_strides(starts.iter().map(|s| s.len() - 1))?;
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
        let back = (0..slice_start)
            .map(|d| (starts[d][coords[d]] as isize).wrapping_mul(view.strides[d]))
            .fold(0isize, isize::wrapping_add);
        ready.push(Ready {
            id,
            view: *view,
            base: view.first().wrapping_offset(back.wrapping_neg()),
            slice: SliceLayout::new(
                &view.shape[slice_start..],
                &view.strides[slice_start..],
                view.itemsize,
            ),
        });
    }
    ready.sort_unstable_by_key(|r| r.id);
    if ready.windows(2).any(|w| w[0].id == w[1].id) {
        return Err(bad("a chunk is given twice".into()));
    }
    Ok((ready, strides, cells))
}

/// Why a run of rows stopped.
pub(super) enum Stop {
    /// An index addresses nothing: the caller reports the first in C order.
    Bad,
    /// A row reads a chunk that was not given (the row, its positions on
    /// the leading axes of `data`).
    Missing(usize, Vec<usize>),
}

impl Stop {
    /// Row `row`, at `place`, reads a chunk that was not given (a call
    /// apart, so that the loops keep this rare path out of their way).
    #[cold]
    pub(super) fn missing(row: usize, place: &[usize]) -> Stop {
        Stop::Missing(row, place.to_vec())
    }
}

/// No chunk: the row is zero-filled (mode "zero").
pub(super) const ZERO_ROW: u32 = u32::MAX;
