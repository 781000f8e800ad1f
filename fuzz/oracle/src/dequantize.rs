//! The naive reference of com.microsoft GatherBlockQuantized, written from
//! the operator's definition (onnxruntime's CPU kernel), sharing no code
//! and no idea with `ndgather::quantized`: the rules a call must follow,
//! the result's shape, the first bad index of `mode="raise"`, and each
//! output element worked out on coordinates, one at a time.
//!
//! An element is `(code - zero_point) * scale` (integer codes) or
//! `value(code) * scale` (float codes), computed exactly in `f64` and
//! rounded once to `f32` (which is what one `f32` multiplication gives),
//! then rounded to nearest even into the scales' type by searching the
//! type's values for the nearest (an overflow is what rounding with an
//! unbounded exponent past the largest finite value gives: infinity). An
//! index outside `[-s, s)` gives a zero element. NaN payloads are not part
//! of the contract: where the reference finds a NaN, any NaN of the output
//! type is right.

use ndgather::OutOfRange;

use crate::{count, for_each_coord};

/// How the codes are stored (the reference's own spelling of
/// `ndgather::quantized::Codes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `bits`-bit unsigned codes packed into bytes, lowest bits first.
    Packed(u32),
    /// A signed 4-bit code in the low nibble of each byte.
    Int4,
    /// An unsigned 4-bit code in the low nibble of each byte.
    UInt4,
    /// A byte per code, valued by a table of 256 `f32`.
    Table,
}

/// The scales' (and the output's) type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Float {
    F32,
    F16,
    BF16,
}

impl Float {
    pub(crate) fn width(self) -> usize {
        match self {
            Float::F32 => 4,
            Float::F16 | Float::BF16 => 2,
        }
    }

    /// The value of the (native-endian) element `i` of `bytes`, exactly.
    fn load(self, bytes: &[u8], i: usize) -> f64 {
        match self {
            Float::F32 => {
                let b = &bytes[4 * i..4 * i + 4];
                f64::from(f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            }
            Float::F16 | Float::BF16 => {
                let h = u16::from_ne_bytes([bytes[2 * i], bytes[2 * i + 1]]);
                let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
                let magnitude = h & 0x7fff;
                if magnitude >= self.infinity() {
                    return if magnitude == self.infinity() {
                        sign * f64::INFINITY
                    } else {
                        f64::NAN
                    };
                }
                sign * self.magnitude(magnitude)
            }
        }
    }

    /// The bits of positive infinity (16-bit types).
    fn infinity(self) -> u16 {
        match self {
            Float::F16 => 0x7c00,
            _ => 0x7f80,
        }
    }

    /// The value of the bits `h` of a positive 16-bit float, from the
    /// format (1 sign bit, `e` exponent bits of bias `2^(e-1) - 1`, `m`
    /// mantissa bits); `infinity()`'s bits give the power of two after the
    /// largest finite value, the value an unbounded exponent would give.
    fn magnitude(self, h: u16) -> f64 {
        let (m, bias) = match self {
            Float::F16 => (10, 15),
            _ => (7, 127),
        };
        let exponent = i32::from(h >> m);
        let mantissa = f64::from(h & ((1 << m) - 1));
        let one = f64::from(1u32 << m);
        if exponent == 0 {
            // Subnormal: 0.mantissa * 2^(1 - bias).
            mantissa / one * 2f64.powi(1 - bias)
        } else {
            (one + mantissa) / one * 2f64.powi(exponent - bias)
        }
    }

    /// `v` rounded to nearest even into this type: its bits (low bits for
    /// the 16-bit types), or `None` for a NaN.
    fn round(self, v: f32) -> Option<u32> {
        if v.is_nan() {
            return None;
        }
        if self == Float::F32 {
            return Some(v.to_bits());
        }
        let sign = if v.is_sign_negative() { 0x8000 } else { 0 };
        let a = f64::from(v).abs();
        let inf = self.infinity();
        if a >= self.magnitude(inf) {
            return Some(sign | u32::from(inf));
        }
        // The bits of positive values are in the order of the values:
        // search for the last bits whose value is at most `a`.
        let (mut lo, mut hi) = (0u16, inf);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if self.magnitude(mid) <= a {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        // Exact: two neighbours of a narrow type, summed and halved in f64.
        let midpoint = (self.magnitude(lo) + self.magnitude(hi)) / 2.0;
        let nearest = if a < midpoint || (a == midpoint && lo % 2 == 0) {
            lo
        } else {
            hi
        };
        Some(sign | u32::from(nearest))
    }

    /// Whether the bits `b` of this type are a NaN.
    pub(crate) fn is_nan(self, b: u32) -> bool {
        match self {
            Float::F32 => b & 0x7fff_ffff > 0x7f80_0000,
            _ => b & 0x7fff > u32::from(self.infinity()),
        }
    }
}

/// One output element as the reference expects it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    /// These bits.
    Bits(u32),
    /// Any NaN.
    Nan,
}

/// One call, as the reference reads it.
pub(crate) struct Quantized<'a> {
    pub(crate) kind: Kind,
    /// The logical shape.
    pub(crate) shape: &'a [usize],
    pub(crate) data: &'a [u8],
    pub(crate) values: &'a [f32; 256],
    pub(crate) scales: &'a [u8],
    pub(crate) float: Float,
    pub(crate) zero_points: Option<&'a [u8]>,
    pub(crate) gather_axis: usize,
    pub(crate) quantize_axis: usize,
    pub(crate) block_size: usize,
    /// The index values (an `int32` one widened).
    pub(crate) indices: &'a [i64],
    pub(crate) out_len: usize,
}

