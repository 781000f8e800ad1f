//! The chunk grid's geometry: each axis's chunk boundaries, the chunk a
//! position falls in, the grid's strides in chunks.

use crate::error::{GatherError, Result};

/// The longest table of an axis: of buckets here, of positions in the
/// general walk (`chunk_tables`). In tests, a few: the random cases take
/// both kinds of bucket, the flat loops and the general ones.
#[cfg(not(test))]
pub(super) const TABLE_MAX: usize = 1 << 16;
#[cfg(test)]
pub(super) const TABLE_MAX: usize = 3;

/// Per axis: chunk starts (with the end last).
pub(super) type Bounds = Vec<Vec<usize>>;

pub(super) fn bounds(chunk_sizes: &[Vec<usize>]) -> Result<(Bounds, Vec<usize>)> {
    let mut all = Vec::with_capacity(chunk_sizes.len());
    let mut shape = Vec::with_capacity(chunk_sizes.len());
    for sizes in chunk_sizes {
        if sizes.is_empty() {
            return Err(GatherError::InvalidArgument(
                "every axis needs at least one chunk (an empty axis: one chunk of size 0)".into(),
            ));
        }
        let mut starts = vec![0usize];
        for &s in sizes {
            let next = starts[starts.len() - 1].checked_add(s).ok_or_else(|| {
                GatherError::Overflow("the chunk sizes of an axis overflow".into())
            })?;
            starts.push(next);
        }
        shape.push(starts[starts.len() - 1]);
        all.push(starts);
    }
    Ok((all, shape))
}

/// The chunk a coordinate falls in along an axis with `starts`, and the
/// coordinate inside it. Zero-size chunks are skipped: the last chunk whose
/// start is at or before `c`.
#[inline(always)]
pub(super) fn locate(starts: &[usize], c: usize) -> (usize, usize) {
    let i = starts[..starts.len() - 1].partition_point(|&s| s <= c) - 1;
    (i, c - starts[i])
}

/// Per axis (the first `axes`), the chunk of each position when the axis
/// is at most [`TABLE_MAX`] long: a load instead of a binary search.
pub(super) fn chunk_tables(starts: &Bounds, axes: usize) -> Vec<Option<Vec<u32>>> {
    starts
        .iter()
        .take(axes)
        .map(|st| {
            let size = st[st.len() - 1];
            (size <= TABLE_MAX).then(|| {
                let mut t = vec![0u32; size];
                for (c, w) in st.windows(2).enumerate() {
                    t[w[0]..w[1]].fill(c as u32);
                }
                t
            })
        })
        .collect()
}

/// The chunk position `p` falls in, by table or by search.
#[inline(always)]
pub(super) fn chunk_of(table: &Option<Vec<u32>>, starts: &[usize], p: usize) -> usize {
    match table {
        Some(t) => t[p] as usize,
        None => locate(starts, p).0,
    }
}

/// C-order strides of the grid, in chunks.
pub(super) fn grid_strides(chunk_sizes: &[Vec<usize>]) -> Result<Vec<u64>> {
    let mut strides = vec![0u64; chunk_sizes.len()];
    let mut acc = 1u64;
    for (s, sizes) in strides.iter_mut().zip(chunk_sizes).rev() {
        *s = acc;
        acc = acc
            .checked_mul(sizes.len() as u64)
            .ok_or_else(|| GatherError::Overflow("the chunk grid has too many chunks".into()))?;
    }
    Ok(strides)
}
