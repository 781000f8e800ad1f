//! Arrays with no bytes behind them, for planning without data: a gather
//! prepared for a shape, the whole array a grid of chunks tiles, the shape
//! of indices not yet read. Every stride is 0, so one element of at most 8
//! bytes is all a stand-in spans, and the planner checks shapes and
//! indices against it exactly as against a real array of that shape (its
//! elements are never copied from).

use crate::layout::ArrayView;

/// The bytes of every stand-in.
static BYTES: [u8; 8] = [0; 8];

/// A checked view of `shape` whose every element is the first `itemsize`
/// bytes of [`BYTES`] (`itemsize` at most 8; `zeros` holds a 0 per axis or
/// more).
pub(crate) fn stand_in<'a>(
    shape: &'a [usize],
    zeros: &'a [isize],
    itemsize: usize,
) -> ArrayView<'a> {
    ArrayView {
        bytes: &BYTES,
        offset: 0,
        shape,
        strides: &zeros[..shape.len()],
        itemsize,
    }
}

/// A stand-in that holds its shape, for a shape worked out on the spot.
/// Its elements are one byte (none for an itemsize of 0), whatever the
/// array's: its callers count the array's bytes at the real itemsize
/// themselves, and a stand-in of an absurd itemsize (the Rust API takes
/// any) would not fit [`BYTES`].
pub(crate) struct StandIn {
    shape: Vec<usize>,
    zeros: Vec<isize>,
    itemsize: usize,
}

impl StandIn {
    pub(crate) fn new(shape: &[usize], itemsize: usize) -> Self {
        StandIn {
            shape: shape.to_vec(),
            zeros: vec![0; shape.len()],
            itemsize: itemsize.min(1),
        }
    }

    pub(crate) fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub(crate) fn view(&self) -> ArrayView<'_> {
        stand_in(&self.shape, &self.zeros, self.itemsize)
    }
}
