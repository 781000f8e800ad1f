//! The naive reference for ndgather's core, and the generators of the
//! inputs it is checked on: arrays of any geometry built from arbitrary
//! bytes, and naive references for `gather_nd` and `gather`.
//!
//! Each of [`gather_nd`], [`gather`] and [`views`] turns one input (a byte
//! string) into calls, makes them and checks them with [`check`]. The
//! cargo-fuzz targets in `fuzz/fuzz_targets/` feed them the fuzzer's bytes
//! (nightly); the root crate's `tests/oracle.rs` feeds them seeded
//! pseudo-random bytes in a plain `cargo test` (stable).
//!
//! Every check has the form "error or exact result": when the core returns
//! `Ok`, its bytes must equal the reference's; when it returns an error,
//! the reference must agree that the input is invalid (and name the same
//! first bad index), and a caller's output (`Validation::BeforeWriting`)
//! must be untouched.
//!
//! The references work on coordinates, one element at a time, with `i128`
//! arithmetic: they share no code and no idea (coalescing, offsets tables,
//! odometers) with the core.

pub mod gather;
pub mod gather_nd;
pub mod views;

use arbitrary::{Result, Unstructured};
use ndgather::{
    plan_gather, plan_gather_nd, ArrayView, GatherError, IndexType, Mode, OutOfRange, Validation,
};

/// Largest buffer the generators build for one array (its touched bytes).
pub const MAX_SPAN: usize = 1 << 20;
/// Calls with more output elements or stored indices than this are planned
/// but not executed (the reference would be too slow).
pub const MAX_ELEMS: u128 = 1 << 12;
/// Largest output executed: enough for the non-temporal path (16 MiB).
pub const MAX_OUT_BYTES: u128 = 20 << 20;
/// Pattern a caller's output holds before the call.
const UNTOUCHED: u8 = 0xA5;

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

