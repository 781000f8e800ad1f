//! Validation of shapes and attributes, the output shape, and the
//! decomposition of both operators into one walk:
//!
//! ```text
//! for row in rows (C order of the output without the slice axes):
//!     src = data + Σ row coords · data strides + Σ_j resolve(indices[row, j]) · tuple strides
//!     copy the slice at src to output row
//! ```
//!
//! `gather_nd` rows are `indices.shape[:-1]` (batch axes first) with a tuple
//! of `k` indices; `gather` rows are batch, outer (`data.shape[b:axis]`) and
//! `indices.shape[b:]` axes with a tuple of one index.

use crate::convert::Cast;
use crate::error::{GatherError, Result};
use crate::hints::{Ahead, LINE};
use crate::index::IndexType;
use crate::machine::tuning;
use smallvec::SmallVec;

use crate::layout::{ArrayView, Dims, SliceLayout};
use crate::validate::checked_sizes;

mod rules;

pub(crate) use rules::plan_op;
pub use rules::{plan_gather, plan_gather_nd};

/// A result shape, inline for the ranks real calls have.
type Shape = SmallVec<[usize; 8]>;

/// One axis of `data` addressed by a position of the index tuple.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct TupleAxis {
    /// The axis number in `data` (for messages).
    pub axis: usize,
    pub size: usize,
    pub data_stride: isize,
}

/// Which operator a call runs, with its attributes as the caller gave them
/// (what [`plan_gather_nd`] and [`plan_gather`] take): the one description
/// the prepared and the chunked gathers share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    /// `gather_nd(data, indices, batch_dims)`.
    GatherNd {
        /// As for [`plan_gather_nd`].
        batch_dims: i64,
    },
    /// `gather(data, indices, axis, batch_dims)`.
    Gather {
        /// As for [`plan_gather`].
        axis: i64,
        /// As for [`plan_gather`].
        batch_dims: i64,
    },
}

/// Everything the kernel needs, computed once per call, with the arrays it
/// reads: checked views (see the checked-view invariant on [`ArrayView`]),
/// as `plan_gather` and `plan_gather_nd` check both before planning.
#[derive(Clone, Debug)]
pub struct Plan<'a> {
    pub(crate) data: ArrayView<'a>,
    pub(crate) indices: ArrayView<'a>,
    pub(crate) index_type: IndexType,
    pub(crate) out_shape: Shape,
    pub(crate) out_bytes: usize,
    /// The copy walk: output rows in C order, coalesced.
    pub(crate) rows: Dims,
    pub(crate) n_rows: usize,
    /// The validation walk: every distinct stored index position once, in C
    /// order of `indices` (the rows without gather's outer axes), coalesced;
    /// see [`index_walk`].
    pub(crate) index_rows: Dims,
    pub(crate) n_index_rows: usize,
    /// How many leading axes of `indices` a flat index-row number unravels
    /// over, for messages: all but the last for gather_nd, all for gather.
    pub(crate) position_rank: usize,
    pub(crate) tuple: SmallVec<[TupleAxis; 4]>,
    /// Byte stride between the elements of one index tuple.
    pub(crate) tuple_stride: isize,
    pub(crate) slice: SliceLayout,
    pub(crate) slice_bytes: usize,
    pub(crate) is_nd: bool,
    /// The number of batch axes, normalised (a negative `batch_dims`
    /// counted from the end): the leading axes of `data` and `indices`
    /// that are walked together.
    pub(crate) batch_dims: usize,
    /// Whether the output is so much larger than the caches that rows are
    /// written with non-temporal stores (see `copy`).
    pub(crate) stream: bool,
    /// Whether a negative index counts from the end of its axis (else it
    /// is out of range, as in ONNX Gather-1 and OpenVINO Gather-1/7).
    pub(crate) wrap_negative: bool,
    /// Whether `data` is too large for the caches, so that asking for the
    /// next rows' bytes ahead of time pays.
    pub(crate) prefetch: bool,
    /// The conversion of every element on its way to the output (`dtype=`);
    /// then `slice_bytes` and `out_bytes` count the output type's bytes.
    pub(crate) cast: Option<Cast>,
}

/// Whether a plan writes its output with non-temporal stores: a huge
/// output of contiguous slices of a width the machine streams (`machine`;
/// a short row's non-temporal stores fill no whole line at once).
pub(crate) fn streams(slice: &SliceLayout, out_bytes: usize) -> bool {
    let t = tuning();
    matches!(slice, SliceLayout::Contiguous { bytes } if *bytes >= t.stream_min_slice_bytes)
        && out_bytes >= t.stream_min_out_bytes
}

/// Whether a copy from `data` of `data_bytes` prefetches its rows: beyond
/// a core's L2 cache (`machine`).
pub(crate) fn prefetches(data_bytes: usize) -> bool {
    data_bytes > tuning().prefetch_min_data_bytes
}

