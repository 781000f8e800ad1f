//! The naive references: whether a view lies inside its buffer, what
//! planning a call must give, and its output bytes or first bad index,
//! computed on coordinates, one element at a time, in `i128`; and
//! [`check`], which compares the core with them.

use ndgather::prepared::Prepared;
use ndgather::{
    plan_gather, plan_gather_nd, ArrayView, GatherError, IndexType, Mode, Operator, OutOfRange,
    Validation,
};

use crate::{count, for_each_coord, Call};

/// Calls with more output elements or stored indices than this are planned
/// but not executed (the reference would be too slow).
pub const MAX_ELEMS: u128 = 1 << 12;
/// Largest output executed: enough for the non-temporal path (16 MiB).
pub const MAX_OUT_BYTES: u128 = 20 << 20;
/// Pattern a caller's output holds before the call.
pub(crate) const UNTOUCHED: u8 = 0xA5;

/// What the reference says about one view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every element lies inside the buffer.
    Valid,
    /// Some element does not.
    Invalid,
    /// The view touches no byte but its offset lies beyond its buffer:
    /// accepting it and rejecting it are both fine (nothing is read).
    Either,
}

/// Whether every element of `v` lies inside its buffer, by the extreme
/// corners in `i128` (exact: the position is a sum of independent terms).
pub fn verdict(v: &ArrayView<'_>) -> Verdict {
    if v.shape.len() != v.strides.len() {
        return Verdict::Invalid;
    }
    let len = v.bytes.len() as i128;
    let empty = v.shape.contains(&0);
    let (mut lo, mut hi) = (v.offset as i128, v.offset as i128);
    if !empty {
        for (&n, &s) in v.shape.iter().zip(v.strides) {
            let reach = (n as i128 - 1) * s as i128;
            // Saturating: six absurd axes can pass i128 (then far outside).
            if reach < 0 {
                lo = lo.saturating_add(reach);
            } else {
                hi = hi.saturating_add(reach);
            }
        }
    }
    let touches_nothing = empty || (v.itemsize == 0 && lo == hi);
    let inside = if touches_nothing {
        v.offset <= v.bytes.len()
    } else {
        lo >= 0 && hi.saturating_add(v.itemsize as i128) <= len
    };
    match (inside, touches_nothing) {
        (false, false) => Verdict::Invalid,
        // Nothing is read, wherever the offset points.
        (false, true) => Verdict::Either,
        // Axes longer than `isize::MAX` (only ever inside a buffer with a
        // zero stride, or next to an empty axis) may be refused: no array
        // can have them.
        (true, _) if !empty && v.shape.iter().any(|&n| n > isize::MAX as usize) => Verdict::Either,
        (true, _) => Verdict::Valid,
    }
}

/// Reads a stored index exactly.
fn load(ty: IndexType, b: &[u8]) -> i128 {
    match ty {
        IndexType::I8 => i8::from_ne_bytes([b[0]]) as i128,
        IndexType::U8 => b[0] as i128,
        IndexType::I16 => i16::from_ne_bytes(b[..2].try_into().unwrap()) as i128,
        IndexType::U16 => u16::from_ne_bytes(b[..2].try_into().unwrap()) as i128,
        IndexType::I32 => i32::from_ne_bytes(b[..4].try_into().unwrap()) as i128,
        IndexType::U32 => u32::from_ne_bytes(b[..4].try_into().unwrap()) as i128,
        IndexType::I64 => i64::from_ne_bytes(b[..8].try_into().unwrap()) as i128,
        IndexType::U64 => u64::from_ne_bytes(b[..8].try_into().unwrap()) as i128,
    }
}

/// The operator's attributes.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    GatherNd { batch_dims: i64 },
    Gather { axis: i64, batch_dims: i64 },
}

/// What the reference expects of the planning.
#[derive(Debug)]
enum Planned {
    /// Shapes or attributes break a rule (or a view is broken).
    Invalid,
    /// The output would not fit `isize` bytes.
    Overflow,
    /// Valid, with this output shape.
    Ok { out_shape: Vec<usize> },
}

