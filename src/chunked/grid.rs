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

/// Each axis's chunk starts from its chunk sizes, and the array's shape.
pub(super) fn bounds(chunk_sizes: &[Vec<usize>]) -> Result<(Bounds, Vec<usize>)> {
    let mut all = Vec::with_capacity(chunk_sizes.len());
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
        all.push(starts);
    }
    let shape = all.iter().map(|s| s[s.len() - 1]).collect();
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
    let table = |st: &Vec<usize>| {
        (st[st.len() - 1] <= TABLE_MAX).then(|| fill_buckets(st, 0, |c| c as u32))
    };
    starts.iter().take(axes).map(table).collect()
}

/// Per bucket of `1 << shift` positions of an axis cut at `st`, `id` of the
/// chunk it lies in (every chunk start a multiple of `1 << shift`): chunk by
/// chunk, the buckets its positions start, in one pass (a search per bucket
/// was slow on tens of thousands of them).
pub(super) fn fill_buckets(st: &[usize], shift: u32, id: impl Fn(usize) -> u32) -> Vec<u32> {
    let mut ids = vec![0u32; st[st.len() - 1].div_ceil(1 << shift)];
    for (c, w) in st.windows(2).enumerate().filter(|(_, w)| w[1] > w[0]) {
        ids[w[0] >> shift..w[1].div_ceil(1 << shift)].fill(id(c));
    }
    ids
}

/// The chunk position `p` falls in, by table or by search.
#[inline(always)]
pub(super) fn chunk_of(table: &Option<Vec<u32>>, starts: &[usize], p: usize) -> usize {
    match table {
        Some(t) => t[p] as usize,
        None => locate(starts, p).0,
    }
}

/// C-order strides, in chunks, of a grid of `counts` chunks along its axes,
/// and its number of chunks.
pub(super) fn grid_strides(counts: impl Iterator<Item = usize>) -> Result<(Vec<u64>, u64)> {
    let mut strides: Vec<u64> = counts.map(|n| n as u64).collect();
    let mut total = 1u64;
    for s in strides.iter_mut().rev() {
        let count = std::mem::replace(s, total);
        total = total
            .checked_mul(count)
            .ok_or_else(|| GatherError::Overflow("the chunk grid has too many chunks".into()))?;
    }
    Ok((strides, total))
}
