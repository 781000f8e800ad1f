//! Prepared gathers: the indices of a gather checked and resolved once, for
//! a shape of `data`, into the position of each output row's slice; then
//! gathered from any number of arrays of that shape, of any element size
//! and strides, without reading an index again.
//!
//! A row's *position* is the C-order number of its slice's first element
//! among the leading axes of `data`, the ones a row addresses (batch, outer
//! and indexed axes; the slice axes follow them). Positions are made by the
//! one-shot plan itself, over a stand-in `data` whose strides are the
//! leading axes' element strides: the same checks, the same errors, the same
//! resolution of negative and out-of-range indices. At call time a position
//! becomes a byte offset, times one stride when the array's leading strides
//! are proportional to the element strides (C-contiguous arrays and most
//! slices of them), else by unravelling it over the leading axes, and the
//! slices are copied by the one-shot copy routines.
//!
//! A large gather of short slices (points) is bound by reads from random
//! addresses. Prepared, it can afford to order its positions by address
//! once, with the output row of each: a call then reads `data` almost in
//! order (pages and cache lines used back to back) and scatters the short
//! slices into the output, which costs less than reading at random.

use smallvec::SmallVec;

mod call;
mod order;
mod positions;

pub use call::PreparedCall;
use order::{by_address, is_permutation};
pub use positions::Positions;
use positions::{count, with_capacity, Word};

use crate::error::{GatherError, Result};
use crate::index::IndexType;
use crate::kernel::BLOCK;
use crate::layout::ArrayView;
use crate::mode::Mode;
use crate::offsets::{BadRow, ZERO_FILL};
use crate::plan::{plan_op, Operator, Plan};
use crate::split::split_rows;
use crate::stand_in::stand_in;

/// A gather whose indices were checked and resolved for one shape of
/// `data` (see the module's text). Immutable: shared by any number of
/// threads at once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    op: Operator,
    mode: Mode,
    data_shape: Vec<usize>,
    index_shape: Vec<usize>,
    index_type: IndexType,
    /// Zeros, one per axis of `data` or of `indices`: the stand-ins'
    /// strides.
    zeros: Vec<isize>,
    out_shape: Vec<usize>,
    /// The number of leading axes of `data` a position counts over.
    lead: usize,
    /// One per output row; none when the output is empty. In address
    /// order when `order` is given, else in the order of the rows.
    positions: Positions,
    /// When positions are in address order: the output row of each (a
    /// permutation of the rows).
    order: Option<Vec<u32>>,
}

impl Prepared {
    /// Checks `indices` for a gather `op` from `data` of `shape` and resolves
    /// them, with `threads` threads at most. Fails exactly as the one-shot
    /// gather from such `data` would (its size in bytes aside: the stand-in
    /// has one-byte elements), and with `OutOfMemory` if the positions
    /// cannot be held.
    pub fn new(
        op: Operator,
        shape: &[usize],
        indices: ArrayView<'_>,
        index_type: IndexType,
        mode: Mode,
        threads: usize,
    ) -> Result<Prepared> {
        let (mut prepared, rows) = Prepared::planned(op, shape, indices, index_type, mode)?;
        let lead = prepared.lead;
        let walk = element_strides(shape, lead);
        let data = stand_in(shape, &prepared.zeros, 1);
        let plan = plan_op(op, data, indices, index_type, Some(&walk))?;
        if rows == 0 {
            // No row to copy: only the indices' check remains, as in a
            // one-shot call with an empty output.
            plan.validate(mode, threads)?;
        } else if count(&shape[..lead]) > u32::MAX as usize {
            prepared.positions = Positions::U64(resolve::<u64>(&plan, mode, threads)?);
        } else {
            let positions = resolve::<u32>(&plan, mode, threads)?;
            let sorted = by_address(positions, shape, lead, threads, &mut prepared.order)?;
            prepared.positions = Positions::U32(sorted);
        }
        Ok(prepared)
    }

    /// A prepared gather from its parts (as [`Prepared::parts`] gave them,
    /// say after a trip through a pickle), checked as thoroughly as if they
    /// came from a stranger: the attributes by planning, every position
    /// against the shape. Fails with `InvalidArgument` on parts no
    /// [`Prepared::new`] could have made.
    pub fn from_parts(
        op: Operator,
        shape: &[usize],
        index_shape: &[usize],
        index_type: IndexType,
        mode: Mode,
        positions: Positions,
        order: Option<Vec<u32>>,
    ) -> Result<Prepared> {
        let zeros = vec![0isize; index_shape.len()];
        let indices = stand_in(index_shape, &zeros, index_type.itemsize());
        let (mut prepared, rows) = Prepared::planned(op, shape, indices, index_type, mode)?;
        let elements = count(&shape[..prepared.lead]);
        // 64-bit words exactly when 32 bits cannot hold every position and
        // the mark (either when there is no row).
        let wide = elements > u32::MAX as usize;
        let fits = |p: usize, mark: bool| (mark && mode == Mode::Zero) || (!mark && p < elements);
        let ok = positions.len() == rows
            && (rows == 0 || matches!(positions, Positions::U64(_)) == wide)
            && match &positions {
                Positions::U32(v) => v.iter().all(|&p| fits(p.get(), p.is_mark())),
                Positions::U64(v) => v.iter().all(|&p| fits(p.get(), p.is_mark())),
            }
            && order.as_ref().is_none_or(|o| is_permutation(o, rows));
        if !ok {
            return Err(GatherError::InvalidArgument(
                "its positions do not fit its shape".into(),
            ));
        }
        prepared.positions = positions;
        prepared.order = order;
        Ok(prepared)
    }