/// The normalised attributes of a valid call.
#[derive(Clone, Copy, Debug)]
enum Attrs {
    GatherNd { b: usize, k: usize },
    Gather { axis: usize, b: usize },
}

/// What planning `call` as `op` must give, and whether refusing it as an
/// invalid argument is fine too (a view is [`Verdict::Either`]).
fn plan_reference(call: &Call, op: Op) -> (Planned, bool, Option<Attrs>) {
    let dv = verdict(&call.data.view());
    let iv = verdict(&call.indices.view());
    if dv == Verdict::Invalid
        || iv == Verdict::Invalid
        || call.indices.itemsize != call.index_type.itemsize()
    {
        return (Planned::Invalid, false, None);
    }
    let maybe_invalid = dv == Verdict::Either || iv == Verdict::Either;
    // NumPy's bound on every array, empty ones too.
    if !numpy_fits(&call.data.shape, call.data.itemsize)
        || !numpy_fits(&call.indices.shape, call.indices.itemsize)
    {
        return (Planned::Overflow, maybe_invalid, None);
    }
    let (planned, attrs) = plan_rules(call, op);
    (planned, maybe_invalid, attrs)
}

/// The operators' rules on shapes and attributes, for valid views.
fn plan_rules(call: &Call, op: Op) -> (Planned, Option<Attrs>) {
    let ds = &call.data.shape;
    let is = &call.indices.shape;
    let (r, q) = (ds.len(), is.len());
    let (out_shape, attrs) = match op {
        Op::GatherNd { batch_dims } => {
            if r == 0 || q == 0 {
                return (Planned::Invalid, None);
            }
            let b = batch_dims as i128;
            if b < 0 || b >= r.min(q) as i128 {
                return (Planned::Invalid, None);
            }
            let b = b as usize;
            let k = is[q - 1];
            if k < 1 || k > r - b || ds[..b] != is[..b] {
                return (Planned::Invalid, None);
            }
            let out: Vec<usize> = is[..q - 1].iter().chain(&ds[b + k..]).copied().collect();
            (out, Attrs::GatherNd { b, k })
        }
        Op::Gather { axis, batch_dims } => {
            let mut a = axis as i128;
            if a < 0 {
                a += r as i128;
            }
            let mut b = batch_dims as i128;
            if b < 0 {
                b += q as i128;
            }
            if !(0..r as i128).contains(&a) || !(0..=q as i128).contains(&b) || b > a {
                return (Planned::Invalid, None);
            }
            let (a, b) = (a as usize, b as usize);
            if ds[..b] != is[..b] {
                return (Planned::Invalid, None);
            }
            let out: Vec<usize> = ds[..a]
                .iter()
                .chain(&is[b..])
                .chain(&ds[a + 1..])
                .copied()
                .collect();
            (out, Attrs::Gather { axis: a, b })
        }
    };
    if !numpy_fits(&out_shape, call.data.itemsize) {
        return (Planned::Overflow, Some(attrs));
    }
    (Planned::Ok { out_shape }, Some(attrs))
}

/// Whether an array of `shape` could exist in NumPy: the axes that are not
/// empty fit `isize` in elements and in bytes (a zero-size array too).
fn numpy_fits(shape: &[usize], itemsize: usize) -> bool {
    let nonzero: Vec<usize> = shape.iter().copied().filter(|&n| n != 0).collect();
    let elems = count(&nonzero).filter(|&n| n <= isize::MAX as u128);
    let bytes = elems.and_then(|n| n.checked_mul(itemsize as u128));
    bytes.is_some_and(|b| b <= isize::MAX as u128)
}