/// True one time in `n` (on the fuzzer's choice). False once the input is
/// used up, so that the rare branches stay rare for short inputs
/// (`Unstructured::ratio` is true then).
pub fn one_in(u: &mut Unstructured<'_>, n: u32) -> Result<bool> {
    Ok(u.int_in_range(1..=n)? == n)
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

/// Bytes that differ from their neighbours, computed once: buffers are
/// filled by copying from it (a byte loop per call would cost more than
/// the gather, with every compare traced for the fuzzer).
pub fn pattern() -> &'static [u8] {
    static PATTERN: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    PATTERN.get_or_init(|| {
        (0..MAX_SPAN + 64)
            .map(|i| ((i as u64 ^ 0x5555).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect()
    })
}

/// Fills `bytes` with [`pattern`].
fn fill_pattern(bytes: &mut [u8]) {
    for chunk in bytes.chunks_mut(MAX_SPAN) {
        chunk.copy_from_slice(&pattern()[..chunk.len()]);
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

/// Stores `v` as `ty` (truncated as a C cast would).
fn store(ty: IndexType, v: i128, b: &mut [u8]) {
    let w = ty.itemsize();
    let bytes: [u8; 8] = match ty {
        IndexType::I8 | IndexType::U8 => {
            let mut a = [0; 8];
            a[0] = v as u8;
            a
        }
        IndexType::I16 | IndexType::U16 => {
            let mut a = [0; 8];
            a[..2].copy_from_slice(&(v as u16).to_ne_bytes());
            a
        }
        IndexType::I32 | IndexType::U32 => {
            let mut a = [0; 8];
            a[..4].copy_from_slice(&(v as u32).to_ne_bytes());
            a
        }
        IndexType::I64 | IndexType::U64 => (v as u64).to_ne_bytes(),
    };
    b[..w].copy_from_slice(&bytes[..w]);
}

const INDEX_TYPES: [IndexType; 8] = [
    IndexType::I8,
    IndexType::I16,
    IndexType::I32,
    IndexType::I64,
    IndexType::U8,
    IndexType::U16,
    IndexType::U32,
    IndexType::U64,
];

pub fn index_type(u: &mut Unstructured<'_>) -> Result<IndexType> {
    Ok(INDEX_TYPES[u.choose_index(INDEX_TYPES.len())?])
}

pub fn mode(u: &mut Unstructured<'_>) -> Result<Mode> {
    Ok([Mode::Raise, Mode::Zero, Mode::Clip][u.choose_index(3)?])
}

/// An element width: the kernel's fixed widths, odd ones, zero, and large.
pub fn itemsize(u: &mut Unstructured<'_>) -> Result<usize> {
    const W: [usize; 20] = [
        1, 2, 4, 8, 3, 6, 12, 16, 24, 32, 48, 64, 128, 5, 7, 10, 20, 40, 100, 0,
    ];
    let x: u8 = u.arbitrary()?;
    Ok(match x {
        0..=239 => W[x as usize % W.len()],
        240..=254 => u.int_in_range(1..=300)?,
        255 => u.int_in_range(1..=4096)?,
    })
}

/// A dimension: mostly tiny, sometimes tens, rarely large or absurd (the
/// latter only fit a buffer with zero strides, or next to an empty axis).
pub fn dim(u: &mut Unstructured<'_>) -> Result<usize> {
    let x: u8 = u.arbitrary()?;
    Ok(match x {
        0..=199 => (x % 5) as usize,
        200..=239 => (x % 40) as usize,
        240..=251 => u.int_in_range(0..=600)?,
        252..=254 => u.int_in_range(0..=40_000)?,
        255 => u.arbitrary::<usize>()?,
    })
}

/// How the generators may lay an array out.
#[derive(Clone, Copy)]
pub struct LayoutOptions {
    /// Whether the buffer may get a 4 MiB zeroed tail (large enough for the
    /// kernel's prefetching path).
    pub big_tail: bool,
}

/// An array of `shape` in any layout: C order, permuted axes with gaps and
/// reversed or broadcast (zero-stride) axes, or raw strides of any sign
/// (overlapping, unaligned); rarely a broken offset or buffer length.
/// `None` if its buffer would be too large.
pub fn array(
    u: &mut Unstructured<'_>,
    shape: Vec<usize>,
    itemsize: usize,
    opts: LayoutOptions,
) -> Result<Option<Array>> {
    let n = shape.len();
    let mut strides = vec![0isize; n];
    let style: u8 = u.int_in_range(0..=3)?;
    if style == 2 {
        for s in strides.iter_mut() {
            *s = if one_in(u, 32)? {
                u.arbitrary()?
            } else {
                u.int_in_range(-300..=300)?
            };
        }
    } else {
        let mut order: Vec<usize> = (0..n).collect();
        if style != 0 {
            for i in (1..n).rev() {
                let j = u.int_in_range(0..=i)?;
                order.swap(i, j);
            }
        }
        let mut step = itemsize as i128;
        for &axis in order.iter().rev() {
            if step > MAX_SPAN as i128 {
                return Ok(None);
            }
            strides[axis] = step as isize;
            let (gap, extra) = if style == 0 {
                (1, 0)
            } else {
                (u.int_in_range(1..=3)?, u.int_in_range(0..=1)? * 3)
            };
            step = step * shape[axis].max(1) as i128 * gap + extra;
        }
        if style != 0 {
            for s in strides.iter_mut() {
                if one_in(u, 3)? {
                    *s = -*s;
                }
                if style == 3 && one_in(u, 3)? {
                    *s = 0;
                }
            }
        }
    }
    let empty = shape.contains(&0);
    let (mut lo, mut hi) = (0i128, 0i128);
    if !empty {
        for (&d, &s) in shape.iter().zip(&strides) {
            let reach = (d as i128 - 1) * s as i128;
            // Saturating: six absurd axes can pass i128 (then far outside).
            if reach < 0 {
                lo = lo.saturating_add(reach);
            } else {
                hi = hi.saturating_add(reach);
            }
        }
    }
    let touched = if empty { 0 } else { hi - lo + itemsize as i128 };
    if touched > MAX_SPAN as i128 {
        return Ok(None);
    }
    let front: usize = u.int_in_range(0..=8)?;
    let back: usize = u.int_in_range(0..=8)?;
    let mut offset = front + (-lo) as usize;
    let mut len = front + touched as usize + back;
    if one_in(u, 24)? {
        // Broken on purpose: the core must reject what reaches outside.
        let by: usize = u.int_in_range(1..=16)?;
        match u.int_in_range(0..=3)? {
            0 => offset += by,
            1 => offset = offset.saturating_sub(by),
            2 => len = len.saturating_sub(by),
            _ => offset = u.arbitrary()?,
        }
    }
    let filled = len;
    if opts.big_tail && one_in(u, 64)? {
        len += (4 << 20) + 1;
    }
    // Zeroed (lazily, for the big tail), then a pattern over the part that
    // may be read.
    let mut bytes = vec![0u8; len];
    fill_pattern(&mut bytes[..filled]);
    Ok(Some(Array {
        bytes,
        offset,
        shape,
        strides,
        itemsize,
    }))
}

/// Writes index values into `indices` in C order (later elements overwrite
/// earlier ones where the layout makes them share bytes). `axis_size`
/// gives, for an element's coordinates, the size of the axis it addresses,
/// so that values cluster around the interesting bounds.
pub fn fill_indices(
    u: &mut Unstructured<'_>,
    indices: &mut Array,
    ty: IndexType,
    axis_size: impl Fn(&[usize]) -> usize,
) -> Result<()> {
    if count(&indices.shape).is_none_or(|c| c > MAX_ELEMS) {
        return Ok(());
    }
    let w = ty.itemsize();
    let shape = indices.shape.clone();
    let mut failed = None;
    for_each_coord(&shape, |coords| {
        match index_value(u, axis_size(coords) as i128) {
            Ok(v) => {
                if let Some(p) = indices.pos(coords) {
                    if p + w <= indices.bytes.len() {
                        store(ty, v, &mut indices.bytes[p..p + w]);
                    }
                }
                true
            }
            Err(e) => {
                failed = Some(e);
                false
            }
        }
    });
    failed.map_or(Ok(()), Err)
}

/// An index for an axis of `s`: mostly near `[-s, s)`, sometimes at the
/// edges of the index types, sometimes anything.
fn index_value(u: &mut Unstructured<'_>, s: i128) -> Result<i128> {
    let x: u8 = u.arbitrary()?;
    Ok(match x {
        0..=199 => (x as i128) % (2 * s + 5) - s - 2,
        200..=229 => {
            let edges = [
                -s - 1,
                -s,
                s - 1,
                s,
                0,
                -1,
                i8::MIN as i128,
                i8::MAX as i128,
                u8::MAX as i128,
                i16::MIN as i128,
                u16::MAX as i128,
                i32::MIN as i128,
                u32::MAX as i128,
                i64::MIN as i128,
                i64::MAX as i128,
                u64::MAX as i128,
                (i64::MAX as i128) + 1,
            ];
            edges[x as usize % edges.len()]
        }
        _ => u.arbitrary::<u64>()? as i128,
    })
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

/// A rank for `data`: 1 to 5, rarely 0 (invalid for gather_nd, a scalar
/// for gather).
pub fn data_rank(u: &mut Unstructured<'_>) -> Result<usize> {
    if one_in(u, 32)? {
        Ok(0)
    } else {
        u.int_in_range(1..=5)
    }
}

pub fn exec(u: &mut Unstructured<'_>) -> Result<Exec> {
    Ok(Exec {
        mode: mode(u)?,
        validation: if u.arbitrary()? {
            Validation::BeforeWriting
        } else {
            Validation::WhileCopying
        },
        threads: if u.arbitrary()? { 2 } else { 1 },
        reject_negative: one_in(u, 4)?,
        out_len_delta: if one_in(u, 32)? {
            u.int_in_range(-2..=2)?
        } else {
            0
        },
    })
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
                        first_bad = Some(bad(tuple[j], row.to_vec(), Some(tuple), b + j));
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
enum Expected {
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
    match (result_reference(call, attrs, &out_shape), got) {
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
