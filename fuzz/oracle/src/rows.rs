//! `ndgather::take_tuples_in`, the row path a short list of ids (or of
//! GatherND index tuples) takes, over C-contiguous tables of any row shape
//! and element width, `int32` and `int64` ids of any value and count
//! (none, a few, and around its limit of `MAX_ROW_IDS` and around as many
//! as `MAX_ROW_BYTES` of rows), tuples of one index up to the table's
//! rank, with `mode="raise"` and `mode="clip"`, against the naive
//! reference of this crate.

use crate::{check_rows, dim, itemsize, pattern, Array, Exec, Outcome};
use arbitrary::Unstructured;
use ndgather::rows::{MAX_ROW_BYTES, MAX_ROW_IDS};
use ndgather::{IndexType, Mode, Validation};

/// Turns `bytes` into one call and checks it: how it ended (none if the
/// bytes make no call).
pub fn run(bytes: &[u8]) -> Vec<Outcome> {
    crate::outcomes_of(bytes, generate)
}

fn generate(u: &mut Unstructured<'_>, outcomes: &mut Vec<Outcome>) -> arbitrary::Result<()> {
    let itemsize = itemsize(u)?;
    // `gather` (one-dimensional ids), `gather_nd` by tuples of `k`, or
    // `gather_nd` with `batch_dims=1` (a leading axis of `batches` on
    // the table and on the ids).
    let (nd, b) = match u.int_in_range(0..=3)? {
        0 | 1 => (false, 0),
        2 => (true, 0),
        _ => (true, 1),
    };
    let batches = u.int_in_range(1..=4)?;
    let rows = u.int_in_range(0..=48)?;
    let mut shape = vec![batches; b];
    shape.push(rows);
    for _ in 0..u.int_in_range(0..=2)? {
        shape.push(dim(u)?.min(64));
    }
    // How many axes past the batch an entry of the ids indexes: 1 for
    // `gather`, 1 up to the rest of the rank for `gather_nd`.
    let k = if nd {
        u.int_in_range(1..=shape.len() - b)?
    } else {
        1
    };
    let row_bytes = shape[b + k..]
        .iter()
        .try_fold(itemsize, |acc, &n| acc.checked_mul(n))
        .unwrap_or(usize::MAX);
    let ty = if u.arbitrary()? {
        IndexType::I64
    } else {
        IndexType::I32
    };
    let count = match u.int_in_range(0..=15)? {
        0 => u.int_in_range(0..=2 * MAX_ROW_IDS)?,
        1 => MAX_ROW_IDS + u.int_in_range(0..=1)?,
        2 => (MAX_ROW_BYTES / row_bytes.max(1)).min(2 * MAX_ROW_IDS) + u.int_in_range(0..=1)?,
        _ => u.int_in_range(1..=24)?,
    };
    // With a batch axis, `count` tuples for each batch.
    let per_batch = count;
    let count = count * if b == 1 { batches } else { 1 };
    // The check allocates the output: no larger than the largest table
    // (a table of no rows may have rows of any width).
    if count.saturating_mul(row_bytes) > pattern().len() {
        return Ok(());
    }
    let Some(data) = contiguous(shape, itemsize) else {
        return Ok(());
    };
    // Mostly in range (each index of its own axis), so that long lists get
    // through too; the edges and anything else now and then.
    let axes = data.shape[b..b + k].to_vec();
    let mut bytes = Vec::with_capacity(count * k * ty.itemsize());
    for s in (0..count).flat_map(|_| axes.iter().map(|&n| n as i64)) {
        let v: i64 = match u.int_in_range(0..=199)? {
            0 => u.arbitrary()?,
            1 => s,
            2 => -s - 1,
            _ if s == 0 => 0,
            _ => u.int_in_range(-s..=s - 1)?,
        };
        match ty {
            IndexType::I32 => bytes.extend_from_slice(&(v as i32).to_ne_bytes()),
            _ => bytes.extend_from_slice(&v.to_ne_bytes()),
        }
    }
    let ids_shape = match (nd, b) {
        (false, _) => vec![count],
        (true, 0) => vec![count, k],
        _ => vec![batches, per_batch, k],
    };
    let indices = Array {
        bytes,
        offset: 0,
        strides: c_strides(&ids_shape, ty.itemsize()),
        shape: ids_shape,
        itemsize: ty.itemsize(),
    };
    // The two modes the row path serves.
    let mode = if u.arbitrary()? {
        Mode::Clip
    } else {
        Mode::Raise
    };
    let exec = Exec {
        mode,
        validation: Validation::BeforeWriting,
        threads: 1,
        reject_negative: false,
        out_len_delta: 0,
    };
    outcomes.push(check_rows(&exec.call(data, indices, ty)));
    Ok(())
}

/// A C-contiguous array of `shape`, its bytes from the pattern; `None` if
/// it would be larger than the pattern.
fn contiguous(shape: Vec<usize>, itemsize: usize) -> Option<Array> {
    let len = shape
        .iter()
        .try_fold(itemsize, |acc, &n| acc.checked_mul(n))?;
    let bytes = pattern().get(..len)?.to_vec();
    let strides = c_strides(&shape, itemsize);
    Some(Array {
        bytes,
        offset: 0,
        shape,
        strides,
        itemsize,
    })
}

/// The strides of a C-contiguous array of `shape` (an empty axis counted as
/// one, so that no stride is zero).
fn c_strides(shape: &[usize], itemsize: usize) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut step = itemsize;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = step as isize;
        step *= n.max(1);
    }
    strides
}
