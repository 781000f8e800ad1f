//! The types `quantized` reads scales in and writes results in (float32,
//! float16, bfloat16), as native-endian bytes: one value at a time, or 16
//! 4-bit codes at once (SSE2 on x86-64, `nibbles`).

use crate::convert::f16_to_f32_bits;
use crate::half::{f32_to_bf16, f32_to_f16};

/// A floating-point type the scales and the output may have, as bits.
pub(crate) trait Real: Sized {
    const WIDTH: usize;
    fn load(bytes: &[u8], i: usize) -> f32;
    fn store(out: &mut [u8], i: usize, v: f32);
    /// Dequantises the 16 4-bit codes of `b` (low nibble first) with one
    /// zero point and scale into `out`, exactly `16 * WIDTH` bytes long;
    /// `stream`: around the cache where the type allows (the writer must
    /// fence before others read what it wrote).
    #[inline(always)]
    fn nibbles16(out: &mut [u8], b: &[u8; 8], zp: i32, scale: f32, _stream: bool) {
        each_nibble::<Self>(out, b, zp, scale);
    }
}

/// Dequantises the two 4-bit codes of each byte of `bytes` (low nibble
/// first) with one zero point and scale into the first `2 * bytes.len()`
/// elements of `out`, one at a time.
#[inline(always)]
pub(crate) fn each_nibble<R: Real>(out: &mut [u8], bytes: &[u8], zp: i32, scale: f32) {
    for (j, &byte) in bytes.iter().enumerate() {
        R::store(out, 2 * j, (i32::from(byte & 0x0f) - zp) as f32 * scale);
        R::store(out, 2 * j + 1, (i32::from(byte >> 4) - zp) as f32 * scale);
    }
}

/// The type `$t`, stored as the native-endian bits `$bits`, which `$load`
/// and `$store` convert from and to `f32`; then its own methods, if any.
macro_rules! real {
    ($t:ident, $bits:ty, $load:expr, $store:expr, { $($own:tt)* }) => {
        pub(crate) struct $t;

        impl Real for $t {
            const WIDTH: usize = std::mem::size_of::<$bits>();
            #[inline(always)]
            fn load(bytes: &[u8], i: usize) -> f32 {
                let mut v = [0; std::mem::size_of::<$bits>()];
                v.copy_from_slice(&bytes[i * Self::WIDTH..(i + 1) * Self::WIDTH]);
                $load(<$bits>::from_ne_bytes(v))
            }
            #[inline(always)]
            fn store(out: &mut [u8], i: usize, v: f32) {
                let bits: $bits = $store(v);
                out[i * Self::WIDTH..(i + 1) * Self::WIDTH].copy_from_slice(&bits.to_ne_bytes());
            }
            $($own)*
        }
    };
}

real!(F32, u32, f32::from_bits, f32::to_bits, {
    #[inline(always)]
    fn nibbles16(out: &mut [u8], b: &[u8; 8], zp: i32, scale: f32, stream: bool) {
        #[cfg(target_arch = "x86_64")]
        if let Ok(out) = <&mut [u8; 64]>::try_from(&mut *out) {
            crate::nibbles::to_f32(out, b, zp, scale, stream);
            return;
        }
        each_nibble::<Self>(out, b, zp, scale);
    }
});

real!(
    F16,
    u16,
    |h| f32::from_bits(f16_to_f32_bits(h)),
    f32_to_f16,
    {
        #[inline(always)]
        fn nibbles16(out: &mut [u8], b: &[u8; 8], zp: i32, scale: f32, _stream: bool) {
            #[cfg(target_arch = "x86_64")]
            if let Ok(out) = <&mut [u8; 32]>::try_from(&mut *out) {
                crate::nibbles::to_f16(out, b, zp, scale);
                return;
            }
            each_nibble::<Self>(out, b, zp, scale);
        }
    }
);

real!(
    BF16,
    u16,
    |h| f32::from_bits(u32::from(h) << 16),
    f32_to_bf16,
    {}
);
