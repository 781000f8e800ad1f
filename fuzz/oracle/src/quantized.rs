//! `ndgather::quantized` (com.microsoft GatherBlockQuantized): calls drawn
//! from the input, checked against the naive dequantiser of
//! `dequantize.rs`.
//!
//! A call has codes of every kind (`uint8` packing 2-, 4- or 8-bit codes,
//! `int4` and `uint4` nibbles, float codes valued by a table of 256 `f32`,
//! specials included; rarely packed codes of a width the operator does not
//! have), a logical shape of rank 0 to 4 (mostly tiny axes, the quantize
//! axis often a few blocks long, rarely absurd axes next to an empty one),
//! any gather and quantize axes (rarely past the rank; packed codes mostly
//! quantised along the last), block sizes from 1 to 200 and the usual
//! 16 to 128 (rarely 0 or any), float32, float16 or bfloat16 scales (near
//! one, or any bits: subnormals, infinities, NaNs), zero points or none,
//! `int32` or `int64` indices of rank 0 to 2 with values around the gather
//! axis' bounds and at the types' edges, one to three threads, and now and
//! then a buffer a few bytes too short or too long. The bulk (codes,
//! table, scales, zero points) comes from a generator seeded by the input.
//!
//! Two checks a call: `block_quantized_out_shape` (for data stored as the
//! Python wrapper stores it, rarely broken; `mode` "raise" or "zero") must
//! give the reference's shape, or the same first bad index, or refuse what
//! the reference refuses; and `gather_block_quantized` must give the
//! reference's elements bit for bit (any NaN where the reference has a
//! NaN), or refuse, with its output untouched, exactly the calls that break
//! a rule. Where a shape is absurd (no array could have it) any error is
//! fine too.

use arbitrary::{Result, Unstructured};
use ndgather::quantized::{
    block_quantized_out_shape, gather_block_quantized, BlockQuantized, Codes, Indices, ScaleType,
};
use ndgather::{ArrayView, GatherError, IndexType, Mode};

use crate::dequantize::{
    bytes_of, dequantize, out_shape, packed_zero_point_shape, per_byte, scale_shape, too_big, Elem,
    Float, Kind, Quantized, Shaped,
};
use crate::generate::index_value;
use crate::reference::UNTOUCHED;
use crate::{count, dim, one_in, Outcome, SplitMix64};

/// Largest output the reference works out, in elements: enough for the
/// fill to be split over threads (32,768 elements and up).
const MAX_OUT: u128 = 1 << 16;
/// Largest code, scale or zero-point buffer made, in elements.
const MAX_BUFFER: u128 = 1 << 18;

/// Turns `bytes` into one call and checks it: how it ended (none if the
/// bytes make no call; two when `mode="raise"` found a bad index).
pub fn run(bytes: &[u8]) -> Vec<Outcome> {
    crate::outcomes_of(bytes, generate)
}

/// One call and the way it is made.
struct Case {
    kind: Kind,
    float: Float,
    /// The logical shape.
    shape: Vec<usize>,
    /// The shape the codes are stored in (what the wrapper passes
    /// `block_quantized_out_shape`).
    stored: Vec<usize>,
    data: Vec<u8>,
    values: Box<[f32; 256]>,
    scales: Vec<u8>,
    zero_points: Option<Vec<u8>>,
    gather_axis: usize,
    quantize_axis: usize,
    block_size: usize,
    index_type: IndexType,
    index_shape: Vec<usize>,
    /// The index values as stored (an `int32` one widened).
    indices: Vec<i64>,
    raise: bool,
    threads: usize,
    out_len: usize,
    /// Whether `out_len` is off the result's length on purpose.
    wrong_length: bool,
}

