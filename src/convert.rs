//! Gathering into a wider element type in the same pass (`dtype=`): each
//! element read once from `data` and written once, converted, into the
//! output. A table kept narrow (float16, bfloat16, int8) and used wide
//! (float32) otherwise costs a second pass over the result.
//!
//! Only value-preserving casts are taken: those NumPy calls "safe" between
//! bool, integer and floating types, and bfloat16 (as ml_dtypes defines it)
//! to float32 and float64. Every conversion gives the bits NumPy's (and
//! ml_dtypes') `astype` gives on x86-64, NaN payloads included: float16 and
//! bfloat16 widen bit by bit (a signalling NaN stays signalling), float32 to
//! float64 and bfloat16 to float64 go through the FPU as NumPy's loops do
//! (which quiets a signalling NaN), integers to floats round to nearest even.

use std::ptr;

/// The element types a gather can convert between.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scalar {
    /// `bool` (one byte; any non-zero byte reads as true).
    Bool,
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `int32`.
    I32,
    /// `int64`.
    I64,
    /// `uint8`.
    U8,
    /// `uint16`.
    U16,
    /// `uint32`.
    U32,
    /// `uint64`.
    U64,
    /// IEEE 754 binary16 (`float16`).
    F16,
    /// bfloat16: the top half of a binary32 (ml_dtypes' `bfloat16`).
    BF16,
    /// `float32`.
    F32,
    /// `float64`.
    F64,
}

impl Scalar {
    /// Bytes per element.
    pub fn size(self) -> usize {
        use Scalar::*;
        match self {
            Bool | I8 | U8 => 1,
            I16 | U16 | F16 | BF16 => 2,
            I32 | U32 | F32 => 4,
            I64 | U64 | F64 => 8,
        }
    }
}

/// A loop converting `n` elements from `src` to `dst`, native byte order.
/// Each pair of types has its own, chosen once per call, so that the
/// compiler vectorises every loop on its own.
type Kernel = unsafe fn(*const u8, *mut u8, usize);

/// A conversion of elements from one type and byte order to another.
#[derive(Clone, Copy, Debug)]
pub struct Cast {
    from: Scalar,
    to: Scalar,
    /// Whether `data`'s elements are stored byte-swapped (not native).
    swap_from: bool,
    /// Whether the output's elements are to be stored byte-swapped.
    swap_to: bool,
    kernel: Kernel,
}

impl Cast {
    /// The conversion from `from` to `to` (each in native byte order unless
    /// swapped), if it preserves every value (NumPy's "safe" casts among
    /// these types, `bfloat16` only to float32 and float64); `None`
    /// otherwise.
    pub fn new(from: Scalar, swap_from: bool, to: Scalar, swap_to: bool) -> Option<Cast> {
        Some(Cast {
            from,
            to,
            swap_from: swap_from && from.size() > 1,
            swap_to: swap_to && to.size() > 1,
            kernel: kernel(from, to)?,
        })
    }

    /// The element type converted from.
    pub fn from(self) -> Scalar {
        self.from
    }

    /// The element type converted to.
    pub fn to(self) -> Scalar {
        self.to
    }

    /// Converts `n` elements from `src` to `dst`.
    ///
    /// # Safety
    /// `src` holds `n * from.size()` readable bytes and `dst` `n * to.size()`
    /// writable ones, not overlapping; no alignment is needed.
    #[inline(always)]
    pub(crate) unsafe fn run(self, src: *const u8, dst: *mut u8, n: usize) {
        if !(self.swap_from || self.swap_to) {
            // SAFETY: forwarded from the caller; the kernel is this pair's.
            return unsafe { (self.kernel)(src, dst, n) };
        }
        // Rare (NumPy arrays of the other byte order): one element at a
        // time through native buffers.
        let (fs, ts) = (self.from.size(), self.to.size());
        for i in 0..n {
            let (mut a, mut b) = ([0u8; 8], [0u8; 8]);
            // SAFETY: element i of each side lies in its buffer (caller).
            unsafe { ptr::copy_nonoverlapping(src.add(i * fs), a.as_mut_ptr(), fs) };
            if self.swap_from {
                a[..fs].reverse();
            }
            // SAFETY: one element each way, within the arrays.
            unsafe { (self.kernel)(a.as_ptr(), b.as_mut_ptr(), 1) };
            if self.swap_to {
                b[..ts].reverse();
            }
            // SAFETY: as above.
            unsafe { ptr::copy_nonoverlapping(b.as_ptr(), dst.add(i * ts), ts) };
        }
    }
}