    /// The gather `op` from `indices` for `data` of `shape`, its positions
    /// not yet resolved, and its number of rows (0 when its output is
    /// empty): planned over a stand-in `data`, with the one-shot checks and
    /// errors.
    fn planned(
        op: Operator,
        shape: &[usize],
        indices: ArrayView<'_>,
        index_type: IndexType,
        mode: Mode,
    ) -> Result<(Prepared, usize)> {
        let zeros = vec![0isize; shape.len().max(indices.shape.len())];
        let plan = plan_op(op, stand_in(shape, &zeros, 1), indices, index_type, None)?;
        let rows = if plan.out_shape.contains(&0) {
            0
        } else {
            plan.n_rows
        };
        let prepared = Prepared {
            op,
            mode,
            data_shape: shape.to_vec(),
            index_shape: indices.shape.to_vec(),
            index_type,
            out_shape: plan.out_shape.to_vec(),
            // The tuple is never empty: its last axis ends the leading ones.
            lead: plan.tuple.last().map_or(0, |t| t.axis + 1),
            zeros,
            positions: Positions::U32(Vec::new()),
            order: None,
        };
        Ok((prepared, rows))
    }

    /// The parts [`Prepared::from_parts`] takes: operator, data shape,
    /// index shape, index type, mode, positions, order.
    pub fn parts(&self) -> PreparedParts<'_> {
        (
            self.op,
            &self.data_shape,
            &self.index_shape,
            self.index_type,
            self.mode,
            &self.positions,
            self.order.as_deref(),
        )
    }

    /// The shape of `data` the gather was prepared for.
    pub fn data_shape(&self) -> &[usize] {
        &self.data_shape
    }

    /// The shape of every result.
    pub fn out_shape(&self) -> &[usize] {
        &self.out_shape
    }

    /// What the gather does with an index outside its axis.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The bytes this value holds: itself, its positions and its shapes.
    pub fn nbytes(&self) -> usize {
        let words = self.data_shape.len() + self.index_shape.len() + self.out_shape.len();
        std::mem::size_of::<Self>()
            + self.positions.bytes()
            + self.order.as_ref().map_or(0, |o| o.len() * 4)
            + (words + self.zeros.len()) * std::mem::size_of::<usize>()
    }
}

/// What [`Prepared::parts`] gives: operator, data shape, index shape, index
/// type, mode, positions and, when they are in address order, the output
/// row of each.
pub type PreparedParts<'a> = (
    Operator,
    &'a [usize],
    &'a [usize],
    IndexType,
    Mode,
    &'a Positions,
    Option<&'a [u32]>,
);

/// The C-order element strides of the `lead` leading axes of `shape`, and
/// zeros for the others (which no row walks).
fn element_strides(shape: &[usize], lead: usize) -> SmallVec<[isize; 8]> {
    let mut strides: SmallVec<[isize; 8]> = SmallVec::from_elem(0, shape.len());
    let mut step = 1usize;
    for a in (0..lead).rev() {
        // No overflow: a product of axes of `shape`, bounded by isize::MAX
        // when none is empty (the planners' check) and 0 otherwise.
        strides[a] = step as isize;
        step = step.saturating_mul(shape[a]);
    }
    strides
}

/// Resolves every output row's position: `plan` walks the stand-in with
/// element strides, so its offsets are positions; the one-shot check finds
/// the error of a bad index.
fn resolve<W: Word>(plan: &Plan<'_>, mode: Mode, threads: usize) -> Result<Vec<W>> {
    let n = plan.n_rows;
    let mut positions: Vec<W> = with_capacity(n)?;
    positions.resize(n, W::MARK);
    let reads = plan.tuple.len() * plan.index_type.itemsize();
    let cost = n.saturating_mul(reads + std::mem::size_of::<W>());
    // Positions of rows `start..start + words.len()`, a block at a time.
    let fill = |start: usize, words: &mut [W]| {
        let mut offsets = [0isize; BLOCK];
        for (i, block) in words.chunks_mut(BLOCK).enumerate() {
            let offsets = &mut offsets[..block.len()];
            plan.row_offsets(mode, start + i * BLOCK, offsets)?;
            for (w, &off) in block.iter_mut().zip(offsets.iter()) {
                // A valid row's offset is its position: a non-negative
                // number below the count of leading elements.
                *w = if off == ZERO_FILL {
                    W::MARK
                } else {
                    W::from_offset(off as usize)
                };
            }
        }
        Ok(())
    };
    match split_rows(threads, n, cost, 1, &mut positions, &fill) {
        Ok(()) => Ok(positions),
        // The first bad index in C order, as a one-shot call reports it.
        Err(BadRow) => plan.report_bad(mode, threads).map(|()| positions),
    }
}

#[cfg(test)]
#[path = "prepared_tests.rs"]
mod tests;
