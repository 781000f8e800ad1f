//! The types `quantized` reads scales in and writes results in (float32,
//! float16, bfloat16), as native-endian bytes: one value at a time, or 16
//! 4-bit codes at once (SSE2 on x86-64, `nibbles`).

use crate::half::{f16_to_f32, f32_to_bf16, f32_to_f16};

/// A floating-point type the scales and the output may have, as bits.
pub(crate) trait Real {
    const WIDTH: usize;
    fn load(bytes: &[u8], i: usize) -> f32;
    fn store(out: &mut [u8], i: usize, v: f32);
    /// Dequantises the 16 4-bit codes of `b` (low nibble first) with one
    /// zero point and scale into `out`, exactly `16 * WIDTH` bytes long;
    /// `stream`: around the cache where the type allows (the writer must
    /// fence before others read what it wrote).
    #[inline(always)]
    fn nibbles16(out: &mut [u8], b: &[u8; 8], zp: i32, scale: f32, _stream: bool) {
        for (j, &byte) in b.iter().enumerate() {
            Self::store(out, 2 * j, (i32::from(byte & 0x0f) - zp) as f32 * scale);
            Self::store(out, 2 * j + 1, (i32::from(byte >> 4) - zp) as f32 * scale);
        }
    }
}

pub(crate) struct F32;
pub(crate) struct F16;
pub(crate) struct BF16;

fn load_u16(bytes: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([bytes[2 * i], bytes[2 * i + 1]])
}

impl Real for F32 {
    const WIDTH: usize = 4;
    #[inline(always)]
    fn load(bytes: &[u8], i: usize) -> f32 {
        let mut v = [0; 4];
        v.copy_from_slice(&bytes[4 * i..4 * i + 4]);
        f32::from_ne_bytes(v)
    }
    #[inline(always)]
    fn store(out: &mut [u8], i: usize, v: f32) {
        out[4 * i..4 * i + 4].copy_from_slice(&v.to_ne_bytes());
    }
    #[inline(always)]
    fn nibbles16(out: &mut [u8], b: &[u8; 8], zp: i32, scale: f32, stream: bool) {
        #[cfg(target_arch = "x86_64")]
        if let Ok(out) = <&mut [u8; 64]>::try_from(&mut *out) {
            crate::nibbles::to_f32(out, b, zp, scale, stream);
            return;
        }
        for (j, &byte) in b.iter().enumerate() {
            Self::store(out, 2 * j, (i32::from(byte & 0x0f) - zp) as f32 * scale);
            Self::store(out, 2 * j + 1, (i32::from(byte >> 4) - zp) as f32 * scale);
        }
    }
}

impl Real for F16 {
    const WIDTH: usize = 2;
    #[inline(always)]
    fn load(bytes: &[u8], i: usize) -> f32 {
        f16_to_f32(load_u16(bytes, i))
    }
    #[inline(always)]
    fn store(out: &mut [u8], i: usize, v: f32) {
        out[2 * i..2 * i + 2].copy_from_slice(&f32_to_f16(v).to_ne_bytes());
    }
    #[inline(always)]
    fn nibbles16(out: &mut [u8], b: &[u8; 8], zp: i32, scale: f32, _stream: bool) {
        #[cfg(target_arch = "x86_64")]
        if let Ok(out) = <&mut [u8; 32]>::try_from(&mut *out) {
            crate::nibbles::to_f16(out, b, zp, scale);
            return;
        }
        for (j, &byte) in b.iter().enumerate() {
            Self::store(out, 2 * j, (i32::from(byte & 0x0f) - zp) as f32 * scale);
            Self::store(out, 2 * j + 1, (i32::from(byte >> 4) - zp) as f32 * scale);
        }
    }
}

impl Real for BF16 {
    const WIDTH: usize = 2;
    #[inline(always)]
    fn load(bytes: &[u8], i: usize) -> f32 {
        f32::from_bits(u32::from(load_u16(bytes, i)) << 16)
    }
    #[inline(always)]
    fn store(out: &mut [u8], i: usize, v: f32) {
        out[2 * i..2 * i + 2].copy_from_slice(&f32_to_bf16(v).to_ne_bytes());
    }
}