/// The loop of each value-preserving pair, the one list of them (`None`
/// for any other pair).
fn kernel(from: Scalar, to: Scalar) -> Option<Kernel> {
    use Scalar::*;
    /// A loop reading an `$a` at a time and writing `$f(x)` as a `$b`;
    /// compiled twice, for the baseline and for AVX2 where the CPU has it
    /// (wider vectors: float16 to float32 runs about 4x faster). The AVX2
    /// copies, chosen at run time, live in the section
    /// `ndgather_dispatched`, the only code `.ci/check_dist.py` lets use
    /// instructions beyond baseline x86-64.
    macro_rules! each {
        ($a:ty => $b:ty, $f:expr) => {{
            /// # Safety
            /// As for [`Cast::run`].
            #[inline(always)]
            unsafe fn body(src: *const u8, dst: *mut u8, n: usize) {
                let f = $f;
                for i in 0..n {
                    // SAFETY: element i lies in each buffer (caller);
                    // unaligned accesses, as NumPy arrays need not be aligned.
                    unsafe {
                        let x = src.cast::<$a>().add(i).read_unaligned();
                        dst.cast::<$b>().add(i).write_unaligned(f(x));
                    }
                }
            }
            /// # Safety
            /// As for [`Cast::run`].
            unsafe fn baseline(src: *const u8, dst: *mut u8, n: usize) {
                // SAFETY: forwarded from the caller.
                unsafe { body(src, dst, n) }
            }
            /// # Safety
            /// As for [`Cast::run`], on a CPU with AVX2.
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            #[link_section = "ndgather_dispatched"]
            unsafe fn avx2(src: *const u8, dst: *mut u8, n: usize) {
                // SAFETY: forwarded from the caller.
                unsafe { body(src, dst, n) }
            }
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("avx2") {
                // Only ever called on this CPU, which has AVX2 (checked just now).
                return Some(avx2 as Kernel);
            }
            Some(baseline as Kernel)
        }};
    }
    /// Integers and floats by `as`: exact for the widening pairs, rounding
    /// to nearest even for 64-bit integers to float64 (as C and NumPy do),
    /// and float32 to float64 through the FPU (a signalling NaN quieted,
    /// as NumPy's loop does).
    macro_rules! by_as {
        ($a:ty; $($to:ident => $b:ty),*) => {
            match to {
                $($to => each!($a => $b, |x: $a| x as $b),)*
                _ => None,
            }
        };
    }
    /// A bool (any non-zero byte) read as 0 or 1, then converted by `as`.
    macro_rules! by_bool {
        ($($to:ident => $b:ty),*) => {
            match to {
                $($to => each!(u8 => $b, |x: u8| u8::from(x != 0) as $b),)*
                _ => None,
            }
        };
    }
    match from {
        // NumPy reads any non-zero byte as true, and writes 1.
        Bool => match to {
            Bool => each!(u8 => u8, |x: u8| x),
            F16 => each!(u8 => u16, |x: u8| if x != 0 { F16_ONE } else { 0 }),
            BF16 => None,
            // 0 or 1 as a byte, then widened exactly by `as`.
            _ => by_bool!(I8 => i8, I16 => i16, I32 => i32, I64 => i64, U8 => u8, U16 => u16,
                U32 => u32, U64 => u64, F32 => f32, F64 => f64),
        },
        I8 => match to {
            F16 => each!(i8 => u16, |x: i8| small_int_to_f16(i32::from(x))),
            _ => by_as!(i8; I8 => i8, I16 => i16, I32 => i32, I64 => i64, F32 => f32, F64 => f64),
        },
        U8 => match to {
            F16 => each!(u8 => u16, |x: u8| small_int_to_f16(i32::from(x))),
            _ => by_as!(u8; U8 => u8, I16 => i16, I32 => i32, I64 => i64, U16 => u16, U32 => u32,
                U64 => u64, F32 => f32, F64 => f64),
        },
        I16 => by_as!(i16; I16 => i16, I32 => i32, I64 => i64, F32 => f32, F64 => f64),
        U16 => by_as!(u16; U16 => u16, I32 => i32, I64 => i64, U32 => u32, U64 => u64,
            F32 => f32, F64 => f64),
        I32 => by_as!(i32; I32 => i32, I64 => i64, F64 => f64),
        U32 => by_as!(u32; U32 => u32, I64 => i64, U64 => u64, F64 => f64),
        I64 => by_as!(i64; I64 => i64, F64 => f64),
        U64 => by_as!(u64; U64 => u64, F64 => f64),
        F16 => match to {
            F16 => each!(u16 => u16, |x: u16| x),
            #[cfg(target_arch = "x86_64")]
            F32 if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("f16c") =>
            {
                // Only ever called on this CPU, which has both (checked just now).
                Some(f16_to_f32_f16c as Kernel)
            }
            F32 => each!(u16 => u32, f16_to_f32_bits),
            F64 => each!(u16 => u64, f16_to_f64_bits),
            _ => None,
        },
        BF16 => match to {
            BF16 => each!(u16 => u16, |x: u16| x),
            F32 => each!(u16 => u32, |x: u16| u32::from(x) << 16),
            // ml_dtypes widens through float32 and the FPU, as here.
            F64 => each!(u16 => f64, |x: u16| f64::from(f32::from_bits(u32::from(x) << 16))),
            _ => None,
        },
        F32 => by_as!(f32; F32 => f32, F64 => f64),
        F64 => by_as!(f64; F64 => f64),
    }
}

