//! A prepared gather's call on one `data` array: positions to byte offsets,
//! then the one-shot copy routines, in the rows' order or, for positions in
//! address order, through a small buffer scattered to the rows.

use super::positions::{Positions, Word};
use super::Prepared;
use crate::copy::copy_small;
use crate::error::{fmt_tuple, GatherError, Result};
use crate::hints;
use crate::kernel::{copy_in_rounds, BLOCK};
use crate::layout::{coalesce, ArrayView, Dim, Dims};
use crate::mode::Mode;
use crate::mover::move_block;
use crate::offsets::{BadRow, ZERO_FILL};
use crate::plan::plan_op;
use crate::plan::Plan;
use crate::split::{split_ranges, split_rows, RANDOM_ROW_COST};
use crate::stand_in::stand_in;
use crate::threads::Disjoint;
use crate::validate::check_out_len;

/// Runs `$body` with `$p` the positions of `$call` (a slice of their word)
/// and `$Z` whether a mark is a zero-filled row, a constant in `$body`.
macro_rules! with_words {
    ($call:expr, $p:ident, $Z:ident => $body:expr) => {
        if $call.prepared.mode == Mode::Zero {
            const $Z: bool = true;
            with_words!(@word $call, $p, $body)
        } else {
            const $Z: bool = false;
            with_words!(@word $call, $p, $body)
        }
    };
    (@word $call:expr, $p:ident, $body:expr) => {
        match &$call.prepared.positions {
            Positions::U32($p) => $body,
            Positions::U64($p) => $body,
        }
    };
}

impl Prepared {
    /// Binds the gather to `data`, which must have the prepared shape (any
    /// element size and strides): the call's plan, checked (`data`'s view,
    /// the result's size in bytes) as a one-shot call's is.
    pub fn bind<'a>(&'a self, data: ArrayView<'a>) -> Result<PreparedCall<'a>> {
        if data.shape != self.data_shape.as_slice() {
            return Err(GatherError::InvalidArgument(format!(
                "data has shape {} but the gather was prepared for data of shape {}",
                fmt_tuple(data.shape),
                fmt_tuple(&self.data_shape)
            )));
        }
        let indices = stand_in(&self.index_shape, &self.zeros, self.index_type.itemsize());
        let mut plan = plan_op(self.op, data, indices, self.index_type, None)?;
        if self.order.is_some() {
            // The copy goes to a small buffer that is read back at once
            // (`scatter_rows`): no stores that bypass the cache.
            plan.stream = false;
        }
        // The same shapes plan the same rows: a position each, as `new`
        // made them and `from_parts` checked them (the copies rely on it).
        debug_assert!(plan.out_bytes == 0 || plan.n_rows == self.positions.len());
        let address = Address::new(&data, self.lead);
        Ok(PreparedCall {
            prepared: self,
            plan,
            address,
        })
    }
}

/// How a call turns positions into byte offsets in its `data`.
#[derive(Clone, Debug)]
pub(super) enum Address {
    /// `position * stride`: the leading axes step through `data` as one
    /// axis of this byte stride would (they coalesce into one).
    Scaled(isize),
    /// The position unravelled over the leading axes, coalesced.
    Unravel(Dims),
}

impl Address {
    pub(super) fn new(data: &ArrayView<'_>, lead: usize) -> Address {
        let axes = data.shape[..lead].iter().zip(data.strides);
        let dims = coalesce(axes.map(|(&size, &data_stride)| Dim {
            size,
            data_stride,
            index_stride: 0,
        }));
        match dims.as_slice() {
            [] => Address::Scaled(0),
            [axis] => Address::Scaled(axis.data_stride),
            _ => Address::Unravel(dims),
        }
    }

    /// The byte offset of the slice at `position`, from element `[0, ..., 0]`.
    #[inline(always)]
    fn offset(&self, position: usize) -> isize {
        match self {
            // No overflow: equal to the unravelled sum below, a byte offset
            // of an element of `data`, which fits its span.
            Address::Scaled(stride) => position as isize * stride,
            Address::Unravel(dims) => {
                let mut rest = position;
                let mut off = 0isize;
                for d in dims.iter().rev() {
                    // size > 0: the position exists, so no leading axis is
                    // empty (and coalescing kept none of size 1).
                    off += (rest % d.size) as isize * d.data_stride;
                    rest /= d.size;
                }
                off
            }
        }
    }
}