/// Codes per byte of `kind`; `None` for packed codes of a width the
/// operator does not have.
pub(crate) fn per_byte(kind: Kind) -> Option<usize> {
    match kind {
        Kind::Packed(bits @ (2 | 4 | 8)) => Some(8 / bits as usize),
        Kind::Packed(_) => None,
        _ => Some(1),
    }
}

/// The shape of the scales: `shape` with the quantize axis cut into blocks.
pub(crate) fn scale_shape(shape: &[usize], quantize_axis: usize, block_size: usize) -> Vec<usize> {
    let mut s = shape.to_vec();
    s[quantize_axis] = shape[quantize_axis].div_ceil(block_size);
    s
}

/// The shape of packed zero points: the scales' with the last axis packed
/// `per` to a byte (row by row).
pub(crate) fn packed_zero_point_shape(scale_shape: &[usize], per: usize) -> Vec<usize> {
    let mut s = scale_shape.to_vec();
    if let Some(last) = s.last_mut() {
        *last = last.div_ceil(per);
    }
    s
}

/// The output's shape for `n` indices: `shape[..g] + [n] + shape[g+1..]`
/// (one-dimensional indices; the index shape replaces `[n]` in general).
fn out_dims(shape: &[usize], g: usize, index_shape: &[usize]) -> Vec<usize> {
    [&shape[..g], index_shape, &shape[g + 1..]].concat()
}

/// The byte length of a C-contiguous array of `shape`, if it fits `usize`.
pub(crate) fn bytes_of(shape: &[usize], width: usize) -> Option<usize> {
    count(shape)
        .and_then(|n| n.checked_mul(width as u128))
        .and_then(|n| usize::try_from(n).ok())
}

/// The element at `coords` of a C-contiguous array of `shape`.
fn flat(coords: &[usize], shape: &[usize]) -> usize {
    coords
        .iter()
        .zip(shape)
        .fold(0, |acc, (&c, &n)| acc * n + c)
}

/// Whether some array involved could not exist: the axes of `dims` that
/// are not empty, multiplied, pass `isize::MAX` bytes of `width`. There
/// the core may refuse the call with any error.
pub(crate) fn too_big(dims: &[&[usize]], width: usize) -> bool {
    dims.iter().any(|d| {
        let nonzero: Vec<usize> = d.iter().copied().filter(|&n| n != 0).collect();
        count(&nonzero)
            .and_then(|n| n.checked_mul(width as u128))
            .is_none_or(|b| b > isize::MAX as u128)
    })
}

