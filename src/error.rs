//! The one error type of the core. The Python layer maps each variant to an
//! exception class in exactly one place (`python/errors.rs`).

use std::fmt;

/// An index that addresses nothing: everything a user needs to find it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange {
    /// The offending value as stored in `indices` (wide enough for u64 and i64).
    pub value: i128,
    /// Its position in `indices` (for `gather_nd`, the last coordinate is
    /// its place in the tuple): `indices[position] == value`.
    pub position: Vec<usize>,
    /// For `gather_nd`, the whole index tuple the value belongs to.
    pub tuple: Option<Vec<i128>>,
    /// The axis of `data` the value addresses.
    pub axis: usize,
    /// That axis' size.
    pub axis_size: usize,
    /// The shape of `data`.
    pub data_shape: Vec<usize>,
    /// Whether the operator lets negative indices count from the end.
    pub negatives_allowed: bool,
}

/// Everything that can go wrong in a gather.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GatherError {
    /// An index outside `[-s, s)` in `mode="raise"` (or any index into an
    /// empty axis in `mode="clip"`). Python: `IndexError`.
    IndexOutOfRange(Box<OutOfRange>),
    /// Shapes or attributes that break the operator's rules; the message
    /// states the rule and the values. Python: `ValueError`.
    InvalidArgument(String),
    /// A shape whose element or byte count does not fit 64 bits.
    /// Python: `ValueError`.
    Overflow(String),
    /// A dtype the operation does not accept. Python: `TypeError`.
    UnsupportedType(String),
    /// Memory the core itself allocates (a prepared gather's positions)
    /// cannot be had. Python: `MemoryError`.
    OutOfMemory(String),
    /// `indices` changed while the gather was running (another thread wrote
    /// to it). In practice every read stayed inside `data` (the copy checks
    /// each index value it reads, and uses only that value), but the write
    /// raced with our reads, which is undefined behaviour in the abstract;
    /// the result is not defined. Python: `RuntimeError`.
    IndicesModified,
}

/// The result of every fallible function of the core.
pub type Result<T> = std::result::Result<T, GatherError>;

/// `(2, 3)` / `(5,)` / `()`, as Python prints a shape tuple.
pub(crate) fn fmt_tuple<T: fmt::Display>(items: &[T]) -> String {
    match items {
        [one] => format!("({one},)"),
        _ => format!("({})", join(items)),
    }
}

fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A `gather_nd` message names the tuple's position, then the tuple.
        let tuple_axes = match (&self.tuple, self.position.split_last()) {
            (Some(_), Some((_, rest))) => rest,
            _ => &self.position[..],
        };
        let position = if tuple_axes.is_empty() {
            "()".to_string()
        } else {
            join(tuple_axes)
        };
        write!(
            f,
            "index {} is out of bounds for axis {} with size {} at indices[{}]",
            self.value, self.axis, self.axis_size, position
        )?;
        if let Some(tuple) = &self.tuple {
            write!(f, " = [{}]", join(tuple))?;
        }
        write!(f, " (data shape {})", fmt_tuple(&self.data_shape))?;
        if self.value < 0 && !self.negatives_allowed {
            f.write_str("; negative indices are not allowed")?;
        }
        Ok(())
    }
}

impl fmt::Display for GatherError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GatherError::IndexOutOfRange(e) => e.fmt(f),
            GatherError::InvalidArgument(msg)
            | GatherError::Overflow(msg)
            | GatherError::UnsupportedType(msg)
            | GatherError::OutOfMemory(msg) => f.write_str(msg),
            GatherError::IndicesModified => f.write_str(
                "indices were modified by another thread during the gather; the result is undefined",
            ),
        }
    }
}

impl std::error::Error for GatherError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn out_of_range_message_names_everything() {
        let e = OutOfRange {
            value: 7,
            position: vec![1, 0, 1],
            tuple: Some(vec![0, 7]),
            axis: 1,
            axis_size: 3,
            data_shape: vec![2, 3],
            negatives_allowed: true,
        };
        assert_eq!(
            e.to_string(),
            "index 7 is out of bounds for axis 1 with size 3 at indices[1, 0] = [0, 7] (data shape (2, 3))"
        );
    }

    #[test]
    fn scalar_position_and_one_dim_shape() {
        let e = OutOfRange {
            value: -4,
            position: vec![],
            tuple: None,
            axis: 0,
            axis_size: 3,
            data_shape: vec![3],
            negatives_allowed: false,
        };
        assert_eq!(
            e.to_string(),
            "index -4 is out of bounds for axis 0 with size 3 at indices[()] (data shape (3,)); \
             negative indices are not allowed"
        );
    }
}