impl Case {
    /// Everything about the call but the bulk of the buffers.
    fn describe(&self) -> String {
        let z = self.zero_points.as_ref().map(|z| z.len());
        format!(
            "{:?} scales {:?} shape {:?} stored {:?} gather_axis {} quantize_axis {} block_size {} \
             data {} bytes, scales {} bytes, zero points {z:?} bytes, {:?} indices of shape {:?}: \
             {:?}, raise {}, threads {}, out {} bytes (wrong length {})",
            self.kind,
            self.float,
            self.shape,
            self.stored,
            self.gather_axis,
            self.quantize_axis,
            self.block_size,
            self.data.len(),
            self.scales.len(),
            self.index_type,
            self.index_shape,
            &self.indices[..self.indices.len().min(16)],
            self.raise,
            self.threads,
            self.out_len,
            self.wrong_length,
        )
    }

    fn reference(&self, out_len: usize) -> Option<Vec<Elem>> {
        dequantize(&Quantized {
            kind: self.kind,
            shape: &self.shape,
            data: &self.data,
            values: &self.values,
            scales: &self.scales,
            float: self.float,
            zero_points: self.zero_points.as_deref(),
            gather_axis: self.gather_axis,
            quantize_axis: self.quantize_axis,
            block_size: self.block_size,
            indices: &self.indices,
            out_len,
        })
    }

    fn index_bytes(&self) -> Vec<u8> {
        match self.index_type {
            IndexType::I32 => self
                .indices
                .iter()
                .flat_map(|&v| (v as i32).to_ne_bytes())
                .collect(),
            _ => self.indices.iter().flat_map(|&v| v.to_ne_bytes()).collect(),
        }
    }

    /// Whether some array of the call could not exist (see [`too_big`]).
    fn absurd(&self) -> bool {
        let all = [&self.shape[..], &self.index_shape].concat();
        let all_stored = [&self.stored[..], &self.index_shape].concat();
        too_big(
            &[&self.shape, &self.stored, &all, &all_stored],
            self.float.width(),
        )
    }
}

/// An axis (of a call of rank `rank`), rarely past the rank.
fn axis(u: &mut Unstructured<'_>, rank: usize) -> Result<usize> {
    if rank == 0 || one_in(u, 32)? {
        Ok(rank + u.int_in_range(0..=2)?)
    } else {
        u.int_in_range(0..=rank - 1)
    }
}

/// Nudges a buffer's length by a few bytes, rarely.
fn nudge(u: &mut Unstructured<'_>, len: usize) -> Result<usize> {
    Ok(if one_in(u, 24)? {
        len.saturating_add_signed(u.int_in_range(-2..=2)?)
    } else {
        len
    })
}

