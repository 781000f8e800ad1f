//! `_core.gather_block_quantized`: converts the arrays the Python wrapper
//! (`ndgather.onnx.ms_gather_block_quantized_1`) prepared, and runs the
//! core's `gather_block_quantized` into a new array (`deliver::fresh`). The
//! operator's type and shape rules are checked in the wrapper, with its
//! messages; the core checks again that every buffer fits its shape.

use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;

use super::args::mode_arg;
use super::arrays::view;
use super::casts::scalar;
use super::deliver::{fresh, Planned};
use super::mapped::Mapping;
use crate::pages::OneShot;
use crate::plan::{plan_op, Operator};
use crate::quantized::{
    block_quantized_out_shape, gather_block_quantized, BlockQuantized, Codes, Indices, ScaleType,
};
use crate::{num_threads, GatherError, IndexType, Mode, Scalar};

/// The bytes of a C-contiguous array.
fn contiguous<'a>(a: &'a Bound<'_, PyUntypedArray>, what: &str) -> PyResult<&'a [u8]> {
    if !a.is_c_contiguous() {
        return Err(GatherError::InvalidArgument(format!("{what} must be C-contiguous")).into());
    }
    Ok(view(a)?.bytes)
}

/// Brings in the pages of `arr` (in `mapping`) a gather along `axis` of it
/// (as stored) reads: the rows of the codes, scales or zero points the call
/// dequantises. Left to the copy where no such gather plans.
fn bring_in_rows(
    mapping: &Mapping<'_>,
    arr: &Bound<'_, PyUntypedArray>,
    indices: &Bound<'_, PyUntypedArray>,
    ty: IndexType,
    axis: usize,
    mode: Mode,
) -> PyResult<()> {
    let op = Operator::Gather {
        axis: axis as i64,
        batch_dims: 0,
    };
    match plan_op(op, view(arr)?, view(indices)?, ty, None) {
        Ok(plan) => mapping.bring_in(&plan, &OneShot { plan: &plan, mode }),
        Err(_) => Ok(()),
    }
}

/// The `TypeError` for an array of a dtype the call does not take.
fn unsupported(what: &str, dtype: &Bound<'_, PyArrayDescr>) -> PyErr {
    GatherError::UnsupportedType(format!("{what} of dtype {dtype} are not supported")).into()
}

/// The 256 float32 values of codes by table.
fn table(v: &Bound<'_, PyUntypedArray>) -> PyResult<[f32; 256]> {
    let raw = contiguous(v, "values")?;
    if v.dtype().kind() != b'f' || v.dtype().itemsize() != 4 || raw.len() != 1024 {
        return Err(GatherError::UnsupportedType("values must be 256 float32".into()).into());
    }
    Ok(std::array::from_fn(|i| {
        f32::from_ne_bytes([0, 1, 2, 3].map(|b| raw[4 * i + b]))
    }))
}

/// Gathers rows of block-quantised `data` and dequantises them (the
/// operator's rules already checked by the caller). ``data``: the codes'
/// bytes, C-contiguous; ``shape``: its logical shape; ``codes``:
/// ``"packed"`` (``bits`` per code, uint8), ``"int4"``, ``"uint4"`` (a code
/// per byte) or ``"table"`` (a code per byte, valued by the 256 float32
/// ``values``); ``scales``: float32, float16 or bfloat16, C-contiguous, the
/// output's dtype; ``zero_points``: stored as the codes, or None;
/// ``mode``: ``"zero"`` (an index out of range is a zero row) or
/// ``"raise"`` (the one-shot gather's `GatherIndexError`).
#[pyfunction(name = "gather_block_quantized")]
#[allow(clippy::too_many_arguments)] // one per input and attribute of the operator
pub(crate) fn gather_block_quantized_py<'py>(
    data: &Bound<'py, PyUntypedArray>,
    shape: Vec<usize>,
    codes: &str,
    bits: u32,
    values: Option<&Bound<'py, PyUntypedArray>>,
    indices: &Bound<'py, PyUntypedArray>,
    scales: &Bound<'py, PyUntypedArray>,
    zero_points: Option<&Bound<'py, PyUntypedArray>>,
    gather_axis: usize,
    quantize_axis: usize,
    block_size: usize,
    mode: &str,
) -> PyResult<Bound<'py, PyUntypedArray>> {
    let mode = mode_arg(mode)?;
    // Every dtype is read before any buffer: naming an extension dtype's
    // type (`scalar`'s bfloat16 test) may run Python code.
    let sdtype = scales.dtype();
    let scale_type = match scalar(&sdtype) {
        Some(Scalar::F32) => ScaleType::Float32,
        Some(Scalar::F16) => ScaleType::Float16,
        Some(Scalar::BF16) => ScaleType::BFloat16,
        _ => return Err(unsupported("scales", &sdtype)),
    };
    let bytes = contiguous(data, "data")?;
    let table = values.map(table).transpose()?;
    let codes = match (codes, &table) {
        ("packed", _) => Codes::Packed { bytes, bits },
        ("int4", _) => Codes::Int4(bytes),
        ("uint4", _) => Codes::UInt4(bytes),
        ("table", Some(values)) => Codes::Table { bytes, values },
        _ => return Err(GatherError::UnsupportedType(format!("unknown codes {codes:?}")).into()),
    };
    let idtype = indices.dtype();
    let ibytes = contiguous(indices, "indices")?;
    let (idx, ty) = match (scalar(&idtype), idtype.is_native_byteorder()) {
        (Some(Scalar::I32), Some(true)) => (Indices::I32(ibytes), IndexType::I32),
        (Some(Scalar::I64), Some(true)) => (Indices::I64(ibytes), IndexType::I64),
        _ => return Err(unsupported("indices", &idtype)),
    };
    let q = BlockQuantized {
        codes,
        shape: &shape,
        scales: contiguous(scales, "scales")?,
        scale_type,
        zero_points: zero_points
            .map(|z| contiguous(z, "zero_points"))
            .transpose()?,
        gather_axis,
        quantize_axis,
        block_size,
    };
    // The shape and, with mode "raise", the indices checked as a one-shot
    // Gather along the gather axis of data as stored checks them.
    let out_shape = block_quantized_out_shape(
        data.shape(),
        &shape,
        gather_axis,
        view(indices)?,
        ty,
        mode,
        num_threads(),
    )?;
    // Arrays in a file mapping: held open to the end of the call, and the
    // rows the gather reads brought in first.
    let mut held = Vec::new();
    for arr in [Some(data), Some(scales), zero_points]
        .into_iter()
        .flatten()
    {
        if let Some(m) = Mapping::of(arr)? {
            bring_in_rows(&m, arr, indices, ty, gather_axis, mode)?;
            held.push(m);
        }
    }
    let n_bytes = out_shape
        .iter()
        .try_fold(sdtype.itemsize(), |a, &d| a.checked_mul(d))
        .ok_or_else(|| GatherError::Overflow("the result's size overflows 64 bits".into()))?;
    let result = Planned {
        shape: &out_shape,
        bytes: n_bytes,
        work: n_bytes,
        reads: &[],
        // Dequantised values: no row of the result is a copy of one read.
        phase: 0,
    };
    fresh(&sdtype, &result, &|out, _, threads| {
        gather_block_quantized(&q, idx, out, threads)
    })
}
