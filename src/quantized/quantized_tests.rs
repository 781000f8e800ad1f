//! Tests of `dequantize.rs`.

use super::*;
use crate::{ArrayView, IndexType, Mode};

fn gather(q: &BlockQuantized<'_>, idx: &[i64], threads: usize) -> Vec<f32> {
    let bytes: Vec<u8> = idx.iter().flat_map(|i| i.to_ne_bytes()).collect();
    let n = (q.shape.iter().product::<usize>() / q.shape[q.gather_axis]) * idx.len();
    let mut out = vec![0u8; n * 4];
    gather_block_quantized(q, Indices::I64(&bytes), &mut out, threads).unwrap();
    out.chunks_exact(4)
        .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

#[test]
fn packed_4bit_default_zero_point_and_out_of_range() {
    // 2 rows of 4 codes: 0..3 and 8..11; one block, scale 2 and 0.5.
    let bytes = [0x10, 0x32, 0x98, 0xba];
    let scales: Vec<u8> = [2.0f32, 0.5].iter().flat_map(|s| s.to_ne_bytes()).collect();
    let q = BlockQuantized {
        codes: Codes::Packed {
            bytes: &bytes,
            bits: 4,
        },
        shape: &[2, 4],
        scales: &scales,
        scale_type: ScaleType::Float32,
        zero_points: None,
        gather_axis: 0,
        quantize_axis: 1,
        block_size: 16,
    };
    let got = gather(&q, &[1, -2, 2], 1);
    let want = [
        0.0, 0.5, 1.0, 1.5, -16.0, -14.0, -12.0, -10.0, 0.0, 0.0, 0.0, 0.0,
    ];
    assert_eq!(got, want);
}

#[test]
fn int4_along_the_quantize_axis_threads_agree() {
    // (3, 40) int4 codes, gathered along the quantize axis 1 in blocks of 16.
    let bytes: Vec<u8> = (0..120u32).map(|v| (v * 7 % 16) as u8).collect();
    let scales: Vec<u8> = (0..9)
        .flat_map(|s| (0.25f32 * (s + 1) as f32).to_ne_bytes())
        .collect();
    let zps: Vec<u8> = (0..9u8).map(|z| z % 3).collect();
    let q = BlockQuantized {
        codes: Codes::Int4(&bytes),
        shape: &[3, 40],
        scales: &scales,
        scale_type: ScaleType::Float32,
        zero_points: Some(&zps),
        gather_axis: 1,
        quantize_axis: 1,
        block_size: 16,
    };
    let idx: Vec<i64> = (0..5000).map(|i| i % 83 - 41).collect();
    let one = gather(&q, &idx, 1);
    assert_eq!(one, gather(&q, &idx, 4));
    // The naive formula, element by element.
    for (p, &v) in one.iter().enumerate() {
        let (row, n) = (p / idx.len(), p % idx.len());
        let i = idx[n];
        if !(-40..40).contains(&i) {
            assert_eq!(v, 0.0);
            continue;
        }
        let col = i.rem_euclid(40) as usize;
        let code = i32::from(((bytes[row * 40 + col] << 4) as i8) >> 4);
        let s = row * 3 + col / 16;
        let zp = i32::from(((zps[s] << 4) as i8) >> 4);
        assert_eq!(v, (code - zp) as f32 * 0.25 * (s + 1) as f32);
    }
}

#[test]
fn bad_lengths_are_errors() {
    let q = BlockQuantized {
        codes: Codes::UInt4(&[1, 2, 3]),
        shape: &[2, 2],
        scales: &[0; 8],
        scale_type: ScaleType::Float32,
        zero_points: None,
        gather_axis: 0,
        quantize_axis: 1,
        block_size: 16,
    };
    let mut out = [0u8; 8];
    assert!(gather_block_quantized(&q, Indices::I32(&[0; 4]), &mut out, 1).is_err());
}

#[test]
fn stored_and_logical_shapes_differ_only_on_the_packed_axis() {
    let idx = [0i64, 1];
    let bytes: Vec<u8> = idx.iter().flat_map(|v| v.to_ne_bytes()).collect();
    let view = ArrayView {
        bytes: &bytes,
        offset: 0,
        shape: &[2],
        strides: &[8],
        itemsize: 8,
    };
    let out = |stored: &[usize], shape: &[usize], axis| {
        block_quantized_out_shape(stored, shape, axis, view, IndexType::I64, Mode::Zero, 1)
    };
    // Packed 4-bit codes: 4 bytes hold 8 elements along the last axis.
    assert_eq!(out(&[3, 4], &[3, 8], 0).unwrap(), vec![2, 8]);
    // A leading axis that differs was once taken from the stored shape.
    assert!(out(&[2, 0], &[1, 0], 1).is_err());
    assert!(out(&[2, 3, 4], &[3, 2, 4], 2).is_err());
}