/// Resolves a stored index on an axis of `s`; `None` if it addresses
/// nothing (with `Clip`, only on an empty axis).
fn resolve(v: i128, s: usize, mode: Mode, wrap: bool) -> Option<usize> {
    let s = s as i128;
    let w = if v < 0 && wrap { v + s } else { v };
    match mode {
        Mode::Clip => (s > 0).then(|| w.clamp(0, s - 1) as usize),
        Mode::Raise | Mode::Zero => (0 <= w && w < s).then_some(w as usize),
    }
}

/// The result the reference computes: the output bytes, or the first bad
/// index in C order of `indices`.
fn result_reference(call: &Call, attrs: Attrs, out_shape: &[usize]) -> Expected {
    let wrap = !call.reject_negative;
    let mode = call.mode;
    let ds = &call.data.shape;
    let is = &call.indices.shape;
    let ty = call.index_type;
    let value = |coords: &[usize]| load(ty, call.indices.elem(coords));
    let fails = |v: i128, s: usize| match mode {
        Mode::Raise => resolve(v, s, mode, wrap).is_none(),
        Mode::Clip => s == 0,
        Mode::Zero => false,
    };
    let bad = |value: i128, position: Vec<usize>, tuple, axis: usize| OutOfRange {
        value,
        position,
        tuple,
        axis,
        axis_size: ds[axis],
        data_shape: ds.clone(),
        negatives_allowed: wrap,
    };
    // Every stored index is checked, in C order, whatever the output.
    let mut first_bad = None;
    match attrs {
        Attrs::GatherNd { b, k } => {
            let q = is.len();
            let mut pos = vec![0; q];
            for_each_coord(&is[..q - 1], |row| {
                pos[..q - 1].copy_from_slice(row);
                let tuple: Vec<i128> = (0..k)
                    .map(|j| {
                        pos[q - 1] = j;
                        value(&pos)
                    })
                    .collect();
                match (0..k).find(|&j| fails(tuple[j], ds[b + j])) {
                    Some(j) => {
                        let position = [row, &[j]].concat();
                        first_bad = Some(bad(tuple[j], position, Some(tuple), b + j));
                        false
                    }
                    None => true,
                }
            });
        }
        Attrs::Gather { axis, .. } => {
            for_each_coord(is, |pos| {
                let v = value(pos);
                if fails(v, ds[axis]) {
                    first_bad = Some(bad(v, pos.to_vec(), None, axis));
                    return false;
                }
                true
            });
        }
    }
    if let Some(e) = first_bad {
        return Expected::Bad(e);
    }
    let w = call.data.itemsize;
    let mut out = Vec::new();
    let mut dc = Vec::with_capacity(ds.len());
    let mut ic = Vec::with_capacity(is.len());
    for_each_coord(out_shape, |oc| {
        // The data coordinates of this output element, unless it is
        // zero-filled.
        dc.clear();
        ic.clear();
        let mut zero = false;
        match attrs {
            Attrs::GatherNd { b, k } => {
                let rank = is.len() - 1;
                dc.extend(&oc[..b]);
                ic.extend(&oc[..rank]);
                ic.push(0);
                for j in 0..k {
                    ic[rank] = j;
                    match resolve(value(&ic), ds[b + j], mode, wrap) {
                        Some(x) => dc.push(x),
                        None => zero = true,
                    }
                }
                dc.extend(&oc[rank..]);
            }
            Attrs::Gather { axis, b } => {
                let extra = is.len() - b;
                ic.extend(&oc[..b]);
                ic.extend(&oc[axis..axis + extra]);
                dc.extend(&oc[..axis]);
                match resolve(value(&ic), ds[axis], mode, wrap) {
                    Some(x) => dc.push(x),
                    None => zero = true,
                }
                dc.extend(&oc[axis + extra..]);
            }
        }
        if zero {
            out.resize(out.len() + w, 0);
        } else {
            out.extend_from_slice(call.data.elem(&dc));
        }
        true
    });
    Expected::Bytes(out)
}