/// The operator's result for `q`: `None` if the call breaks a rule (the
/// output's length included), else the output elements in C order.
pub(crate) fn dequantize(q: &Quantized<'_>) -> Option<Vec<Elem>> {
    let (shape, g, qa, bs) = (q.shape, q.gather_axis, q.quantize_axis, q.block_size);
    let rank = shape.len();
    if g >= rank || qa >= rank || bs == 0 {
        return None;
    }
    let per = per_byte(q.kind)?;
    if let Kind::Packed(_) = q.kind {
        // Packing runs along the quantize axis, which must be last and a
        // whole number of bytes long.
        if qa != rank - 1 || shape[qa] % per != 0 {
            return None;
        }
    }
    let elements = count(shape)?;
    if q.data.len() as u128 != elements / per as u128 {
        return None;
    }
    let out_shape = out_dims(shape, g, &[q.indices.len()]);
    if Some(q.out_len) != bytes_of(&out_shape, q.float.width()) {
        return None;
    }
    let sshape = scale_shape(shape, qa, bs);
    if Some(q.scales.len()) != bytes_of(&sshape, q.float.width()) {
        return None;
    }
    let zshape = match q.kind {
        Kind::Packed(_) => packed_zero_point_shape(&sshape, per),
        _ => sshape.clone(),
    };
    match (q.zero_points, q.kind) {
        (Some(_), Kind::Table) => return None,
        (Some(z), _) if Some(z.len()) != bytes_of(&zshape, 1) => return None,
        _ => {}
    }
    let mut out = Vec::new();
    let mut d = vec![0; rank];
    for_each_coord(&out_shape, |oc| {
        let v = q.indices[oc[g]];
        let s = shape[g] as i128;
        let v = i128::from(v);
        if v < -s || v >= s {
            out.push(Elem::Bits(0));
            return true;
        }
        d.copy_from_slice(oc);
        d[g] = (if v < 0 { v + s } else { v }) as usize;
        out.push(element(q, &d, &sshape, &zshape, per));
        true
    });
    Some(out)
}

/// The dequantised element of data at `d`.
fn element(q: &Quantized<'_>, d: &[usize], sshape: &[usize], zshape: &[usize], per: usize) -> Elem {
    let e = flat(d, q.shape);
    let byte = q.data[e / per];
    let mut sc = d.to_vec();
    sc[q.quantize_axis] /= q.block_size;
    let s = flat(&sc, sshape);
    let scale = q.float.load(q.scales, s);
    let low_nibble = |b: u8, signed: bool| {
        let v = i32::from(b & 0x0f);
        if signed && v >= 8 {
            v - 16
        } else {
            v
        }
    };
    let value = match q.kind {
        Kind::Table => f64::from(q.values[usize::from(byte)]),
        Kind::Packed(bits) => {
            let mask = (1u32 << bits) - 1;
            let code = (u32::from(byte) >> ((e % per) as u32 * bits)) & mask;
            let zp = match q.zero_points {
                None => 1 << (bits - 1),
                Some(z) => {
                    // Row by row: the scale's last coordinate `per` to a byte.
                    let last = sc.len() - 1;
                    let col = sc[last];
                    let mut zc = sc.clone();
                    zc[last] = col / per;
                    let b = z[flat(&zc, zshape)];
                    (u32::from(b) >> ((col % per) as u32 * bits)) & mask
                }
            };
            f64::from(code as i32 - zp as i32)
        }
        Kind::Int4 | Kind::UInt4 => {
            let signed = q.kind == Kind::Int4;
            let zp = q.zero_points.map_or(0, |z| low_nibble(z[s], signed));
            f64::from(low_nibble(byte, signed) - zp)
        }
    };
    // Exact in f64 (at most 24 + 24 significant bits), then one rounding:
    // the f32 product.
    let product = (value * scale) as f32;
    q.float.round(product).map_or(Elem::Nan, Elem::Bits)
}

/// What `block_quantized_out_shape` must give.
#[derive(Debug)]
pub(crate) enum Shaped {
    /// The shapes or the attributes break a rule.
    Invalid,
    /// With `mode="raise"`, the first index outside `[-s, s)` in C order.
    Bad(Box<OutOfRange>),
    /// This shape.
    Ok(Vec<usize>),
}

