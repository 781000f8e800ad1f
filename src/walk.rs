//! An odometer over coalesced axes: walks rows in C order and keeps the
//! byte offsets into `data` and `indices` up to date by addition only.

use smallvec::{smallvec, SmallVec};

use crate::layout::Dim;

pub(crate) struct Odometer {
    coords: SmallVec<[usize; 8]>,
    pub data_off: isize,
    pub index_off: isize,
}

impl Odometer {
    /// Positioned at flat row `row` of `dims` (C order).
    pub fn new(dims: &[Dim], mut row: usize) -> Self {
        let mut coords: SmallVec<[usize; 8]> = smallvec![0; dims.len()];
        let (mut data_off, mut index_off) = (0isize, 0isize);
        for (c, d) in coords.iter_mut().zip(dims).rev() {
            // Row 0 (every call on one thread starts there) is all zeros:
            // no divisions, which cost more than the rest of a small call's walk.
            if d.size == 0 || row == 0 {
                break;
            }
            *c = row % d.size;
            row /= d.size;
            data_off += *c as isize * d.data_stride;
            index_off += *c as isize * d.index_stride;
        }
        Odometer {
            coords,
            data_off,
            index_off,
        }
    }

    /// Rows left before the innermost axis wraps (at least 1 while rows
    /// remain).
    #[inline(always)]
    pub fn inner_left(&self, dims: &[Dim]) -> usize {
        match (self.coords.last(), dims.last()) {
            (Some(&c), Some(d)) => d.size - c,
            _ => 1,
        }
    }

    /// Steps `n` rows along the innermost axis, `n <= inner_left`,
    /// carrying into the outer axes when the innermost one wraps.
    #[inline(always)]
    pub fn skip_inner(&mut self, dims: &[Dim], n: usize) {
        let (Some(c), Some(d)) = (self.coords.last_mut(), dims.last()) else {
            return;
        };
        *c += n;
        self.data_off += d.data_stride * n as isize;
        self.index_off += d.index_stride * n as isize;
        if *c == d.size {
            let back = d.size as isize;
            self.data_off -= d.data_stride * back;
            self.index_off -= d.index_stride * back;
            *c = 0;
            self.advance(&dims[..dims.len() - 1]);
        }
    }

    /// Steps to the next row of `dims`; with a prefix of the walk's axes,
    /// steps the outer axes only.
    #[inline(always)]
    pub fn advance(&mut self, dims: &[Dim]) {
        for (c, d) in self.coords[..dims.len()].iter_mut().zip(dims).rev() {
            *c += 1;
            self.data_off += d.data_stride;
            self.index_off += d.index_stride;
            if *c < d.size {
                return;
            }
            let back = d.size as isize;
            self.data_off -= d.data_stride * back;
            self.index_off -= d.index_stride * back;
            *c = 0;
        }
    }
}

/// Unravels a flat C-order position over `shape`.
pub(crate) fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut coords = vec![0; shape.len()];
    for (c, &n) in coords.iter_mut().zip(shape).rev() {
        if n > 0 {
            *c = flat % n;
            flat /= n;
        }
    }
    coords
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_in_c_order_from_any_start() {
        let dims = [
            Dim {
                size: 2,
                data_stride: 100,
                index_stride: 1,
            },
            Dim {
                size: 3,
                data_stride: 10,
                index_stride: 1000,
            },
        ];
        let mut od = Odometer::new(&dims, 2);
        let mut seen = vec![];
        for _ in 2..6 {
            seen.push((od.data_off, od.index_off));
            od.advance(&dims);
        }
        assert_eq!(seen, vec![(20, 2000), (100, 1), (110, 1001), (120, 2001)]);
    }

    #[test]
    fn unravel_matches_numpy() {
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(0, &[]), Vec::<usize>::new());
    }
}