/// What executing a valid call must give.
pub(crate) enum Expected {
    /// The output's bytes.
    Bytes(Vec<u8>),
    /// This error: the first bad index in C order of `indices`.
    Bad(OutOfRange),
}

/// How a call checked by [`check`] ended (the core and the reference
/// agreed on it), so that a replay can tell which paths its inputs reach.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Outcome {
    /// Planning refused an invalid argument.
    Invalid,
    /// Planning refused an output (or array) too large for NumPy.
    Overflow,
    /// Planned, but too large to check element by element: not executed.
    PlannedOnly,
    /// An output buffer of the wrong length was refused, untouched.
    WrongLength,
    /// Executed: the output equals the reference's bytes.
    Exact,
    /// Executed: both found the same first bad index.
    OutOfRange,
    /// The row path declined a valid call outside what it takes (no ids,
    /// more than `MAX_ROW_IDS`, rows beyond `MAX_ROW_BYTES`, empty rows), its
    /// output untouched.
    Declined,
}

/// Plans and executes `call` as `op` and checks "error or exact result"
/// against the references. Panics (a finding) on any disagreement; else
/// says how the call ended.
pub fn check(call: &Call, op: Op) -> Outcome {
    if std::env::var_os("NDGATHER_FUZZ_DEBUG").is_some() {
        eprintln!("{op:?} {}", call.describe());
    }
    let (dv, iv) = (call.data.view(), call.indices.view());
    let planned = match op {
        Op::GatherNd { batch_dims } => plan_gather_nd(dv, iv, call.index_type, batch_dims),
        Op::Gather { axis, batch_dims } => plan_gather(dv, iv, call.index_type, axis, batch_dims),
    };
    let (want, maybe_invalid, attrs) = plan_reference(call, op);
    let (plan, out_shape) = match (want, planned) {
        (Planned::Invalid, Err(GatherError::InvalidArgument(_))) => return Outcome::Invalid,
        (Planned::Overflow, Err(GatherError::Overflow(_))) => return Outcome::Overflow,
        (_, Err(GatherError::InvalidArgument(_))) if maybe_invalid => return Outcome::Invalid,
        (Planned::Ok { out_shape, .. }, Ok(plan)) => {
            assert_eq!(plan.out_shape(), &out_shape[..], "output shape");
            let bytes = count(&out_shape).unwrap() as usize * call.data.itemsize;
            assert_eq!(plan.out_bytes(), bytes, "output bytes");
            (plan, out_shape)
        }
        (want, got) => panic!("planning: reference says {want:?}, core says {got:?}"),
    };
    let attrs = attrs.expect("a valid call has attributes");
    let plan = if call.reject_negative {
        plan.reject_negative_indices()
    } else {
        plan
    };
    // Too large to check element by element: planned only.
    let stored = count(&call.indices.shape).unwrap_or(u128::MAX);
    let elems = count(&out_shape).unwrap_or(u128::MAX);
    if stored > MAX_ELEMS || elems > MAX_ELEMS || plan.out_bytes() as u128 > MAX_OUT_BYTES {
        return Outcome::PlannedOnly;
    }
    let len = plan.out_bytes().saturating_add_signed(call.out_len_delta);
    let mut out = vec![UNTOUCHED; len];
    let got = plan.execute(call.mode, &mut out, call.validation, call.threads);
    let fresh = vec![UNTOUCHED; len];
    let untouched = |out: &[u8]| out == &fresh[..];
    if len != plan.out_bytes() {
        assert!(
            matches!(got, Err(GatherError::InvalidArgument(_))),
            "wrong output length accepted: {got:?}"
        );
        assert!(untouched(&out), "output of the wrong length written");
        return Outcome::WrongLength;
    }
    let expected = result_reference(call, attrs, &out_shape);
    if !call.reject_negative {
        check_prepared(call, op, &expected);
    }
    check_cast(call, &plan, &expected);
    crate::chunked::check_chunked(call, op, &expected);
    match (expected, got) {
        (Expected::Bytes(want), Ok(())) => {
            if out != want {
                let at = out.iter().zip(&want).position(|(a, b)| a != b);
                panic!(
                    "wrong bytes: first difference at byte {at:?} of {}",
                    want.len()
                );
            }
            Outcome::Exact
        }
        (Expected::Bad(want), Err(GatherError::IndexOutOfRange(got))) => {
            assert_eq!(*got, want, "the error names another index");
            if call.validation == Validation::BeforeWriting {
                assert!(untouched(&out), "out= written before an error");
            }
            Outcome::OutOfRange
        }
        (Expected::Bytes(_), got) => panic!("reference succeeds, core says {got:?}"),
        (Expected::Bad(want), got) => panic!("reference finds {want}, core says {got:?}"),
    }
}