impl Plan<'_> {
    /// How far ahead, and into which cache, a copy of this plan's slices
    /// prefetches (only contiguous slices prefetch; a conversion,
    /// `dtype=`, reads slices of another width than it writes).
    #[inline]
    pub(crate) fn ahead(&self) -> Ahead {
        let read = match (&self.slice, self.cast) {
            (SliceLayout::Contiguous { bytes }, Some(_)) => *bytes,
            _ => self.slice_bytes,
        };
        Ahead::new(self.prefetch, self.n_rows, self.data.bytes.len(), read)
            .aligned(read, self.slice_alignment())
            .storing(self.n_rows.saturating_mul(self.slice_bytes))
    }

    /// The largest power of two, at most a line, that the address of every
    /// slice's first byte is a multiple of: that of `data`'s first element
    /// and every stride a row's offset is a sum of multiples of.
    pub(crate) fn slice_alignment(&self) -> usize {
        let first = self.data.first().addr() as isize;
        self.offset_strides().chain([first]).fold(LINE, |align, s| {
            // Zero adds nothing (a first element at address zero is only
            // an empty `data`'s, which no slice is read from).
            if s == 0 {
                align
            } else {
                align.min(1 << s.trailing_zeros().min(LINE.trailing_zeros()))
            }
        })
    }

    /// How far past a line every slice's first byte lies, where that is the
    /// same for all (every stride a row's offset is a sum of multiples of
    /// is a multiple of a line): as far as `data`'s first element. `None`
    /// where slices lie at various offsets in their lines.
    pub(crate) fn slice_phase(&self) -> Option<usize> {
        let mut strides = self.offset_strides();
        strides
            .all(|s| s % LINE as isize == 0)
            .then(|| self.data.first().addr() % LINE)
    }

    /// The strides a row's offset in `data` is a sum of multiples of.
    fn offset_strides(&self) -> impl Iterator<Item = isize> + '_ {
        let strides = self.rows.iter().map(|d| d.data_stride);
        strides.chain(self.tuple.iter().map(|t| t.data_stride))
    }

    /// How many rows past a block the copy of its rows reads offsets of (to
    /// prefetch their slices), so that a kernel computing that many more
    /// offsets first keeps the prefetches going across blocks: only for a
    /// long call from a `data` beyond the caches (a short call paid more
    /// for the extra rounds than it gained). `ahead` is this plan's
    /// [`Plan::ahead`].
    pub(crate) fn lookahead(&self, ahead: Ahead) -> usize {
        match self.slice {
            SliceLayout::Contiguous { .. } if ahead.far => ahead.rows,
            _ => 0,
        }
    }

    /// The shape of the result.
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// The size of the result in bytes.
    pub fn out_bytes(&self) -> usize {
        self.out_bytes
    }

    /// Makes negative indices out of range instead of counting from the
    /// end of their axis (operators whose indices lie in `[0, s)`).
    pub fn reject_negative_indices(mut self) -> Self {
        self.wrap_negative = false;
        self
    }

    /// Makes the plan convert each element with `cast` as it gathers: the
    /// result holds `cast.to()` elements (`out_bytes` grows accordingly),
    /// each equal to NumPy's `astype` of the element gathered. `data`'s
    /// elements must be of `cast.from()`'s size.
    pub fn with_cast(mut self, cast: Cast) -> Result<Self> {
        let (from, to) = (cast.from().size(), cast.to().size());
        if self.data.itemsize != from {
            return Err(GatherError::InvalidArgument(format!(
                "a cast from {:?} reads {from}-byte elements, but data's are {} bytes",
                cast.from(),
                self.data.itemsize
            )));
        }
        // NumPy's bound on the output at the wider type; the slice, a
        // part of it, then fits too.
        self.out_bytes = checked_sizes(&self.out_shape, to)?;
        self.slice_bytes = self.slice_bytes / from * to;
        // The conversion writes through the cache (no streaming stores).
        self.stream = false;
        self.cast = Some(cast);
        Ok(self)
    }

    /// Bytes a call moves: the result written plus the indices read.
    pub fn work_bytes(&self) -> usize {
        let reads = self
            .n_rows
            .max(self.n_index_rows)
            .saturating_mul(self.tuple.len());
        self.out_bytes
            .saturating_add(reads.saturating_mul(self.index_type.itemsize()))
    }
}

/// How many positions of an axis of `indices` hold distinct stored values:
/// one for a broadcast axis (stride 0, as `np.broadcast_to` makes), which may
/// be of any length without a byte behind each position.
pub(crate) fn distinct_positions(size: usize, stride: isize) -> usize {
    if stride == 0 {
        size.min(1)
    } else {
        size
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
