//! Tests of `plan/`.

use super::*;
use crate::error::GatherError;
use crate::test_support::view;

#[test]
fn only_long_contiguous_slices_of_huge_outputs_stream() {
    let contiguous = |bytes| SliceLayout::Contiguous { bytes };
    let t = tuning();
    assert!(streams(&contiguous(256), t.stream_min_out_bytes));
    assert!(streams(&contiguous(t.stream_min_slice_bytes), 1 << 30));
    assert!(!streams(&contiguous(t.stream_min_slice_bytes - 1), 1 << 30));
    assert!(!streams(&contiguous(63), 1 << 30));
    assert!(!streams(&contiguous(4096), t.stream_min_out_bytes - 1));
    let strided = SliceLayout::Strided {
        run: 4096,
        outer: smallvec::smallvec![(4, 8192)],
    };
    assert!(!streams(&strided, 1 << 30));
}

/// A buffer that starts on a cache line.
#[repr(C, align(64))]
struct Lines([u8; 64 * 64]);

#[test]
fn slice_alignment_is_the_first_element_and_the_strides() {
    let lines = Lines([0; 64 * 64]);
    let ids = 0i64.to_ne_bytes();
    let i = view(&ids, &[1], &[8], 8);
    // 64-byte rows of float32 on a line: every row starts on one.
    let rows = |offset| ArrayView {
        offset,
        ..view(&lines.0[..], &[63, 16], &[64, 4], 4)
    };
    let on_line = plan_gather(rows(0), i, IndexType::I64, 0, 0).unwrap();
    assert_eq!(on_line.slice_alignment(), 64);
    assert!(!on_line.ahead().tail);
    // 16 bytes past a line (where NumPy puts large buffers): half of
    // the rows end on a line their first line's steps miss.
    let past = plan_gather(rows(16), i, IndexType::I64, 0, 0).unwrap();
    assert_eq!(past.slice_alignment(), 16);
    assert!(past.ahead().tail);
    // Points of a float32 array: each a 4-byte element, on one line.
    let pairs = [0i64; 2].map(i64::to_ne_bytes).concat();
    let points = view(&lines.0[..], &[64, 16], &[64, 4], 4);
    let p = plan_gather_nd(
        points,
        view(&pairs, &[1, 2], &[16, 8], 8),
        IndexType::I64,
        0,
    );
    let p = p.unwrap();
    assert_eq!(p.slice_alignment(), 4);
    assert!(!p.ahead().tail);
}

#[test]
fn slice_phase_is_the_first_elements_where_every_stride_is_whole_lines() {
    let lines = Lines([0; 64 * 64]);
    let ids = 0i64.to_ne_bytes();
    let i = view(&ids, &[1], &[8], 8);
    // Rows of 64 or 128 bytes: every row as far past a line as the first.
    for (offset, width) in [(0, 16), (16, 16), (48, 16), (4, 16), (16, 32)] {
        let (shape, strides) = ([31, width], [(width * 4) as isize, 4]);
        let rows = ArrayView {
            offset,
            ..view(&lines.0[..], &shape, &strides, 4)
        };
        let plan = plan_gather(rows, i, IndexType::I64, 0, 0).unwrap();
        assert_eq!(
            plan.slice_phase(),
            Some(offset),
            "offset {offset}, width {width}"
        );
    }
    // Rows of 60 bytes: each at another offset in its line.
    let rows = ArrayView {
        offset: 16,
        ..view(&lines.0[..], &[63, 15], &[60, 4], 4)
    };
    let plan = plan_gather(rows, i, IndexType::I64, 0, 0).unwrap();
    assert_eq!(plan.slice_phase(), None);
}

#[test]
fn gather_nd_shapes_follow_the_spec() {
    let data = vec![0u8; 4 * 30 * 2 * 100 * 35];
    let d = view(&data, &[30, 2, 100, 35], &[28000, 14000, 140, 4], 4);
    let idx = vec![0u8; 8 * 180];
    let i = view(&idx, &[30, 2, 3, 1], &[48, 24, 8, 8], 8);
    let p = plan_gather_nd(d, i, IndexType::I64, 2).unwrap();
    assert_eq!(p.out_shape(), &[30, 2, 3, 35]);
    assert_eq!(p.slice_bytes, 140);
}

#[test]
fn gather_nd_rejects_broken_rules() {
    let data = vec![0u8; 16];
    let d = view(&data, &[2, 2], &[8, 4], 4);
    let idx = vec![0u8; 48];
    let i = view(&idx, &[2, 3], &[24, 8], 8);
    assert!(matches!(
        plan_gather_nd(d, i, IndexType::I64, 0),
        Err(GatherError::InvalidArgument(_))
    ));
    let i = view(&idx, &[2, 1], &[8, 8], 8);
    assert!(plan_gather_nd(d, i, IndexType::I64, -1).is_err());
    assert!(plan_gather_nd(d, i, IndexType::I64, 2).is_err());
    let i3 = view(&idx, &[3, 1], &[8, 8], 8);
    assert!(plan_gather_nd(d, i3, IndexType::I64, 1).is_err());
}

#[test]
fn gather_shapes_and_normalization() {
    let data = vec![0u8; 4 * 2 * 64 * 128];
    let d = view(&data, &[2, 64, 128], &[32768, 512, 4], 4);
    let idx = vec![0u8; 8 * 2 * 32 * 21];
    let i = view(&idx, &[2, 32, 21], &[5376, 168, 8], 8);
    let p = plan_gather(d, i, IndexType::I64, 1, 1).unwrap();
    assert_eq!(p.out_shape(), &[2, 32, 21, 128]);
    let p = plan_gather(d, i, IndexType::I64, -2, -2).unwrap();
    assert_eq!(p.out_shape(), &[2, 32, 21, 128]);
    assert!(plan_gather(d, i, IndexType::I64, 0, 1).is_err());
    assert!(plan_gather(d, i, IndexType::I64, 3, 0).is_err());
}

#[test]
fn overflowing_output_is_an_overflow_error() {
    let data = vec![0u8; 8];
    let d = view(&data, &[1, 1], &[8, 8], 8);
    let i = ArrayView {
        bytes: &[],
        offset: 0,
        shape: &[1 << 40, 1 << 40, 0],
        strides: &[0, 0, 8],
        itemsize: 8,
    };
    // k = 0 is rejected before the size is computed.
    assert!(plan_gather_nd(d, i, IndexType::I64, 0).is_err());
    let idx = [0u8; 8];
    let i = ArrayView {
        bytes: &idx,
        offset: 0,
        shape: &[1 << 40, 1 << 40],
        strides: &[0, 0],
        itemsize: 8,
    };
    assert!(matches!(
        plan_gather(d, i, IndexType::I64, 0, 0),
        Err(GatherError::Overflow(_))
    ));
}