/// A widening conversion (`dtype=`) the oracle replays a call with, and
/// its reference: one element of `from` bytes to the bytes of `to`,
/// worked out here from the formats, sharing no code with the core.
pub(crate) struct Widening {
    pub(crate) cast: ndgather::Cast,
    to: usize,
    one: OneElement,
}

/// One element's bytes converted.
type OneElement = fn(&[u8]) -> Vec<u8>;

impl Widening {
    /// The conversion for `call`'s element width: signed integers to
    /// `int64` or (1 byte) `float32`, 2-byte elements also as float16 or
    /// bfloat16 to `float32`, 8-byte integers to `float64`; which one
    /// depends on the call's geometry, so that the inputs take them all.
    pub(crate) fn of(call: &Call) -> Option<Widening> {
        use ndgather::{Cast, Scalar};
        let pick = call.data.shape.len() + call.indices.shape.len() + call.threads;
        let (from, to, one): (Scalar, Scalar, OneElement) = match (call.data.itemsize, pick % 3) {
            (1, 0) => (Scalar::I8, Scalar::F32, |b| {
                (b[0] as i8 as f32).to_ne_bytes().to_vec()
            }),
            (1, _) => (Scalar::I8, Scalar::I64, |b| {
                i64::from(b[0] as i8).to_ne_bytes().to_vec()
            }),
            (2, 0) => (Scalar::F16, Scalar::F32, |b| {
                f16_to_f32(u16::from_ne_bytes([b[0], b[1]]))
            }),
            (2, 1) => (Scalar::BF16, Scalar::F32, |b| {
                (u32::from(u16::from_ne_bytes([b[0], b[1]])) << 16)
                    .to_ne_bytes()
                    .to_vec()
            }),
            (2, _) => (Scalar::I16, Scalar::I64, |b| {
                i64::from(i16::from_ne_bytes([b[0], b[1]]))
                    .to_ne_bytes()
                    .to_vec()
            }),
            (4, _) => (Scalar::I32, Scalar::I64, |b| {
                i64::from(i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .to_ne_bytes()
                    .to_vec()
            }),
            (8, _) => (Scalar::I64, Scalar::F64, |b| {
                let mut v = [0u8; 8];
                v.copy_from_slice(b);
                (i64::from_ne_bytes(v) as f64).to_ne_bytes().to_vec()
            }),
            _ => return None,
        };
        let cast = Cast::new(from, false, to, false).expect("a widening cast");
        Some(Widening {
            cast,
            to: to.size(),
            one,
        })
    }

    /// The plain result's bytes, converted.
    pub(crate) fn convert(&self, bytes: &[u8], from: usize) -> Vec<u8> {
        let out: Vec<u8> = bytes.chunks_exact(from).flat_map(self.one).collect();
        debug_assert_eq!(out.len(), bytes.len() / from * self.to);
        out
    }
}

/// The bits of an IEEE binary16 value as binary32, from the formats: every
/// float16 is a float32 exactly, and a NaN keeps its payload (the widening
/// NumPy makes on x86-64).
fn f16_to_f32(h: u16) -> Vec<u8> {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match exp {
        0x1f => sign | 0x7f80_0000 | (man << 13),
        0 => {
            // Subnormal or zero: man * 2^-24, exact in binary32.
            let v = man as f32 * f32::from_bits(0x3380_0000);
            sign | v.to_bits()
        }
        _ => sign | ((exp + 127 - 15) << 23) | (man << 13),
    };
    bits.to_ne_bytes().to_vec()
}

/// The same call gathering into a wider type (`dtype=`, see [`Widening`]),
/// on the one-shot path: checked against the reference's bytes converted
/// here; an error must be the plain call's, with the output untouched.
fn check_cast(call: &Call, plan: &ndgather::Plan<'_>, expected: &Expected) {
    let Some(widening) = Widening::of(call) else {
        return;
    };
    let plan = match plan.clone().with_cast(widening.cast) {
        Ok(plan) => plan,
        // A slice whose bytes, widened, would pass `isize::MAX` (raw views
        // of huge broadcast axes reach it): refusing it is the documented
        // answer.
        Err(GatherError::Overflow(_)) => return,
        Err(e) => panic!("cast: planning the conversion failed: {e:?}"),
    };
    let mut out = vec![UNTOUCHED; plan.out_bytes()];
    let got = plan.execute(call.mode, &mut out, call.validation, call.threads);
    match (expected, got) {
        (Expected::Bytes(want), Ok(())) => {
            let want = widening.convert(want, call.data.itemsize);
            assert!(out == want, "cast {:?}: wrong bytes", widening.cast);
        }
        (Expected::Bad(want), Err(GatherError::IndexOutOfRange(got))) => {
            assert_eq!(*got, *want, "cast: the error names another index");
            if call.validation == Validation::BeforeWriting {
                assert!(
                    out.iter().all(|&b| b == UNTOUCHED),
                    "cast: out= written before an error"
                );
            }
        }
        (_, got) => panic!("cast: the plain call and the cast disagree: {got:?}"),
    }
}

/// Runs `call` (with `mode="raise"` or `mode="clip"` from a C-contiguous table, by
/// C-contiguous `int32` or `int64` ids: what the row path serves) through
/// `ndgather::rows::take_tuples_in` and checks it against the references: the
/// reference's bytes; or, declined with the output untouched, a bad index
/// the reference finds too, or a call the path does not take. With
/// one-dimensional ids, the call is `gather` on axis 0 (the ids name
/// rows); with ids of shape `(count, k)`, `gather_nd` by tuples of `k`
/// indices into the table's first `k` axes; with ids of shape
/// `(batches, count, k)`, the same with `batch_dims=1`.
pub fn check_rows(call: &Call) -> Outcome {
    if std::env::var_os("NDGATHER_FUZZ_DEBUG").is_some() {
        eprintln!("rows {}", call.describe());
    }
    let (data, ids) = (&call.data, &call.indices);
    let (op, b, k) = match ids.shape[..] {
        [_] => (
            Op::Gather {
                axis: 0,
                batch_dims: 0,
            },
            0,
            1,
        ),
        [_, k] => (Op::GatherNd { batch_dims: 0 }, 0, k),
        [_, _, k] => (Op::GatherNd { batch_dims: 1 }, 1, k),
        _ => panic!("the row generator made ids of rank {}", ids.shape.len()),
    };
    let (Planned::Ok { out_shape }, _, Some(attrs)) = plan_reference(call, op) else {
        panic!("the row generator made a call the reference refuses");
    };
    let batches = data.shape[..b].iter().product::<usize>();
    let (dims, row_shape) = data.shape[b..].split_at(k);
    let row_bytes = row_shape.iter().product::<usize>() * data.itemsize;
    let len = batches * dims.iter().product::<usize>() * row_bytes;
    let table = ndgather::rows::RowTable {
        bytes: &data.bytes[data.offset..][..len],
        batches,
        dims,
        row_bytes,
    };
    let count = ids.shape.iter().product::<usize>() / k;
    let values = ids.bytes[ids.offset..]
        .chunks_exact(ids.itemsize)
        .take(count * k)
        .map(|b| load(call.index_type, b));
    let mut out = vec![UNTOUCHED; count * row_bytes];
    let run = |copy: &mut (dyn FnMut() + Send)| copy();
    let clip = match call.mode {
        Mode::Raise => false,
        Mode::Clip => true,
        Mode::Zero => panic!("the row path serves no mode=\"zero\""),
    };
    let got = match call.index_type {
        IndexType::I32 => {
            let ids: Vec<i32> = values.map(|v| v as i32).collect();
            ndgather::rows::take_tuples_in(table, &ids, &mut out, None, clip, run)
        }
        IndexType::I64 => {
            let ids: Vec<i64> = values.map(|v| v as i64).collect();
            ndgather::rows::take_tuples_in(table, &ids, &mut out, None, clip, run)
        }
        other => panic!("the row path reads no {other:?} ids"),
    };
    let takes = (1..=ndgather::rows::MAX_ROW_IDS).contains(&count)
        && row_bytes > 0
        && count * row_bytes <= ndgather::rows::MAX_ROW_BYTES;
    let untouched = out.iter().all(|&b| b == UNTOUCHED);
    match (result_reference(call, attrs, &out_shape), got) {
        (Expected::Bytes(want), Ok(())) => {
            assert!(takes, "the row path took a call outside its limits");
            assert!(out == want, "row path: wrong bytes");
            Outcome::Exact
        }
        (Expected::Bytes(_), Err(_)) => {
            assert!(!takes, "the row path declined a valid call it takes");
            assert!(untouched, "the row path wrote before declining");
            Outcome::Declined
        }
        (Expected::Bad(_), Err(_)) => {
            assert!(untouched, "the row path wrote before a bad index");
            Outcome::OutOfRange
        }
        (Expected::Bad(want), Ok(())) => panic!("the row path copied past the bad index {want}"),
    }
}

/// The same call prepared for `data`'s shape ([`Prepared`]), then run on
/// `data`: the reference's bytes, or at prepare time its first bad index.
fn check_prepared(call: &Call, op: Op, expected: &Expected) {
    let op = match op {
        Op::GatherNd { batch_dims } => Operator::GatherNd { batch_dims },
        Op::Gather { axis, batch_dims } => Operator::Gather { axis, batch_dims },
    };
    let (dv, iv) = (call.data.view(), call.indices.view());
    let prepared = Prepared::new(op, dv.shape, iv, call.index_type, call.mode, call.threads);
    match (expected, prepared) {
        (Expected::Bytes(want), Ok(p)) => {
            let bound = p.bind(dv).expect("a prepared call on its own shape");
            let mut out = vec![UNTOUCHED; bound.out_bytes()];
            bound
                .execute(&mut out, call.threads)
                .expect("a prepared call cannot fail");
            assert!(out == *want, "prepared: wrong bytes");
            if let Some(widening) = Widening::of(call) {
                let Ok(cast) = p.bind(dv).expect("bound above").with_cast(widening.cast) else {
                    return; // too large once widened, as the one-shot cast
                };
                let mut out = vec![UNTOUCHED; cast.out_bytes()];
                cast.execute(&mut out, call.threads)
                    .expect("a prepared call cannot fail");
                let want = widening.convert(want, call.data.itemsize);
                assert!(
                    out == want,
                    "prepared cast {:?}: wrong bytes",
                    widening.cast
                );
            }
        }
        (Expected::Bad(want), Err(GatherError::IndexOutOfRange(got))) => {
            assert_eq!(*got, *want, "prepared: the error names another index");
        }
        (Expected::Bytes(_), got) => panic!("prepared: reference succeeds, core says {got:?}"),
        (Expected::Bad(want), got) => {
            panic!(
                "prepared: reference finds {want}, core says {:?}",
                got.err()
            )
        }
    }
}
