//! The gather of the flat loops: each tuple's row copied from its chunk.

use std::ops::Range;

use super::{lookups, resolve_tuple, TupleAxis, Tuples, FLAT_MAX_AXES};
use crate::chunked::ready::{Ready, Stop, ZERO_ROW};
use crate::copy::copy_contiguous;
use crate::copy::stream_copy;
use crate::hints::{fence, Ahead};
use crate::index::IndexElem;
use crate::layout::SliceLayout;
use crate::offsets::prefetch_row;
use crate::plan::streams;

/// A chunk as the flat gather addresses it: the slice at resolved
/// positions `p` starts at `base + sum(p[j] * strides[j])` (`Ready::base`).
struct FlatChunk {
    base: *const u8,
    strides: [isize; FLAT_MAX_AXES],
}

/// Rows whose sources are found at a time (as the one-shot kernel's
/// `CHUNK`).
const CHUNK: usize = 64;

/// Sources found and not yet copied are kept in a ring of this many:
/// at most `ahead` (`machine::Tuning::far_prefetch_lines` lines' worth of rows, at most
/// `RING - CHUNK`) plus a chunk.
const RING: usize = 256;

/// The flat gather of a chunked call.
pub(in crate::chunked) struct Flat<'p> {
    at: Tuples,
    axes: Vec<TupleAxis>,
    /// Per grid number, the chunk's place in `chunks` ([`ZERO_ROW`]: not
    /// given).
    dense: &'p [u32],
    chunks: Vec<FlatChunk>,
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
    /// `data`), `ready` the given chunks, then the bytes of a row and of the
    /// output; every slice must be contiguous.
    pub(in crate::chunked) fn new(
        (at, axes): (Tuples, Vec<TupleAxis>),
        ready: &[Ready<'_>],
        dense: &'p [u32],
        (row_bytes, out_bytes): (usize, usize),
    ) -> Option<Self> {
        let chunks = ready.iter().map(|r| {
            let mut strides = [0isize; FLAT_MAX_AXES];
            strides[..axes.len()].copy_from_slice(&r.view.strides[..axes.len()]);
            let chunk = FlatChunk {
                base: r.base,
                strides,
            };
            matches!(r.slice, SliceLayout::Contiguous { .. }).then_some(chunk)
        });
        let chunks = chunks.collect::<Option<_>>()?;
        Some(Flat {
            at,
            axes,
            dense,
            chunks,
            row_bytes,
            // As the one-shot kernel's long walks, in rows of this width.
            ahead: Ahead::new(true, usize::MAX, 0, row_bytes)
                .rows
                .min(RING - CHUNK),
            stream: streams(&SliceLayout::Contiguous { bytes: row_bytes }, out_bytes),
        })
    }

    /// Copies rows `start..` into `out` (whole rows), each straight from its
    /// chunk.
    pub(in crate::chunked) fn copy<T: IndexElem, const CLIP: bool, const ZERO: bool>(
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
    /// `hints::line` for why L2).
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
                            return Err(Stop::missing(start + r, &pos));
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
                        prefetch_row::<false>(src, 0, self.row_bytes, true, true);
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
}

/// Copies rows `rows` (of `width` bytes) from their sources in `ring` (as
/// `Flat::copy_k` found them: null for a zero-filled row) into `out`, with
/// non-temporal stores if `STREAM`. A separate loop for each kind of store:
/// a test of the kind in the loop cost the copy of points dearly.
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
            unsafe { copy_contiguous(src, dst) };
        }
    }
}
