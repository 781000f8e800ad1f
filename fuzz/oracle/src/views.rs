//! Raw geometry: shapes, strides, offsets, buffer lengths and element sizes
//! straight from the fuzzer (absurd ones included). `span` and
//! `ArrayView::check` are compared with an `i128` reference and an
//! element-by-element walk, and both operators are planned (and, when small,
//! executed and checked) on such views with raw attributes.

use crate::{
    check, dim, exec, fill_indices, for_each_coord, index_type, itemsize, one_in, pattern, verdict,
    Array, Op, Outcome, Verdict,
};
use arbitrary::Unstructured;
use ndgather::{span, GatherError};

/// Turns `bytes` into two views, checks them, then two calls on them
/// (`gather_nd` and `gather`) and checks those: how the calls ended (none
/// if the bytes run out before the calls are made).
pub fn run(bytes: &[u8]) -> Vec<Outcome> {
    crate::outcomes_of(bytes, generate)
}

/// `span` in `i128`: `None` when a term or the extent does not fit `isize`.
fn span_reference(shape: &[usize], strides: &[isize], itemsize: usize) -> Option<(isize, usize)> {
    if shape.contains(&0) {
        return Some((0, 0));
    }
    let fits = |v: i128| v >= isize::MIN as i128 && v <= isize::MAX as i128;
    let (mut lo, mut hi) = (0i128, 0i128);
    for (&n, &s) in shape.iter().zip(strides) {
        let reach = (n as i128 - 1) * s as i128;
        if !fits(n as i128 - 1) || !fits(reach) {
            return None;
        }
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    let len = hi - lo + itemsize as i128;
    if !fits(lo) || !fits(hi) || !fits(hi - lo) || !fits(itemsize as i128) || !fits(len) {
        return None;
    }
    Some((lo as isize, len as usize))
}

fn raw_array(u: &mut Unstructured<'_>, itemsize: usize) -> arbitrary::Result<Array> {
    let rank = u.int_in_range(0..=6)?;
    let mut shape = Vec::with_capacity(rank);
    let mut strides = Vec::with_capacity(rank);
    for _ in 0..rank {
        shape.push(if one_in(u, 8)? {
            u.arbitrary()?
        } else {
            dim(u)?
        });
        strides.push(if one_in(u, 8)? {
            u.arbitrary()?
        } else {
            u.int_in_range(-64..=64)?
        });
    }
    if one_in(u, 64)? {
        if u.arbitrary()? {
            strides.pop();
        } else {
            strides.push(8);
        }
    }
    let len: usize = u.int_in_range(0..=4096)?;
    let offset: usize = if one_in(u, 16)? {
        u.arbitrary()?
    } else {
        u.int_in_range(0..=len)?
    };
    let bytes = pattern()[..len].to_vec();
    Ok(Array {
        bytes,
        offset,
        shape,
        strides,
        itemsize,
    })
}

fn generate(u: &mut Unstructured<'_>, outcomes: &mut Vec<Outcome>) -> arbitrary::Result<()> {
    let e = exec(u)?;
    let ty = index_type(u)?;
    let data_itemsize = if one_in(u, 16)? {
        u.arbitrary()?
    } else {
        itemsize(u)?
    };
    let data = raw_array(u, data_itemsize)?;
    let index_itemsize = if one_in(u, 32)? {
        u.int_in_range(0..=9)?
    } else {
        ty.itemsize()
    };
    let mut indices = raw_array(u, index_itemsize)?;

    for a in [&data, &indices] {
        let v = a.view();
        if a.shape.len() == a.strides.len() {
            assert_eq!(
                span(&a.shape, &a.strides, a.itemsize),
                span_reference(&a.shape, &a.strides, a.itemsize),
                "span of {:?} {:?} itemsize {}",
                a.shape,
                a.strides,
                a.itemsize
            );
        }
        let want = verdict(&v);
        match (want, v.check("view")) {
            (Verdict::Valid, Ok(())) | (Verdict::Either, _) => {}
            (Verdict::Invalid, Err(GatherError::InvalidArgument(_))) => {}
            (want, got) => panic!("check: reference says {want:?}, core says {got:?} for {a:?}"),
        }
        // The reference itself, element by element where that is cheap.
        if want == Verdict::Valid && a.itemsize > 0 {
            let few = a.shape.iter().try_fold(1usize, |n, &d| n.checked_mul(d));
            if few.is_some_and(|n| n <= 4096) {
                for_each_coord(&a.shape, |c| {
                    let p = a.offset as i128
                        + c.iter()
                            .zip(&a.strides)
                            .map(|(&c, &s)| c as i128 * s as i128)
                            .sum::<i128>();
                    assert!(p >= 0 && p + a.itemsize as i128 <= a.bytes.len() as i128);
                    true
                });
            }
        }
    }

    if verdict(&indices.view()) == Verdict::Valid {
        fill_indices(u, &mut indices, ty, |_| 3)?;
    }
    let batch_dims: i64 = if one_in(u, 4)? {
        u.arbitrary()?
    } else {
        u.int_in_range(-3..=3)?
    };
    let axis: i64 = if one_in(u, 4)? {
        u.arbitrary()?
    } else {
        u.int_in_range(-4..=4)?
    };
    let call = e.call(data, indices, ty);
    outcomes.push(check(&call, Op::GatherNd { batch_dims }));
    outcomes.push(check(&call, Op::Gather { axis, batch_dims }));
    Ok(())
}
