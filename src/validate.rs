//! The checks every plan makes before it computes anything: the views are
//! well-formed and within their bytes, the index type matches the index
//! array, batch axes agree, and every size fits where NumPy says it must.

use crate::error::{fmt_tuple, GatherError, Result};
use crate::index::IndexType;
use crate::layout::ArrayView;

/// An attribute or shape that breaks an operator's rules.
pub(crate) fn invalid(msg: String) -> GatherError {
    GatherError::InvalidArgument(msg)
}

/// The byte count of an output of `shape`, or `Overflow`. As NumPy counts
/// an array's size, the axes that are not empty must fit `isize` in
/// elements and in bytes even when another axis is empty: every walk of the
/// plan (rows, index rows, slice) runs over a subset of these axes, so its
/// length and the coalescing of its axes cannot overflow either.
pub(crate) fn checked_sizes(shape: &[usize], itemsize: usize) -> Result<usize> {
    check_numpy_size("the output", shape, itemsize)?;
    Ok(shape.iter().product::<usize>() * itemsize)
}

/// The first `b` axes (the batch axes) of `data` and `indices` are equal.
pub(crate) fn check_batch_shapes(
    data: &[usize],
    indices: &[usize],
    b: usize,
    op: &str,
) -> Result<()> {
    if data[..b] != indices[..b] {
        return Err(invalid(format!(
            "{op}: the first batch_dims={b} dimensions of data and indices must be equal, \
             got data shape {} and indices shape {}",
            fmt_tuple(data),
            fmt_tuple(indices)
        )));
    }
    Ok(())
}

/// Both views are well-formed, `indices` holds elements of `index_type`, and
/// neither has more elements or bytes than NumPy allows.
pub(crate) fn checked_views(
    data: &ArrayView<'_>,
    indices: &ArrayView<'_>,
    index_type: IndexType,
) -> Result<()> {
    data.check("data")?;
    indices.check("indices")?;
    if indices.itemsize != index_type.itemsize() {
        return Err(invalid(format!(
            "indices itemsize {} does not match its type {index_type:?}",
            indices.itemsize
        )));
    }
    // NumPy's rule for every array: an empty view's other axes are never
    // checked against a buffer, yet the planning and the index checks rely
    // on axis sizes of at most isize::MAX.
    for (what, v) in [("data", data), ("indices", indices)] {
        check_numpy_size(what, v.shape, v.itemsize)?;
    }
    Ok(())
}

/// NumPy's bound on an array of `shape` and `itemsize`, as an `Overflow`
/// naming the array: its axes that are not empty must fit `isize` in
/// elements and in bytes.
pub(crate) fn check_numpy_size(what: &str, shape: &[usize], itemsize: usize) -> Result<()> {
    shape
        .iter()
        .filter(|&&n| n != 0)
        .try_fold(1usize, |acc, &n| acc.checked_mul(n))
        .filter(|&n| n <= isize::MAX as usize)
        .and_then(|n| n.checked_mul(itemsize))
        .filter(|&b| b <= isize::MAX as usize)
        .map(drop)
        .ok_or_else(|| {
            GatherError::Overflow(format!(
                "{what} shape {} with itemsize {itemsize} has more elements or bytes than fit in \
                 an isize (its empty axes aside)",
                fmt_tuple(shape)
            ))
        })
}

/// The caller's output buffer must hold exactly the result's bytes.
pub(crate) fn check_out_len(out: &[u8], needs: usize) -> Result<()> {
    if out.len() == needs {
        return Ok(());
    }
    let got = out.len();
    Err(invalid(format!(
        "output buffer has {got} bytes, the result needs {needs}"
    )))
}