fn generate(u: &mut Unstructured<'_>, outcomes: &mut Vec<Outcome>) -> Result<()> {
    let mut kind = match u.int_in_range(0..=11)? {
        0..=2 => Kind::Packed(4),
        3 => Kind::Packed(2),
        4 | 5 => Kind::Packed(8),
        6 | 7 => Kind::Int4,
        8 | 9 => Kind::UInt4,
        _ => Kind::Table,
    };
    if one_in(u, 64)? {
        kind = Kind::Packed([0, 1, 3, 16][u.choose_index(4)?]);
    }
    let float = [Float::F32, Float::F16, Float::BF16][u.choose_index(3)?];
    let rank = if one_in(u, 32)? {
        0
    } else {
        u.int_in_range(1..=4)?
    };
    let mut shape = (0..rank).map(|_| dim(u)).collect::<Result<Vec<_>>>()?;
    let gather_axis = axis(u, rank)?;
    let quantize_axis = match kind {
        Kind::Packed(_) if rank > 0 && !one_in(u, 8)? => rank - 1,
        _ => axis(u, rank)?,
    };
    let block_size = match u.int_in_range(0..=31)? {
        0 => 0,
        1 => u.arbitrary()?,
        2..=13 => [16, 32, 64, 128][u.choose_index(4)?],
        14..=25 => u.int_in_range(1..=8)?,
        _ => u.int_in_range(1..=200)?,
    };
    let per = per_byte(kind).unwrap_or(1);
    if quantize_axis < rank {
        // A few blocks, the last one partial or whole.
        if u.arbitrary()? {
            shape[quantize_axis] = u.int_in_range(0..=3 * block_size.min(128) + 2)?;
        }
        if !one_in(u, 16)? {
            if let Some(n) = shape[quantize_axis].checked_next_multiple_of(per) {
                shape[quantize_axis] = n;
            }
        }
    }
    let mut stored = shape.clone();
    if let (Kind::Packed(_), Some(last)) = (kind, stored.last_mut()) {
        *last /= per;
    }
    if one_in(u, 16)? {
        match u.int_in_range(0..=2)? {
            0 => stored.push(1),
            1 => {
                stored.pop();
            }
            // Any axis: only the last (packed) one may differ.
            _ if rank > 0 => {
                let k = u.int_in_range(0..=rank - 1)?;
                if let Some(n) = stored.get_mut(k) {
                    *n = n.wrapping_add(1);
                }
            }
            _ => {}
        }
    }
    let index_type = if u.arbitrary()? {
        IndexType::I64
    } else {
        IndexType::I32
    };
    let index_shape = if one_in(u, 32)? {
        vec![u.int_in_range(0..=600)?]
    } else {
        let r = [0, 1, 1, 1, 2][u.choose_index(5)?];
        (0..r)
            .map(|_| u.int_in_range(0..=6))
            .collect::<Result<Vec<_>>>()?
    };
    let n: usize = index_shape.iter().product();
    let s = shape.get(gather_axis).copied().unwrap_or(3) as i128;
    let indices = (0..n)
        .map(|_| {
            let v = index_value(u, s)?;
            Ok(match index_type {
                IndexType::I32 => i64::from(v as i32),
                _ => v as i64,
            })
        })
        .collect::<Result<Vec<_>>>()?;

    // The buffers' right lengths, for calls small enough to make.
    let width = float.width();
    let elements = count(&shape).filter(|&c| c <= MAX_BUFFER);
    let sshape = if quantize_axis < rank && block_size > 0 {
        scale_shape(&shape, quantize_axis, block_size)
    } else {
        shape.clone()
    };
    let zshape = match kind {
        Kind::Packed(_) => packed_zero_point_shape(&sshape, per),
        _ => sshape.clone(),
    };
    let out_len = if gather_axis < rank {
        let dims = [&shape[..gather_axis], &[n], &shape[gather_axis + 1..]].concat();
        count(&dims)
            .filter(|&c| c <= MAX_OUT)
            .map(|c| c as usize * width)
    } else {
        Some(0)
    };
    let (Some(elements), Some(out_len), Some(n_scales), Some(n_zero_points)) = (
        elements,
        out_len,
        count(&sshape).filter(|&c| c <= MAX_BUFFER),
        count(&zshape).filter(|&c| c <= MAX_BUFFER),
    ) else {
        return Ok(());
    };
    let data_len = nudge(u, elements as usize / per)?;
    let scales_len = nudge(u, n_scales as usize * width)?;
    let zero_points_len = if kind == Kind::Table {
        one_in(u, 16)?.then_some(n_zero_points as usize)
    } else if u.arbitrary()? {
        Some(nudge(u, n_zero_points as usize)?)
    } else {
        None
    };
    let delta = if one_in(u, 32)? {
        u.int_in_range(-3..=3)?
    } else {
        0
    };
    let raise = u.arbitrary()?;
    let threads = u.int_in_range(1..=3)?;

    let mut rng = SplitMix64(u.arbitrary()?);
    let mut bytes = |len: usize| -> Vec<u8> { (0..len).map(|_| rng.next() as u8).collect() };
    let data = bytes(data_len);
    let zero_points = zero_points_len.map(&mut bytes);
    let values = table(&mut rng);
    let scales = scales(&mut rng, float, scales_len);
    let case = Case {
        kind,
        float,
        shape,
        stored,
        data,
        values,
        scales,
        zero_points,
        gather_axis,
        quantize_axis,
        block_size,
        index_type,
        index_shape,
        indices,
        raise,
        threads,
        out_len: out_len.saturating_add_signed(delta),
        wrong_length: delta != 0,
    };
    if std::env::var_os("NDGATHER_FUZZ_DEBUG").is_some() {
        eprintln!("quantized {}", case.describe());
    }
    let shaped = check_shape(&case);
    if matches!(shaped, Some(Outcome::OutOfRange)) {
        outcomes.push(Outcome::OutOfRange);
    }
    outcomes.push(check_gather(&case, out_len));
    Ok(())
}

