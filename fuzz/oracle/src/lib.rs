//! Naive references for ndgather's `gather_nd`, `gather` and
//! GatherBlockQuantized, and the
//! generators of the calls the core is checked on against them (arrays of
//! any geometry, built from arbitrary bytes).
//!
//! Each of [`gather_nd`], [`gather`], [`views`] and [`rows`] turns one input (a byte
//! string) into calls with the generators of `generate.rs`, makes them and
//! checks them with [`check`] (`reference.rs`). The
//! cargo-fuzz targets in `fuzz/fuzz_targets/` feed them the fuzzer's bytes
//! (nightly); the root crate's `tests/oracle.rs` feeds them seeded
//! pseudo-random bytes in a plain `cargo test` (stable).
//!
//! Every check has the form "error or exact result": when the core returns
//! `Ok`, its bytes must equal the reference's; when it returns an error,
//! the reference must agree that the input is invalid (and name the same
//! first bad index), and a caller's output (`Validation::BeforeWriting`)
//! must be untouched. Each executed call is replayed as a prepared gather
//! too (`ndgather::Prepared`, for the data's shape, then on the data): the
//! same bytes, or the same first bad index when preparing; and as a chunked
//! gather (`chunked.rs`: `data` cut into a grid of chunks, the touched ones
//! found, the gather made from those alone); and, on each of the three
//! paths, converting (`dtype=`: integers to int64, float32 or float64,
//! float16 and bfloat16 to float32, against conversions worked out from the
//! formats in `reference.rs`).
//!
//! [`quantized`] checks com.microsoft GatherBlockQuantized
//! (`ndgather::quantized`) on calls of its own, against a naive dequantiser
//! written from the operator's definition (`dequantize.rs`): the result's
//! shape or first bad index, and every element bit for bit.
//!
//! The references work on coordinates, one element at a time, with `i128`
//! arithmetic: they share no code and no idea (coalescing, offsets tables,
//! odometers) with the core.

pub mod gather;
pub mod gather_nd;
pub mod quantized;
pub mod rows;
pub mod views;

mod chunked;
mod dequantize;
mod generate;
mod reference;
mod seeded;

pub use generate::{
    array, data_rank, dim, exec, fill_indices, index_type, itemsize, mode, one_in, pattern,
    LayoutOptions, MAX_SPAN,
};
pub use reference::{check, check_rows, verdict, Op, Outcome, Verdict, MAX_ELEMS, MAX_OUT_BYTES};
pub use seeded::SplitMix64;

use ndgather::{ArrayView, IndexType, Mode, Validation};

/// A strided array over a buffer of its own.
#[derive(Debug)]
pub struct Array {
    pub bytes: Vec<u8>,
    pub offset: usize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub itemsize: usize,
}

impl Array {
    pub fn view(&self) -> ArrayView<'_> {
        ArrayView {
            bytes: &self.bytes,
            offset: self.offset,
            shape: &self.shape,
            strides: &self.strides,
            itemsize: self.itemsize,
        }
    }

    /// Byte position of the element at `coords`, if all of it is inside
    /// the buffer.
    fn pos(&self, coords: &[usize]) -> Option<usize> {
        let mut p = self.offset as i128;
        for (&c, &s) in coords.iter().zip(&self.strides) {
            p += c as i128 * s as i128;
        }
        let end = p + self.itemsize as i128;
        (p >= 0 && end <= self.bytes.len() as i128).then_some(p as usize)
    }

    /// The bytes of the element at `coords` (of an array the reference
    /// found valid).
    fn elem(&self, coords: &[usize]) -> &[u8] {
        if self.itemsize == 0 {
            return &[];
        }
        let p = self
            .pos(coords)
            .expect("reference reads inside a valid view");
        &self.bytes[p..p + self.itemsize]
    }
}

/// Calls `f` with every coordinate tuple of `shape` in C order, until it
/// returns `false`.
pub fn for_each_coord(shape: &[usize], mut f: impl FnMut(&[usize]) -> bool) {
    if shape.contains(&0) {
        return;
    }
    let mut coords = vec![0usize; shape.len()];
    loop {
        if !f(&coords) {
            return;
        }
        let mut i = shape.len();
        loop {
            if i == 0 {
                return;
            }
            i -= 1;
            coords[i] += 1;
            if coords[i] < shape[i] {
                break;
            }
            coords[i] = 0;
        }
    }
}

/// Number of elements of `shape`, `None` past `u128`.
fn count(shape: &[usize]) -> Option<u128> {
    if shape.contains(&0) {
        return Some(0);
    }
    shape
        .iter()
        .try_fold(1u128, |acc, &n| acc.checked_mul(n as u128))
}

/// A whole call: arrays, attributes, and how it is executed.
#[derive(Debug)]
pub struct Call {
    pub data: Array,
    pub indices: Array,
    pub index_type: IndexType,
    pub mode: Mode,
    pub validation: Validation,
    pub threads: usize,
    pub reject_negative: bool,
    /// Added to the output buffer's length (normally 0: a wrong length
    /// must be refused before anything is written).
    pub out_len_delta: isize,
}

impl Array {
    /// The geometry, and the first bytes of the buffer.
    fn describe(&self) -> String {
        let head = &self.bytes[..self.bytes.len().min(64)];
        format!(
            "shape {:?} strides {:?} itemsize {} offset {} len {} bytes {head:?}",
            self.shape,
            self.strides,
            self.itemsize,
            self.offset,
            self.bytes.len()
        )
    }
}

impl Call {
    /// Everything about the call but the bulk of the buffers.
    pub fn describe(&self) -> String {
        format!(
            "{:?} {:?} threads {} reject_negative {} out_len_delta {} {:?}\n  data: {}\n  indices: {}",
            self.mode,
            self.validation,
            self.threads,
            self.reject_negative,
            self.out_len_delta,
            self.index_type,
            self.data.describe(),
            self.indices.describe()
        )
    }
}

/// How a call is executed, from the fuzzer's bytes.
pub struct Exec {
    pub mode: Mode,
    pub validation: Validation,
    pub threads: usize,
    pub reject_negative: bool,
    pub out_len_delta: isize,
}

impl Exec {
    /// The call of `data` and `indices` made the way this `Exec` says.
    pub fn call(self, data: Array, indices: Array, index_type: IndexType) -> Call {
        Call {
            data,
            indices,
            index_type,
            mode: self.mode,
            validation: self.validation,
            threads: self.threads,
            reject_negative: self.reject_negative,
            out_len_delta: self.out_len_delta,
        }
    }
}

/// Runs a target's generator over `bytes` and returns how each call it made
/// ended. An error from the generator only means the bytes ran out in a way
/// that makes no (further) call.
pub(crate) fn outcomes_of(
    bytes: &[u8],
    generate: impl FnOnce(&mut arbitrary::Unstructured<'_>, &mut Vec<Outcome>) -> arbitrary::Result<()>,
) -> Vec<Outcome> {
    let mut outcomes = Vec::new();
    let _ = generate(&mut arbitrary::Unstructured::new(bytes), &mut outcomes);
    outcomes
}
