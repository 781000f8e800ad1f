//! Tests of `convert.rs`.

use super::*;

#[test]
fn small_integers_are_exact_in_binary16() {
    for v in -128..=255i32 {
        let h = small_int_to_f16(v);
        assert_eq!(f32::from_bits(f16_to_f32_bits(h)), v as f32, "{v}");
    }
    assert_eq!(small_int_to_f16(1), F16_ONE);
}

#[test]
fn binary16_widens_exactly_with_nan_payloads() {
    // Every binary16 against an independent decoding.
    for h in 0..=u16::MAX {
        let sign = if h & 0x8000 != 0 { -1.0 } else { 1.0 };
        let (e, f) = (i32::from((h >> 10) & 0x1f), f64::from(h & 0x3ff));
        let want = match e {
            0 => sign * f * 2f64.powi(-24),
            31 => f64::NAN,
            _ => sign * (1.0 + f / 1024.0) * 2f64.powi(e - 15),
        };
        let (w32, w64) = (
            f32::from_bits(f16_to_f32_bits(h)),
            f64::from_bits(f16_to_f64_bits(h)),
        );
        if e == 31 && f != 0.0 {
            // The payload moves up, untouched (no quiet bit set).
            assert_eq!(f16_to_f32_bits(h) & 0x7f_ffff, u32::from(h & 0x3ff) << 13);
            assert_eq!(
                f16_to_f64_bits(h) & 0xf_ffff_ffff_ffff,
                u64::from(h & 0x3ff) << 42
            );
            assert!(w32.is_nan() && w64.is_nan());
        } else if e == 31 {
            assert!(
                w32.is_infinite() && w64.is_infinite() && w32.is_sign_negative() == (sign < 0.0)
            );
        } else {
            assert_eq!(f64::from(w32), want, "{h:#x}");
            assert_eq!(w64, want, "{h:#x}");
            assert_eq!(w32.is_sign_negative(), sign < 0.0);
        }
    }
}

#[test]
fn every_binary16_widens_to_the_same_bits_on_every_path() {
    let all: Vec<u16> = (0..=u16::MAX).collect();
    let src: Vec<u8> = all.iter().flat_map(|h| h.to_ne_bytes()).collect();
    let cast = Cast::new(Scalar::F16, false, Scalar::F32, false).unwrap();
    // Odd lengths and offsets: the vector loops (sixteen, then eight
    // at a time, with signalling NaNs among them or not), the tail,
    // unaligned.
    for (skip, n) in [
        (0, all.len()),
        (1, all.len() - 3),
        (7, 5),
        (3, 24),
        (0x7c00, 40),
    ] {
        let mut dst = vec![0u8; 4 * n];
        // SAFETY: n elements each way.
        unsafe { cast.run(src[2 * skip..].as_ptr(), dst.as_mut_ptr(), n) };
        for (j, got) in dst.chunks_exact(4).enumerate() {
            let want = f16_to_f32_bits(all[skip + j]);
            assert_eq!(
                u32::from_ne_bytes(got.try_into().unwrap()),
                want,
                "{:#x}",
                all[skip + j]
            );
        }
    }
}

/// Whether every value of `from` is a value of `to`: NumPy's "safe" casts
/// among these types, `bfloat16` (ml_dtypes') only to float32 and float64,
/// and each type to itself.
fn numpy_safe(from: Scalar, to: Scalar) -> bool {
    use Scalar::*;
    from == to
        || match from {
            Bool => to != BF16,
            I8 => matches!(to, I16 | I32 | I64 | F16 | F32 | F64),
            U8 => matches!(to, I16 | I32 | I64 | U16 | U32 | U64 | F16 | F32 | F64),
            I16 => matches!(to, I32 | I64 | F32 | F64),
            U16 => matches!(to, I32 | I64 | U32 | U64 | F32 | F64),
            I32 => matches!(to, I64 | F64),
            U32 => matches!(to, I64 | U64 | F64),
            I64 | U64 => to == F64,
            F16 | BF16 => matches!(to, F32 | F64),
            F32 => to == F64,
            F64 => false,
        }
}

#[test]
fn only_widening_pairs_make_a_cast() {
    use Scalar::*;
    let all = [
        Bool, I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64,
    ];
    let mut n = 0;
    for a in all {
        for b in all {
            let cast = Cast::new(a, false, b, false);
            assert_eq!(cast.is_some(), numpy_safe(a, b), "{a:?} to {b:?}");
            if let Some(c) = cast {
                n += 1;
                assert!(b.size() >= a.size(), "{c:?}");
            }
        }
    }
    assert_eq!(n, 11 + 6 + 9 + 4 + 6 + 2 + 3 + 1 + 1 + 2 + 2 + 1 + 13);
}

#[test]
fn byte_swapped_sides_convert_through_native_order() {
    let c = Cast::new(Scalar::I16, true, Scalar::I64, true).unwrap();
    let src = (-2i16).to_be_bytes();
    let mut dst = [0u8; 8];
    // SAFETY: one element each way.
    unsafe { c.run(src.as_ptr(), dst.as_mut_ptr(), 1) };
    assert_eq!(i64::from_be_bytes(dst), -2);
}
