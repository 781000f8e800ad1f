//! An odometer over coalesced axes: walks rows in C order and keeps the
//! byte offsets into `data` and `indices` up to date by addition only.

use crate::layout::Dim;

pub(crate) struct Odometer {
    coords: Vec<usize>,
    pub data_off: isize,
    pub index_off: isize,
}

impl Odometer {
    /// Positioned at flat row `row` of `dims` (C order).
    pub fn new(dims: &[Dim], mut row: usize) -> Self {
        let mut coords = vec![0; dims.len()];
        let (mut data_off, mut index_off) = (0isize, 0isize);
        for (c, d) in coords.iter_mut().zip(dims).rev() {
            if d.size == 0 {
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

    /// Steps to the next row.
    #[inline(always)]
    pub fn advance(&mut self, dims: &[Dim]) {
        for (c, d) in self.coords.iter_mut().zip(dims).rev() {
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