/// The table of float codes: mostly values of few significant bits (as
/// the 8- and 4-bit float types have), some of any bits, some specials.
fn table(rng: &mut SplitMix64) -> Box<[f32; 256]> {
    const SPECIALS: [f32; 10] = [
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e-45,
        f32::MAX,
        448.0,
        -57344.0,
    ];
    let mut t = Box::new([0f32; 256]);
    for v in t.iter_mut() {
        let r = rng.next();
        *v = match r % 16 {
            0 => SPECIALS[(r >> 8) as usize % SPECIALS.len()],
            1..=3 => f32::from_bits((r >> 32) as u32),
            _ => {
                let sign = if r & 0x100 != 0 { -1.0 } else { 1.0 };
                let mantissa = ((r >> 9) % 8) as f32;
                let exponent = ((r >> 12) % 19) as i32 - 10;
                sign * (1.0 + mantissa / 8.0) * 2f32.powi(exponent)
            }
        };
    }
    t
}

/// `len` bytes of scales of type `float`: mostly near one (the products
/// land anywhere in a 16-bit type's range, with ties to round), a quarter
/// of any bits.
fn scales(rng: &mut SplitMix64, float: Float, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 4);
    while out.len() < len {
        let r = rng.next();
        let raw = r & 3 == 0;
        let (sign, e, m) = ((r >> 2) & 1, (r >> 3) % 17, r >> 16);
        match float {
            Float::F32 if raw => out.extend_from_slice(&((r >> 32) as u32).to_ne_bytes()),
            Float::F32 => {
                let bits = (sign << 31) | ((115 + e) << 23) | (m & 0x7f_ffff);
                out.extend_from_slice(&(bits as u32).to_ne_bytes());
            }
            _ if raw => out.extend_from_slice(&((r >> 32) as u16).to_ne_bytes()),
            Float::F16 => {
                let bits = (sign << 15) | ((7 + e) << 10) | (m & 0x3ff);
                out.extend_from_slice(&(bits as u16).to_ne_bytes());
            }
            Float::BF16 => {
                let bits = (sign << 15) | ((115 + e) << 7) | (m & 0x7f);
                out.extend_from_slice(&(bits as u16).to_ne_bytes());
            }
        }
    }
    out.truncate(len);
    out
}

/// `block_quantized_out_shape` against the reference; `None` when the
/// call is absurd and the core refused it.
fn check_shape(case: &Case) -> Option<Outcome> {
    let bytes = case.index_bytes();
    let itemsize = case.index_type.itemsize();
    let mut strides = vec![0isize; case.index_shape.len()];
    let mut step = itemsize;
    for (s, &n) in strides.iter_mut().zip(&case.index_shape).rev() {
        *s = step as isize;
        step *= n.max(1);
    }
    let view = ArrayView {
        bytes: &bytes,
        offset: 0,
        shape: &case.index_shape,
        strides: &strides,
        itemsize,
    };
    let mode = if case.raise { Mode::Raise } else { Mode::Zero };
    let got = block_quantized_out_shape(
        &case.stored,
        &case.shape,
        case.gather_axis,
        view,
        case.index_type,
        mode,
        case.threads,
    );
    let want = out_shape(
        &case.stored,
        &case.shape,
        case.gather_axis,
        &case.index_shape,
        &case.indices,
        case.raise,
    );
    match (want, got) {
        (Shaped::Invalid, Err(GatherError::InvalidArgument(_))) => Some(Outcome::Invalid),
        (Shaped::Bad(want), Err(GatherError::IndexOutOfRange(got))) => {
            assert_eq!(
                got,
                want,
                "out shape: the error names another index\n  {}",
                case.describe()
            );
            Some(Outcome::OutOfRange)
        }
        (Shaped::Ok(want), Ok(got)) => {
            assert_eq!(got, want, "out shape\n  {}", case.describe());
            Some(Outcome::Exact)
        }
        (_, Err(_)) if case.absurd() => None,
        (want, got) => panic!(
            "out shape: reference says {want:?}, core says {got:?}\n  {}",
            case.describe()
        ),
    }
}