/// 1.0 as a binary16.
const F16_ONE: u16 = 0x3c00;

/// The binary16 of an integer of at most 11 significant bits (here -128 to
/// 255), exactly.
#[inline(always)]
fn small_int_to_f16(v: i32) -> u16 {
    if v == 0 {
        return 0;
    }
    let sign = if v < 0 { 0x8000 } else { 0 };
    let m = v.unsigned_abs();
    let e = 31 - m.leading_zeros(); // the top bit's place: 2^e <= m
                                    // The bits below the top one, aligned to binary16's 10-bit fraction.
    let frac = (m ^ (1 << e)) << (10 - e);
    (sign | ((e + 15) << 10) | frac) as u16
}

/// binary16 to binary32, bit for bit as NumPy does it (`npy_halfbits_to_
/// floatbits`): exact, a NaN's payload kept (a signalling one stays so).
/// Branch-free, so that a run of them vectorises.
#[inline(always)]
pub(crate) fn f16_to_f32_bits(h: u16) -> u32 {
    let h = u32::from(h);
    let sign = (h & 0x8000) << 16;
    let mag = h & 0x7fff;
    let normal = (mag << 13) + ((127 - 15) << 23);
    let special = (mag << 13) | 0x7f80_0000; // infinities and NaNs
                                             // A subnormal (or zero) is its fraction times 2^-24: exact in binary32.
    let tiny = ((mag & 0x3ff) as f32 * f32::from_bits(0x3380_0000)).to_bits();
    let bits = if mag >= 0x7c00 {
        special
    } else if mag >= 0x0400 {
        normal
    } else {
        tiny
    };
    sign | bits
}