/// A [`Prepared`] gather bound to one `data` array ([`Prepared::bind`]).
pub struct PreparedCall<'a> {
    pub(super) prepared: &'a Prepared,
    pub(super) plan: Plan<'a>,
    pub(super) address: Address,
}

impl PreparedCall<'_> {
    /// Makes the call convert each element with `cast` as it gathers, as
    /// [`Plan::with_cast`] does for a one-shot call: the result holds
    /// `cast.to()` elements, each equal to NumPy's `astype` of the element
    /// gathered.
    pub fn with_cast(mut self, cast: crate::convert::Cast) -> Result<Self> {
        self.plan = self.plan.with_cast(cast)?;
        Ok(self)
    }

    /// The shape of the result.
    pub fn out_shape(&self) -> &[usize] {
        self.plan.out_shape()
    }

    /// The size of the result in bytes.
    pub fn out_bytes(&self) -> usize {
        self.plan.out_bytes()
    }

    /// Bytes a call moves: the result written plus the positions read.
    pub fn work_bytes(&self) -> usize {
        self.plan
            .out_bytes
            .saturating_add(self.prepared.positions.bytes())
    }

    /// Gathers into `out`, which must hold exactly `out_bytes()` bytes and
    /// must not overlap `data`, with up to `threads` threads. Reads no
    /// index: it cannot fail on one.
    pub fn execute(&self, out: &mut [u8], threads: usize) -> Result<()> {
        check_out_len(out, self.plan.out_bytes)?;
        if self.plan.out_bytes == 0 {
            return Ok(());
        }
        let n = self.plan.n_rows;
        let misses = if self.plan.prefetch { n } else { 0 };
        let cost = self
            .work_bytes()
            .saturating_add(misses.saturating_mul(RANDOM_ROW_COST));
        if let Some(order) = &self.prepared.order {
            self.execute_in_address_order(order, out, threads, cost);
            return Ok(());
        }
        let copy = |start: usize, chunk: &mut [u8]| {
            with_words!(self, p, Z => self.copy_rows::<_, Z>(p, start, chunk));
            Ok(())
        };
        split_rows(threads, n, cost, self.plan.slice_bytes, out, &copy)
            .map_err(|BadRow| GatherError::IndicesModified)
    }

    /// Copies rows `start..` (as many as `out` holds) from their positions,
    /// by the one-shot copy's loop (`kernel::copy_in_rounds`): the same
    /// prefetches ahead, across blocks too.
    fn copy_rows<W: Word, const ZERO: bool>(&self, positions: &[W], start: usize, out: &mut [u8]) {
        let n = out.len() / self.plan.slice_bytes;
        if n <= SMALL_BLOCK {
            self.copy_rows_in::<W, ZERO, SMALL_BLOCK>(&positions[start..start + n], out);
        } else {
            self.copy_rows_in::<W, ZERO, BLOCK>(&positions[start..start + n], out);
        }
    }

    #[inline(always)]
    fn copy_rows_in<W: Word, const ZERO: bool, const B: usize>(
        &self,
        positions: &[W],
        out: &mut [u8],
    ) {
        let mut rest = positions;
        let fill = |offsets: &mut [isize], chunk: usize, ahead: usize| {
            let (now, later) = rest.split_at(offsets.len());
            self.fill_offsets::<W, ZERO>(now, offsets);
            rest = later;
            if ahead > 0 {
                // The chunk after next, as the one-shot copy asks for its
                // indices (`offsets::prefetch_index_rows`): a hint only,
                // past the end it names addresses nothing reads.
                let size = std::mem::size_of::<W>();
                let next = rest.as_ptr().cast::<u8>().wrapping_add(chunk * size);
                hints::lines(next, chunk * size, false);
            }
            Ok(())
        };
        // SAFETY: copy_in_rounds needs each offset to be the start of a
        // slice of `data` (or the zero-fill marker in a ZERO call), and
        // room for the rows in `out`.
        // - Every position that is not the marker is below the count of
        //   leading elements of the prepared shape: `Prepared::new` made
        //   it from a checked index, or `from_parts` checked it. It
        //   unravels to coordinates inside the leading axes, and
        //   `Address::offset` is the byte offset of that element in
        //   `data`, which `bind` checked to have exactly the prepared
        //   shape and to be a checked view (its plan): with the slice
        //   axes at any in-range position, an in-range position of a
        //   checked view, inside its bytes (invariant (b)).
        // - The marker only appears in a Zero gather (`new` writes it
        //   for ZERO only, `from_parts` refuses it otherwise), and ZERO
        //   is set exactly then.
        // - `out` holds positions.len() rows of `sb` bytes (split_rows
        //   hands out whole rows), and does not overlap `data` (caller
        //   of `execute`).
        let copied = unsafe { copy_in_rounds::<ZERO, B>(&self.plan, out, positions.len(), fill) };
        // `fill` never fails: positions are checked, not read from indices.
        debug_assert!(copied.is_ok());
    }
}

