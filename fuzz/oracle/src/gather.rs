//! `gather` over random shapes, layouts, element and index widths, index
//! values, `axis` and `batch_dims` (negative forms too), modes, outputs and
//! thread counts, against the naive reference of this crate.

use crate::{
    array, check, data_rank, dim, exec, fill_indices, index_type, itemsize, one_in, LayoutOptions,
    Op, Outcome,
};
use arbitrary::Unstructured;

/// Turns `bytes` into one call and checks it: how it ended (none if the
/// bytes make no call).
pub fn run(bytes: &[u8]) -> Vec<Outcome> {
    crate::outcomes_of(bytes, generate)
}

fn generate(u: &mut Unstructured<'_>, outcomes: &mut Vec<Outcome>) -> arbitrary::Result<()> {
    let e = exec(u)?;
    let ty = index_type(u)?;
    let itemsize = itemsize(u)?;
    let r = data_rank(u)?;
    let data_shape = (0..r)
        .map(|_| dim(u))
        .collect::<arbitrary::Result<Vec<_>>>()?;
    let a = u.int_in_range(0..=r.saturating_sub(1))?;
    let b = u.int_in_range(0..=a)?;
    let mut index_shape = data_shape[..b.min(r)].to_vec();
    if b > 0 && one_in(u, 32)? {
        let i = u.choose_index(b)?;
        index_shape[i] = dim(u)?;
    }
    for _ in 0..u.int_in_range(0..=3)? {
        index_shape.push(dim(u)?);
    }
    let q = index_shape.len() as i64;
    // Either spelling of each attribute, and rarely anything at all.
    let axis: i64 = match u.int_in_range(0..=15)? {
        0 => u.arbitrary()?,
        1..=5 => a as i64 - r as i64,
        _ => a as i64,
    };
    let batch_dims: i64 = match u.int_in_range(0..=15)? {
        0 => u.arbitrary()?,
        1..=5 => b as i64 - q,
        _ => b as i64,
    };
    let Some(data) = array(u, data_shape, itemsize, LayoutOptions { big_tail: true })? else {
        return Ok(());
    };
    let index_itemsize = if one_in(u, 64)? {
        u.int_in_range(0..=9)?
    } else {
        ty.itemsize()
    };
    let Some(mut indices) = array(
        u,
        index_shape,
        index_itemsize,
        LayoutOptions { big_tail: false },
    )?
    else {
        return Ok(());
    };
    let s = data.shape.get(a).copied().unwrap_or(3);
    fill_indices(u, &mut indices, ty, |_| s)?;
    let call = e.call(data, indices, ty);
    outcomes.push(check(&call, Op::Gather { axis, batch_dims }));
    Ok(())
}
