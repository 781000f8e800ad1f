//! Half-width floats as bits: `f32` to float16 and bfloat16, rounding as
//! onnxruntime does (to nearest even), for the results of `quantized` (the
//! exact way back from float16 is `convert`'s).

/// `f32` to `float16` bits, rounding to nearest even, as onnxruntime's
/// `MLFloat16(float)` does: overflow gives infinity, and every NaN the
/// quiet NaN `0x7e00` with the sign kept.
pub(crate) fn f32_to_f16(v: f32) -> u16 {
    let bits = v.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let abs = bits & 0x7fff_ffff;
    if abs >= 0x4780_0000 {
        // 65536 and up, infinity, NaN.
        let rest = if abs > 0x7f80_0000 { 0x7e00 } else { 0x7c00 };
        return sign | rest;
    }
    if abs < 0x3880_0000 {
        // Below the smallest normal (2^-14): the addition rounds the value
        // to a multiple of 2^-24 (to nearest even), leaving it in the low
        // mantissa bits.
        let magic = f32::from_bits(0x3f00_0000); // 0.5 = 2^-24 * 2^23
        let r = f32::from_bits(abs) + magic;
        return sign | (r.to_bits() - magic.to_bits()) as u16;
    }
    let odd = (abs >> 13) & 1;
    // Rebias the exponent (127 -> 15) and round the 13 dropped bits to
    // nearest even; a carry into the exponent is the right result.
    let r = abs.wrapping_add(0xc800_0fff).wrapping_add(odd);
    sign | (r >> 13) as u16
}

/// `f32` to `bfloat16` bits, rounding to nearest even; a NaN stays a NaN
/// (quieted, its sign and top payload bits kept).
pub(crate) fn f32_to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    if v.is_nan() {
        return ((bits >> 16) | 0x0040) as u16;
    }
    let odd = (bits >> 16) & 1;
    (bits.wrapping_add(0x7fff + odd) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::convert::f16_to_f32_bits;

    #[test]
    fn f16_round_trip_and_rounding() {
        for h in 0..=u16::MAX {
            let f = f32::from_bits(f16_to_f32_bits(h));
            if f.is_nan() {
                assert_eq!(f32_to_f16(f) & 0x7fff, 0x7e00);
            } else {
                assert_eq!(f32_to_f16(f), h, "{h:#x}");
            }
        }
        // Halfway between 1 and the next float16 rounds to even (down).
        assert_eq!(f32_to_f16(1.0 + 2f32.powi(-11)), 0x3c00);
        assert_eq!(f32_to_f16(1.0 + 3.0 * 2f32.powi(-11)), 0x3c02);
        assert_eq!(f32_to_f16(65520.0), 0x7c00);
        assert_eq!(f32_to_f16(65519.0), 0x7bff);
        assert_eq!(f32_to_f16(2f32.powi(-25)), 0); // halfway to the least subnormal: even
        assert_eq!(f32_to_f16(3.0 * 2f32.powi(-26)), 1);
    }

    #[test]
    fn bf16_rounding() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f7f_ffff)), 0x7f80);
        assert_eq!(f32_to_bf16(f32::NAN) & 0x7fc0, 0x7fc0);
    }
}
