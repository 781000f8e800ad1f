//! `ndgather::take_rows`, the row path a short list of ids takes, over
//! C-contiguous tables of any row shape and element width, `int32` and
//! `int64` ids of any value and count (none, a few, and around its limit
//! of `MAX_ROW_IDS` and around as many as `MAX_ROW_BYTES` of rows), against the naive reference of this crate.

use crate::{check_rows, dim, itemsize, pattern, Array, Exec, Outcome};
use arbitrary::Unstructured;
use ndgather::{IndexType, Mode, Validation, MAX_ROW_BYTES, MAX_ROW_IDS};

/// Turns `bytes` into one call and checks it: how it ended (none if the
/// bytes make no call).
pub fn run(bytes: &[u8]) -> Vec<Outcome> {
    crate::outcomes_of(bytes, generate)
}

fn generate(u: &mut Unstructured<'_>, outcomes: &mut Vec<Outcome>) -> arbitrary::Result<()> {
    let itemsize = itemsize(u)?;
    let rows = u.int_in_range(0..=48)?;
    let mut shape = vec![rows];
    for _ in 0..u.int_in_range(0..=2)? {
        shape.push(dim(u)?.min(64));
    }
    let row_bytes = shape[1..]
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
    // The check allocates the output: no larger than the largest table
    // (a table of no rows may have rows of any width).
    if count.saturating_mul(row_bytes) > pattern().len() {
        return Ok(());
    }
    let Some(data) = contiguous(shape, itemsize) else {
        return Ok(());
    };
    // Mostly in range, so that long lists get through too; the edges and
    // anything else now and then.
    let s = rows as i64;
    let mut bytes = Vec::with_capacity(count * ty.itemsize());
    for _ in 0..count {
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
    let indices = Array {
        bytes,
        offset: 0,
        shape: vec![count],
        strides: vec![ty.itemsize() as isize],
        itemsize: ty.itemsize(),
    };
    let exec = Exec {
        mode: Mode::Raise,
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
    let mut strides = vec![0isize; shape.len()];
    let mut step = itemsize;
    for (s, &n) in strides.iter_mut().zip(&shape).rev() {
        *s = step as isize;
        step *= n.max(1);
    }
    Some(Array {
        bytes,
        offset: 0,
        shape,
        strides,
        itemsize,
    })
}
