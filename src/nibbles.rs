//! 4-bit codes dequantised 16 at a time with SSE2 (part of every x86-64
//! CPU): the inner loop of `quantized` for a 4-bit table read into float32
//! or float16. Lane by lane, the operations are the scalar code's,
//! `f32(code - zero_point) * scale` and the same rounding to float16, so the
//! bits are the same.

use std::arch::x86_64::{
    __m128, __m128i, _mm_add_epi32, _mm_add_ps, _mm_and_si128, _mm_andnot_si128, _mm_castps_si128,
    _mm_castsi128_ps, _mm_cmpgt_epi32, _mm_cvtepi32_ps, _mm_loadl_epi64, _mm_mul_ps, _mm_or_si128,
    _mm_packs_epi32, _mm_set1_epi16, _mm_set1_epi32, _mm_set1_epi8, _mm_set1_ps, _mm_setzero_si128,
    _mm_srli_epi16, _mm_srli_epi32, _mm_storeu_ps, _mm_storeu_si128, _mm_stream_ps, _mm_sub_epi32,
    _mm_unpackhi_epi16, _mm_unpackhi_epi8, _mm_unpacklo_epi16, _mm_unpacklo_epi8, _mm_xor_si128,
};

/// The 16 values of the codes in `b` (low nibble first), four per vector.
#[inline(always)]
fn values(b: &[u8; 8], zp: i32, scale: f32) -> [__m128; 4] {
    // SAFETY: SSE2 is part of x86_64; `_mm_loadl_epi64` reads the 8 bytes
    // of `b` (no alignment needed); the rest works on registers.
    unsafe {
        let x = _mm_loadl_epi64(b.as_ptr().cast::<__m128i>());
        let mask = _mm_set1_epi8(0x0f);
        let lo = _mm_and_si128(x, mask);
        let hi = _mm_and_si128(_mm_srli_epi16::<4>(x), mask);
        // Bytes lo0 hi0 lo1 hi1 ...: the codes in element order.
        let codes = _mm_unpacklo_epi8(lo, hi);
        let zero = _mm_setzero_si128();
        let (c0, c1) = (
            _mm_unpacklo_epi8(codes, zero),
            _mm_unpackhi_epi8(codes, zero),
        );
        let (zp, scale) = (_mm_set1_epi32(zp), _mm_set1_ps(scale));
        let value = |w: __m128i| _mm_mul_ps(_mm_cvtepi32_ps(_mm_sub_epi32(w, zp)), scale);
        [
            value(_mm_unpacklo_epi16(c0, zero)),
            value(_mm_unpackhi_epi16(c0, zero)),
            value(_mm_unpacklo_epi16(c1, zero)),
            value(_mm_unpackhi_epi16(c1, zero)),
        ]
    }
}

/// The 16 values as float32 into `out`; `stream`: with non-temporal stores
/// when `out` is 16-byte aligned (the caller fences before others read).
#[inline(always)]
pub(crate) fn to_f32(out: &mut [u8; 64], b: &[u8; 8], zp: i32, scale: f32, stream: bool) {
    let dst = out.as_mut_ptr().cast::<f32>();
    let aligned = dst.align_offset(16) == 0;
    for (j, v) in values(b, zp, scale).into_iter().enumerate() {
        // SAFETY: each store writes 16 of the 64 bytes of `out`:
        // `_mm_storeu_ps` at any alignment, `_mm_stream_ps` only when `dst`
        // is 16-byte aligned (checked above).
        unsafe {
            if stream && aligned {
                _mm_stream_ps(dst.add(4 * j), v);
            } else {
                _mm_storeu_ps(dst.add(4 * j), v);
            }
        }
    }
}

/// The 16 values rounded to float16 into `out` (native byte order).
#[inline(always)]
pub(crate) fn to_f16(out: &mut [u8; 32], b: &[u8; 8], zp: i32, scale: f32) {
    let [v0, v1, v2, v3] = values(b, zp, scale).map(f16_bits);
    let dst = out.as_mut_ptr().cast::<__m128i>();
    // SAFETY: SSE2 is part of x86_64; the two stores write the 32 bytes of
    // `out` (`_mm_storeu_si128`: any alignment).
    unsafe {
        _mm_storeu_si128(dst, pack_u16(v0, v1));
        _mm_storeu_si128(dst.add(1), pack_u16(v2, v3));
    }
}

/// Eight 32-bit lanes holding values below 2^16 as eight 16-bit lanes.
#[inline(always)]
fn pack_u16(a: __m128i, b: __m128i) -> __m128i {
    // SAFETY: SSE2 is part of x86_64; registers only. SSE2's pack saturates
    // signed values: shift the range down by 2^15, pack, shift it back.
    unsafe {
        let bias = _mm_set1_epi32(0x8000);
        let packed = _mm_packs_epi32(_mm_sub_epi32(a, bias), _mm_sub_epi32(b, bias));
        _mm_xor_si128(packed, _mm_set1_epi16(i16::MIN))
    }
}