/// binary16 to binary32 as [`f16_to_f32_bits`], sixteen at a time with the
/// F16C instruction (`vcvtph2ps`, exact), which differs from NumPy in one
/// thing: it quiets a signalling NaN. Sixteen inputs are first tested for
/// one (a single compare pair and `vptest`: real tables hold none), and only
/// then are those lanes given the quiet bit back off (the scalar loop
/// compiled for AVX2 is not vectorised well).
///
/// # Safety
/// As for [`Cast::run`], on a CPU with AVX2 and F16C.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c")]
#[link_section = "ndgather_dispatched"]
unsafe fn f16_to_f32_f16c(src: *const u8, dst: *mut u8, n: usize) {
    use std::arch::x86_64::*;
    /// Eight halves widened, the signalling NaNs among them kept so.
    #[target_feature(enable = "avx2,f16c")]
    #[link_section = "ndgather_dispatched"]
    #[inline]
    fn eight(h: __m128i) -> __m256i {
        let f = _mm256_castps_si256(_mm256_cvtph_ps(h));
        // A signalling NaN: exponent all ones, fraction non-zero, its top
        // (quiet) bit clear: 0x7c00 < |h| < 0x7e00.
        let mag = _mm256_and_si256(_mm256_cvtepu16_epi32(h), _mm256_set1_epi32(0x7fff));
        let above = _mm256_cmpgt_epi32(mag, _mm256_set1_epi32(0x7c00));
        let below = _mm256_cmpgt_epi32(_mm256_set1_epi32(0x7e00), mag);
        let quiet = _mm256_and_si256(_mm256_and_si256(above, below), _mm256_set1_epi32(0x40_0000));
        _mm256_xor_si256(f, quiet)
    }
    let whole = n / 16 * 16;
    let mut i = 0;
    while i < whole {
        // SAFETY: elements i..i + 16 lie in each buffer (caller); unaligned
        // loads and stores.
        unsafe {
            let h = _mm256_loadu_si256(src.add(2 * i).cast());
            let (lo, hi) = (_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h));
            // The same test as in `eight`, on sixteen 16-bit lanes (|h| <=
            // 0x7fff, so the signed compares are right).
            let mag = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
            let above = _mm256_cmpgt_epi16(mag, _mm256_set1_epi16(0x7c00));
            let below = _mm256_cmpgt_epi16(_mm256_set1_epi16(0x7e00), mag);
            let (a, b) = if _mm256_testz_si256(above, below) == 1 {
                let a = _mm256_castps_si256(_mm256_cvtph_ps(lo));
                (a, _mm256_castps_si256(_mm256_cvtph_ps(hi)))
            } else {
                (eight(lo), eight(hi))
            };
            _mm256_storeu_si256(dst.add(4 * i).cast(), a);
            _mm256_storeu_si256(dst.add(4 * i + 32).cast(), b);
        }
        i += 16;
    }
    if i + 8 <= n {
        // SAFETY: elements i..i + 8 lie in each buffer (caller).
        unsafe {
            let h = _mm_loadu_si128(src.add(2 * i).cast());
            _mm256_storeu_si256(dst.add(4 * i).cast(), eight(h));
        }
        i += 8;
    }
    for j in i..n {
        // SAFETY: element j lies in each buffer (caller).
        unsafe {
            let h = src.cast::<u16>().add(j).read_unaligned();
            dst.cast::<u32>().add(j).write_unaligned(f16_to_f32_bits(h));
        }
    }
}

/// binary16 to binary64 bit for bit, as [`f16_to_f32_bits`] (NumPy's
/// `npy_halfbits_to_doublebits`).
#[inline(always)]
fn f16_to_f64_bits(h: u16) -> u64 {
    let h = u64::from(h);
    let sign = (h & 0x8000) << 48;
    let mag = h & 0x7fff;
    let normal = (mag << 42) + ((1023 - 15) << 52);
    let special = (mag << 42) | 0x7ff0_0000_0000_0000;
    let tiny = ((mag & 0x3ff) as f64 * f64::from_bits(0x3e70_0000_0000_0000)).to_bits();
    let bits = if mag >= 0x7c00 {
        special
    } else if mag >= 0x0400 {
        normal
    } else {
        tiny
    };
    sign | bits
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
