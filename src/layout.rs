//! Strided views over raw bytes: what an array is to the core, the memory
//! span it may touch, and the merging of dimensions that iterate alike.

use smallvec::SmallVec;

use crate::error::{GatherError, Result};

/// The axes of a walk. Inline up to the ranks real calls have, so that
/// planning a small call allocates nothing.
pub(crate) type Dims = SmallVec<[Dim; 6]>;

/// An N-dimensional array as the core sees it: bytes, where element
/// `[0, ..., 0]` starts, and the byte stride of every axis (any sign).
///
/// # The checked-view invariant
///
/// A *checked view* is one that [`ArrayView::check`] accepted; every
/// [`Plan`](crate::Plan)'s `data` and `indices` are checked views, since the
/// only ways to make a plan check both first. A checked view guarantees:
///
/// - **(a)** `offset <= bytes.len()`, so `bytes.as_ptr().add(offset)` points
///   into `bytes` or just past its end, even for an empty view;
/// - **(b)** for every position `p` with `p[k] < shape[k]` on each axis, the
///   `itemsize` bytes at `offset + Σ p[k] * strides[k]` lie inside `bytes`.
///
/// The kernels' `unsafe` code indexes views through raw pointers with no
/// bounds checks of its own; its SAFETY comments cite this invariant by
/// name: an in-range position of a checked view never addresses a byte
/// outside its `bytes`.
#[derive(Clone, Copy, Debug)]
pub struct ArrayView<'a> {
    /// Every byte the array may touch (see [`span`]).
    pub bytes: &'a [u8],
    /// Byte offset of element `[0, ..., 0]` within `bytes`.
    pub offset: usize,
    /// Elements along each axis.
    pub shape: &'a [usize],
    /// Byte strides, one per axis; negative for reversed axes.
    pub strides: &'a [isize],
    /// Bytes per element.
    pub itemsize: usize,
}

/// The bytes an array with this geometry touches, relative to element
/// `[0, ..., 0]`: `(lowest offset, length)`. `(0, 0)` for an empty array.
/// `None` if the extent does not fit `isize`.
pub fn span(shape: &[usize], strides: &[isize], itemsize: usize) -> Option<(isize, usize)> {
    if shape.contains(&0) {
        return Some((0, 0));
    }
    let (mut lo, mut hi) = (0isize, 0isize);
    for (&n, &s) in shape.iter().zip(strides) {
        let reach = isize::try_from(n - 1).ok()?.checked_mul(s)?;
        if reach < 0 {
            lo = lo.checked_add(reach)?;
        } else {
            hi = hi.checked_add(reach)?;
        }
    }
    let len = hi
        .checked_sub(lo)?
        .checked_add(isize::try_from(itemsize).ok()?)?;
    Some((lo, usize::try_from(len).ok()?))
}

impl<'a> ArrayView<'a> {
    /// The address of element `[0, ..., 0]`, from which the strides count
    /// (a plain address: reading through it needs the checked-view
    /// invariant).
    #[inline(always)]
    pub(crate) fn first(&self) -> *const u8 {
        self.bytes.as_ptr().wrapping_add(self.offset)
    }

    /// Establishes the checked-view invariant (see [`ArrayView`]): every
    /// element of the view lies inside `bytes`, so the kernels may index it
    /// without further bounds checks, and `offset` lies within `bytes` (or
    /// just past it) even for an empty view.
    pub fn check(&self, what: &str) -> Result<()> {
        if self.shape.len() != self.strides.len() {
            return Err(GatherError::InvalidArgument(format!(
                "{what} has {} dimensions but {} strides",
                self.shape.len(),
                self.strides.len()
            )));
        }
        let bad =
            || GatherError::InvalidArgument(format!("{what} strides reach outside its buffer"));
        if self.offset > self.bytes.len() {
            return Err(bad());
        }
        let (lo, len) = span(self.shape, self.strides, self.itemsize).ok_or_else(bad)?;
        if len == 0 {
            return Ok(());
        }
        let start = isize::try_from(self.offset).map_err(|_| bad())? + lo;
        if start < 0 || start as usize + len > self.bytes.len() {
            return Err(bad());
        }
        Ok(())
    }
}

/// One axis of an iteration that walks `data` and `indices` together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Dim {
    pub size: usize,
    pub data_stride: isize,
    pub index_stride: isize,
}

/// Drops axes of size 1 and merges neighbours that step through both arrays
/// as one longer axis would. The C-order enumeration of positions is kept,
/// so a flat row number means the same before and after. An iteration with
/// an empty axis becomes a single axis of size 0.
pub(crate) fn coalesce(dims: impl IntoIterator<Item = Dim>) -> Dims {
    // One pass over the axes as they are produced: planning a small call
    // should cost little next to the Python call around it.
    let mut out = Dims::new();
    for d in dims {
        if d.size == 0 {
            out.clear();
            out.push(Dim {
                size: 0,
                data_stride: 0,
                index_stride: 0,
            });
            return out;
        }
        if d.size == 1 {
            continue;
        }
        if let Some(prev) = out.last_mut() {
            // Checked: the strides of an empty `data` are never checked
            // against a buffer, so `stride * size` may not fit (and then
            // the axes do not merge).
            let n = d.size as isize;
            if Some(prev.data_stride) == d.data_stride.checked_mul(n)
                && Some(prev.index_stride) == d.index_stride.checked_mul(n)
            {
                prev.size *= d.size;
                prev.data_stride = d.data_stride;
                prev.index_stride = d.index_stride;
                continue;
            }
        }
        out.push(d);
    }
    out
}

