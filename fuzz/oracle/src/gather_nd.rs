//! `gather_nd` over random shapes, layouts, element and index widths, index
//! values, `batch_dims`, modes, outputs and thread counts, against the naive
//! reference of this crate.

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
    // Rank 0 is invalid for gather_nd; rare, as are the other broken rules.
    let r = data_rank(u)?;
    let data_shape = (0..r)
        .map(|_| dim(u))
        .collect::<arbitrary::Result<Vec<_>>>()?;
    let batch_dims: i64 = if one_in(u, 32)? {
        u.arbitrary()?
    } else {
        u.int_in_range(0..=r.saturating_sub(1) as i64)?
    };
    let b = batch_dims.clamp(0, r as i64) as usize;
    let k = if one_in(u, 32)? {
        u.int_in_range(0..=r - b + 1)?
    } else {
        u.int_in_range(1..=(r - b).max(1))?
    };
    let mut index_shape = data_shape[..b].to_vec();
    if b > 0 && one_in(u, 32)? {
        let i = u.choose_index(b)?;
        index_shape[i] = dim(u)?;
    }
    for _ in 0..u.int_in_range(0..=3)? {
        index_shape.push(dim(u)?);
    }
    if !one_in(u, 64)? {
        index_shape.push(k);
    }
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
    // Position j of a tuple addresses axis b + j of data.
    let sizes = data.shape.clone();
    fill_indices(u, &mut indices, ty, |c| {
        c.last()
            .and_then(|&j| sizes.get(b + j))
            .copied()
            .unwrap_or(3)
    })?;
    let call = e.call(data, indices, ty);
    outcomes.push(check(&call, Op::GatherNd { batch_dims }));
    Ok(())
}