/// The result's shape for data stored as `stored`, of logical shape
/// `shape` (they differ at most on the last axis, where packed codes hold
/// several elements a byte, and not there if it is the gather axis), and
/// indices of `index_shape` holding `values` in C order; with `raise`,
/// every index checked against the gather axis first.
pub(crate) fn out_shape(
    stored: &[usize],
    shape: &[usize],
    g: usize,
    index_shape: &[usize],
    values: &[i64],
    raise: bool,
) -> Shaped {
    let rank = shape.len();
    if stored.len() != rank || g >= rank || stored[..rank - 1] != shape[..rank - 1] {
        return Shaped::Invalid;
    }
    if stored[g] != shape[g] {
        return Shaped::Invalid;
    }
    if raise {
        let s = stored[g] as i128;
        let mut k = 0;
        let mut bad = None;
        for_each_coord(index_shape, |pos| {
            let v = i128::from(values[k]);
            k += 1;
            if v < -s || v >= s {
                bad = Some(OutOfRange {
                    value: v,
                    position: pos.to_vec(),
                    tuple: None,
                    axis: g,
                    axis_size: stored[g],
                    data_shape: stored.to_vec(),
                    negatives_allowed: true,
                });
                return false;
            }
            true
        });
        if let Some(b) = bad {
            return Shaped::Bad(Box::new(b));
        }
    }
    Shaped::Ok(out_dims(shape, g, index_shape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float16_rounding_from_the_format() {
        let f16 = |v: f32| Float::F16.round(v);
        assert_eq!(f16(1.0), Some(0x3c00));
        assert_eq!(f16(-2.0), Some(0xc000));
        assert_eq!(f16(-0.0), Some(0x8000));
        assert_eq!(f16(65504.0), Some(0x7bff));
        assert_eq!(f16(65519.0), Some(0x7bff));
        assert_eq!(f16(65520.0), Some(0x7c00)); // halfway to 2^16: even, overflows
        assert_eq!(f16(f32::INFINITY), Some(0x7c00));
        assert_eq!(f16(1.0 + 2f32.powi(-11)), Some(0x3c00)); // halfway: even
        assert_eq!(f16(1.0 + 3.0 * 2f32.powi(-11)), Some(0x3c02));
        assert_eq!(f16(2f32.powi(-24)), Some(1)); // least subnormal
        assert_eq!(f16(2f32.powi(-25)), Some(0)); // halfway to it: even
        assert_eq!(f16(-3.0 * 2f32.powi(-26)), Some(0x8001));
        assert_eq!(f16(f32::NAN), None);
    }

    #[test]
    fn bfloat16_rounding_from_the_format() {
        let bf16 = |v: f32| Float::BF16.round(v);
        assert_eq!(bf16(1.0), Some(0x3f80));
        assert_eq!(bf16(f32::from_bits(0x3f80_8000)), Some(0x3f80));
        assert_eq!(bf16(f32::from_bits(0x3f81_8000)), Some(0x3f82));
        assert_eq!(bf16(f32::from_bits(0x3f80_8001)), Some(0x3f81));
        assert_eq!(bf16(f32::MAX), Some(0x7f80));
        assert_eq!(bf16(f32::from_bits(0x0000_0001)), Some(0));
        assert_eq!(bf16(f32::from_bits(0x8001_8000)), Some(0x8002));
    }

    #[test]
    fn sixteen_bit_values_from_the_format() {
        let bits = |h: u16| h.to_ne_bytes();
        assert_eq!(Float::F16.load(&bits(0x3c00), 0), 1.0);
        assert_eq!(Float::F16.load(&bits(0x0001), 0), 2f64.powi(-24));
        assert_eq!(Float::F16.load(&bits(0x7bff), 0), 65504.0);
        assert_eq!(Float::F16.load(&bits(0xfc00), 0), f64::NEG_INFINITY);
        assert!(Float::F16.load(&bits(0x7c01), 0).is_nan());
        assert_eq!(Float::BF16.load(&bits(0x3f80), 0), 1.0);
        assert_eq!(Float::BF16.load(&bits(0xc040), 0), -3.0);
        assert_eq!(Float::BF16.load(&bits(0x0001), 0), 2f64.powi(-133));
    }
}