/// How one gathered slice lies in `data`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum SliceLayout {
    /// `bytes` consecutive bytes (the slice is C-contiguous in `data`).
    Contiguous { bytes: usize },
    /// Runs of `run` consecutive bytes at the positions of `outer`
    /// (size, byte stride), in C order.
    Strided {
        run: usize,
        outer: SmallVec<[(usize, isize); 4]>,
    },
}

impl SliceLayout {
    /// The layout of the trailing axes `shape`/`strides` of `data`.
    pub fn new(shape: &[usize], strides: &[isize], itemsize: usize) -> Self {
        let dims = coalesce(shape.iter().zip(strides).map(|(&size, &data_stride)| Dim {
            size,
            data_stride,
            index_stride: 0,
        }));
        let elems: usize = dims.iter().map(|d| d.size).product();
        match dims.as_slice() {
            [] => SliceLayout::Contiguous { bytes: itemsize },
            [.., last] if last.size == 0 => SliceLayout::Contiguous { bytes: 0 },
            [only] if only.data_stride == itemsize as isize => SliceLayout::Contiguous {
                bytes: elems * itemsize,
            },
            [outer @ .., last] if last.data_stride == itemsize as isize => SliceLayout::Strided {
                run: last.size * itemsize,
                outer: outer.iter().map(|d| (d.size, d.data_stride)).collect(),
            },
            all => SliceLayout::Strided {
                run: itemsize,
                outer: all.iter().map(|d| (d.size, d.data_stride)).collect(),
            },
        }
    }
}

/// Calls `f(at)` with the byte offset, from the slice's start, of each run
/// of a strided slice whose runs lie at the positions of `outer` (size,
/// byte stride), in C order: the one walk of every strided copy.
#[inline(always)]
pub(crate) fn for_each_run(outer: &[(usize, isize)], mut f: impl FnMut(isize)) {
    let runs: usize = outer.iter().map(|o| o.0).product();
    let mut coords: SmallVec<[usize; 8]> = smallvec::smallvec![0; outer.len()];
    let mut at = 0isize;
    for _ in 0..runs {
        f(at);
        for (c, &(n, stride)) in coords.iter_mut().zip(outer).rev() {
            *c += 1;
            at += stride;
            if *c < n {
                break;
            }
            at -= stride * n as isize;
            *c = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_of_reversed_axis() {
        assert_eq!(span(&[3, 2], &[-8, 4], 4), Some((-16, 24)));
        assert_eq!(span(&[3, 0], &[-8, 4], 4), Some((0, 0)));
        assert_eq!(span(&[], &[], 2), Some((0, 2)));
    }

    #[test]
    fn check_rejects_views_outside_buffer() {
        let bytes = [0u8; 24];
        let ok = ArrayView {
            bytes: &bytes,
            offset: 16,
            shape: &[3, 2],
            strides: &[-8, 4],
            itemsize: 4,
        };
        assert!(ok.check("data").is_ok());
        let bad = ArrayView { offset: 8, ..ok };
        assert!(bad.check("data").is_err());
    }

    #[test]
    fn coalesce_merges_c_contiguous_axes() {
        let d = |size, data_stride, index_stride| Dim {
            size,
            data_stride,
            index_stride,
        };
        assert_eq!(
            coalesce([d(2, 24, 0), d(3, 8, 0)]).as_slice(),
            &[d(6, 8, 0)]
        );
        assert_eq!(
            coalesce([d(2, 8, 0), d(3, 16, 0)]).as_slice(),
            &[d(2, 8, 0), d(3, 16, 0)]
        );
        assert_eq!(
            coalesce([d(1, 99, 99), d(4, 8, 8)]).as_slice(),
            &[d(4, 8, 8)]
        );
        assert_eq!(coalesce([d(2, 8, 8), d(0, 8, 8)]).as_slice(), &[d(0, 0, 0)]);
    }

    #[test]
    fn slice_layouts() {
        assert_eq!(
            SliceLayout::new(&[], &[], 4),
            SliceLayout::Contiguous { bytes: 4 }
        );
        assert_eq!(
            SliceLayout::new(&[2, 3], &[12, 4], 4),
            SliceLayout::Contiguous { bytes: 24 }
        );
        assert_eq!(
            SliceLayout::new(&[2, 3], &[16, 4], 4),
            SliceLayout::Strided {
                run: 12,
                outer: smallvec::smallvec![(2, 16)]
            }
        );
        assert_eq!(
            SliceLayout::new(&[3], &[-4], 4),
            SliceLayout::Strided {
                run: 4,
                outer: smallvec::smallvec![(3, -4)]
            }
        );
        assert_eq!(
            SliceLayout::new(&[0, 3], &[12, 4], 4),
            SliceLayout::Contiguous { bytes: 0 }
        );
    }
}