/// `half::f32_to_f16` on four lanes (float16 bits in the low half of
/// each 32-bit lane): all three of its cases computed, the right one kept.
#[inline(always)]
fn f16_bits(v: __m128) -> __m128i {
    // SAFETY: SSE2 is part of x86_64; registers only.
    unsafe {
        let select = |m: __m128i, a: __m128i, b: __m128i| {
            _mm_or_si128(_mm_and_si128(m, a), _mm_andnot_si128(m, b))
        };
        let bits = _mm_castps_si128(v);
        let sign = _mm_and_si128(bits, _mm_set1_epi32(i32::MIN));
        let abs = _mm_xor_si128(bits, sign);
        // Normal: rebias the exponent, round the 13 dropped bits to even.
        let odd = _mm_and_si128(_mm_srli_epi32::<13>(abs), _mm_set1_epi32(1));
        let rounded = _mm_add_epi32(
            _mm_add_epi32(abs, _mm_set1_epi32(0xc800_0fff_u32 as i32)),
            odd,
        );
        let normal = _mm_srli_epi32::<13>(rounded);
        // Below 2^-14: adding 0.5 rounds to a multiple of 2^-24.
        let half = _mm_set1_ps(0.5);
        let sum = _mm_castps_si128(_mm_add_ps(_mm_castsi128_ps(abs), half));
        let subnormal = _mm_sub_epi32(sum, _mm_set1_epi32(0x3f00_0000));
        // 65536 and up: infinity; NaN: the quiet NaN 0x7e00.
        let nan = _mm_cmpgt_epi32(abs, _mm_set1_epi32(0x7f80_0000));
        let huge = select(nan, _mm_set1_epi32(0x7e00), _mm_set1_epi32(0x7c00));
        let is_huge = _mm_cmpgt_epi32(abs, _mm_set1_epi32(0x4780_0000 - 1));
        let is_small = _mm_cmpgt_epi32(_mm_set1_epi32(0x3880_0000), abs);
        let r = select(is_huge, huge, select(is_small, subnormal, normal));
        _mm_or_si128(r, _mm_srli_epi32::<16>(sign))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::half::f32_to_f16;

    #[test]
    fn f16_bits_agrees_with_the_scalar_rounding() {
        let mut patterns: Vec<u32> = (0..u32::MAX / 4093).map(|k| k * 4093).collect();
        for base in [0x3880_0000u32, 0x4780_0000, 0x7f80_0000, 0x3300_0000] {
            patterns.extend((base - 40..base + 40).flat_map(|b| [b, b | 0x8000_0000]));
        }
        patterns.extend([
            0x7fc0_0001,
            0xffc0_0000,
            0x7f80_0001,
            0x0000_0001,
            0x8000_0000,
        ]);
        for chunk in patterns.chunks_exact(4) {
            let v = [chunk[0], chunk[1], chunk[2], chunk[3]].map(f32::from_bits);
            // SAFETY: SSE2 is part of x86_64; the load and store are of 4 f32 / 4 u32.
            let got: [u32; 4] = unsafe {
                let r = f16_bits(std::arch::x86_64::_mm_loadu_ps(v.as_ptr()));
                std::mem::transmute::<__m128i, [u32; 4]>(r)
            };
            for (g, x) in got.iter().zip(v) {
                assert_eq!(*g, u32::from(f32_to_f16(x)), "{:#x}", x.to_bits());
            }
        }
    }

    #[test]
    fn sixteen_codes_agree_with_the_scalar_code() {
        let b = [0x10, 0x32, 0x54, 0x76, 0x98, 0xba, 0xdc, 0xfe];
        for (zp, scale) in [(8, 0.37f32), (0, -1e-6), (3, 7e4), (15, f32::INFINITY)] {
            let want: Vec<f32> = (0..16)
                .map(|c| (i32::from(b[c / 2] >> (4 * (c % 2)) & 0x0f) - zp) as f32 * scale)
                .collect();
            let mut out = [0u8; 64];
            to_f32(&mut out, &b, zp, scale, false);
            let got: Vec<f32> = out
                .chunks_exact(4)
                .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            assert_eq!(
                got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
            );
            let mut half = [0u8; 32];
            to_f16(&mut half, &b, zp, scale);
            for (c, w) in half.chunks_exact(2).zip(&want) {
                assert_eq!(u16::from_ne_bytes([c[0], c[1]]), f32_to_f16(*w));
            }
        }
    }
}