impl PreparedCall<'_> {
    /// Gathers every row with positions in address order: each task reads
    /// a range of them and scatters the slices to their rows.
    fn execute_in_address_order(&self, order: &[u32], out: &mut [u8], threads: usize, cost: usize) {
        let n = order.len();
        let base = Disjoint::new(out.as_mut_ptr());
        let run = |range: std::ops::Range<usize>| {
            let rows = &order[range.clone()];
            // SAFETY: `base` is `out`, which holds the plan's n_rows rows;
            // `rows` is a range of a permutation of them, and ranges of
            // different tasks are disjoint, so no two writes meet; `out`
            // does not overlap `data` (caller of `execute`).
            with_words!(self, p, Z => unsafe { self.scatter_rows::<_, Z>(&p[range], rows, &base) })
        };
        split_ranges(threads, n, cost, &run);
    }

    /// Copies the slices at `positions` (a block at a time, by the one-shot
    /// copy, into a small buffer), then each to its output row `rows[i]`.
    ///
    /// # Safety
    /// Every row is below the plan's n_rows, no other thread writes these
    /// rows meanwhile, and `base` addresses `out_bytes` writable bytes that
    /// do not overlap `data`.
    unsafe fn scatter_rows<W: Word, const ZERO: bool>(
        &self,
        positions: &[W],
        rows: &[u32],
        base: &Disjoint<u8>,
    ) {
        let sb = self.plan.slice_bytes;
        let per_block = (SCATTER_BUFFER_BYTES / sb).clamp(1, BLOCK);
        let mut buffer = vec![0u8; per_block * sb];
        let mut offsets = [0isize; BLOCK];
        let ahead = self.plan.ahead();
        for (block, rows) in positions.chunks(per_block).zip(rows.chunks(per_block)) {
            let offsets = &mut offsets[..block.len()];
            self.fill_offsets::<W, ZERO>(block, offsets);
            // SAFETY: the offsets are slices of `data` or zero-fill marks,
            // as in `copy_rows_in` (which says why); the buffer holds
            // per_block >= block.len() rows and is not `data`.
            unsafe {
                move_block::<ZERO>(
                    &self.plan,
                    ahead,
                    offsets,
                    offsets.len(),
                    buffer.as_mut_ptr(),
                )
            };
            for (i, &row) in rows.iter().enumerate() {
                // SAFETY: row i of the buffer, to output row `row` (below
                // n_rows, so inside `out`; caller), which this task alone
                // writes (caller); the two do not overlap.
                unsafe {
                    let src = buffer.as_ptr().add(i * sb);
                    let dst = base.at(row as usize * sb);
                    if sb <= 64 {
                        copy_small(src, dst, sb);
                    } else {
                        std::ptr::copy_nonoverlapping(src, dst, sb);
                    }
                }
            }
        }
    }

    /// The byte offsets of `positions` (the zero-fill marker for a mark).
    #[inline(always)]
    fn fill_offsets<W: Word, const ZERO: bool>(&self, positions: &[W], offsets: &mut [isize]) {
        for (o, &p) in offsets.iter_mut().zip(positions) {
            *o = if ZERO && p.is_mark() {
                ZERO_FILL
            } else {
                self.address.offset(p.get())
            };
        }
    }
}

/// A prepared call's rows for [`crate::pages::prefault`]: its positions'
/// offsets (in address order where the positions are).
impl crate::pages::RowOffsets for PreparedCall<'_> {
    fn offsets(&self, start: usize, out: &mut [isize]) -> bool {
        with_words!(self, p, Z => self.fill_offsets::<_, Z>(&p[start..start + out.len()], out));
        true
    }
}

impl<'a> PreparedCall<'a> {
    /// The plan of the call (its rows, slice and output).
    pub fn plan(&self) -> &Plan<'a> {
        &self.plan
    }
}

/// The buffer a task of an address-order gather copies a block into before
/// scattering it: within the L1 cache.
const SCATTER_BUFFER_BYTES: usize = 16 << 10;

/// Rows of a call small enough for a small offsets buffer.
const SMALL_BLOCK: usize = 32;