/// `gather_block_quantized` against the reference (`right_len`: the
/// output's length the call needs, if it has one).
fn check_gather(case: &Case, right_len: usize) -> Outcome {
    let codes = match case.kind {
        Kind::Packed(bits) => Codes::Packed {
            bytes: &case.data,
            bits,
        },
        Kind::Int4 => Codes::Int4(&case.data),
        Kind::UInt4 => Codes::UInt4(&case.data),
        Kind::Table => Codes::Table {
            bytes: &case.data,
            values: &case.values,
        },
    };
    let q = BlockQuantized {
        codes,
        shape: &case.shape,
        scales: &case.scales,
        scale_type: match case.float {
            Float::F32 => ScaleType::Float32,
            Float::F16 => ScaleType::Float16,
            Float::BF16 => ScaleType::BFloat16,
        },
        zero_points: case.zero_points.as_deref(),
        gather_axis: case.gather_axis,
        quantize_axis: case.quantize_axis,
        block_size: case.block_size,
    };
    let bytes = case.index_bytes();
    let indices = match case.index_type {
        IndexType::I32 => Indices::I32(&bytes),
        _ => Indices::I64(&bytes),
    };
    let mut out = vec![UNTOUCHED; case.out_len];
    let got = gather_block_quantized(&q, indices, &mut out, case.threads);
    let want = case.reference(case.out_len);
    let untouched = out.iter().all(|&b| b == UNTOUCHED);
    let describe = case.describe();
    match (want, got) {
        (None, Err(GatherError::InvalidArgument(_))) => {
            assert!(untouched, "output written before an error\n  {describe}");
            if case.wrong_length && case.reference(right_len).is_some() {
                Outcome::WrongLength
            } else {
                Outcome::Invalid
            }
        }
        (Some(want), Ok(())) => {
            compare(case, &want, &out);
            Outcome::Exact
        }
        (_, Err(_)) if case.absurd() => {
            assert!(untouched, "output written before an error\n  {describe}");
            Outcome::Overflow
        }
        (None, got) => panic!("reference refuses the call, core says {got:?}\n  {describe}"),
        (Some(_), got) => panic!("reference succeeds, core says {got:?}\n  {describe}"),
    }
}

/// The core's output elements against the reference's.
fn compare(case: &Case, want: &[Elem], out: &[u8]) {
    let width = case.float.width();
    assert_eq!(
        Some(out.len()),
        bytes_of(&[want.len()], width),
        "{}",
        case.describe()
    );
    if let Shaped::Ok(shape) = out_shape(
        &case.shape,
        &case.shape,
        case.gather_axis,
        &case.index_shape,
        &case.indices,
        false,
    ) {
        // The shape `block_quantized_out_shape` gives (checked against this
        // one) holds exactly the elements the gather wrote.
        assert_eq!(
            bytes_of(&shape, width),
            Some(out.len()),
            "{}",
            case.describe()
        );
    }
    for (k, (w, b)) in want.iter().zip(out.chunks_exact(width)).enumerate() {
        let got = match width {
            4 => u32::from_ne_bytes([b[0], b[1], b[2], b[3]]),
            _ => u32::from(u16::from_ne_bytes([b[0], b[1]])),
        };
        let ok = match *w {
            Elem::Bits(bits) => bits == got,
            Elem::Nan => case.float.is_nan(got),
        };
        assert!(
            ok,
            "wrong element {k} of {}: reference {w:x?}, core {got:#x}\n  {}",
            want.len(),
            case.describe()
        );
    }
}
