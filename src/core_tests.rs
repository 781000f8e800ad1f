//! Named regression tests of the core, end to end: each pins one case
//! (a path, a size, a geometry a fuzzer found) with its expected result.
//! The comparison with a naive reference over random shapes, layouts, index
//! types and modes is `tests/oracle.rs` (the fuzz targets' oracle,
//! `fuzz/oracle/`, on seeded inputs).

use crate::test_support::Rng;
use crate::{plan_gather, plan_gather_nd, ArrayView, GatherError, IndexType, Mode, Validation};

const MODES: [Mode; 3] = [Mode::Raise, Mode::Zero, Mode::Clip];

#[test]
fn first_bad_index_is_reported_whatever_the_threads() {
    // 2,000 rows take the out= path that computes all offsets first;
    // 200,000 rows of 2-byte elements (4 bytes of ids a byte of output)
    // the one that gathers into a buffer of its own first; of 16-byte
    // slices, the one that validates in a pass of its own.
    for (rows, width) in [(2_000usize, 2usize), (200_000, 2), (200_000, 16)] {
        let first = rows * 7 / 20 + 1;
        let data: Vec<u8> = (0..100 * width).map(|v| v as u8).collect();
        let mut idx = vec![1i64; rows];
        for bad in [rows * 3 / 4, first, rows - 1] {
            idx[bad] = 100 + bad as i64;
        }
        let ib: Vec<u8> = idx.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let d = ArrayView {
            bytes: &data,
            offset: 0,
            shape: &[100, width],
            strides: &[width as isize, 1],
            itemsize: 1,
        };
        let i = ArrayView {
            bytes: &ib,
            offset: 0,
            shape: &[rows],
            strides: &[8],
            itemsize: 8,
        };
        for threads in [1, 2, 4] {
            for validation in [Validation::BeforeWriting, Validation::WhileCopying] {
                let plan = plan_gather(d, i, IndexType::I64, 0, 0).unwrap();
                assert_eq!(plan.stages(), width == 2);
                let mut out = vec![0u8; plan.out_bytes()];
                match plan.execute(Mode::Raise, &mut out, validation, threads) {
                    Err(GatherError::IndexOutOfRange(e)) => {
                        assert_eq!(
                            (e.value, e.position.as_slice()),
                            (100 + first as i128, &[first][..])
                        );
                    }
                    other => panic!("{other:?}"),
                }
                if validation == Validation::BeforeWriting {
                    assert!(out.iter().all(|&b| b == 0), "out= written before the error");
                }
            }
        }
    }
}

/// An `out=` call of a few thousand rows from a `data` beyond the caches:
/// its row offsets are computed by several tasks before any byte is copied;
/// one of 800 rows (6,400 bytes of indices) checks them on the calling
/// thread first and splits the copy. Every mode gives the naive result, and
/// a bad index anywhere is reported as the first in C order with `out`
/// untouched, whatever the thread count.
/// `ov_gnd8_xml3`'s geometry (4,096 batches of one index each into rows
/// of 320 float32, 8 bytes of index a 4-byte element): an `out=` call that
/// splits saves the rows of `out` each task writes and puts them all back
/// when an index is bad, wherever the bad one lies; one on a single thread
/// gathers into its thread's kept buffer (holding an earlier call's bytes)
/// and copies that into `out` only if every index was good; good indices
/// give the naive result.
#[test]
fn out_calls_of_few_rows_put_back_what_they_wrote_on_an_error() {
    let (batches, width) = (4096usize, 320usize);
    let data: Vec<u8> = (0..batches * width)
        .flat_map(|v| (v as u32).to_ne_bytes())
        .collect();
    let d = ArrayView {
        bytes: &data,
        offset: 0,
        shape: &[batches, width],
        strides: &[4 * width as isize, 4],
        itemsize: 4,
    };
    let mut rng = Rng(31);
    let good: Vec<i64> = (0..batches).map(|_| rng.below(width) as i64).collect();
    let want: Vec<u8> = good
        .iter()
        .enumerate()
        .flat_map(|(b, &i)| ((b * width + i as usize) as u32).to_ne_bytes())
        .collect();
    for bad_at in [None, Some(0), Some(batches / 2 + 3), Some(batches - 1)] {
        let mut ids = good.clone();
        if let Some(at) = bad_at {
            ids[at] = width as i64;
        }
        let ib: Vec<u8> = ids.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let i = ArrayView {
            bytes: &ib,
            offset: 0,
            shape: &[batches, 1],
            strides: &[8, 8],
            itemsize: 8,
        };
        let plan = plan_gather_nd(d, i, IndexType::I64, 1).unwrap();
        assert!(plan.stages());
        for threads in [1, 2, 4] {
            // Through `execute` (whichever path the split takes now), the
            // saving path itself and the staging one.
            for way in ["execute", "undoable", "staged"] {
                // Other bytes every time, so that a buffer the allocator
                // hands back with an earlier call's bytes cannot pass for
                // rows this call saved.
                let seed = rng.below(251) as u8;
                let before: Vec<u8> = (0..4 * batches).map(|v| (v as u8) ^ seed).collect();
                let mut out = before.clone();
                let got = match way {
                    "undoable" => plan
                        .gather_undoable(Mode::Raise, &mut out, threads)
                        .unwrap(),
                    "staged" => plan.gather_staged(Mode::Raise, &mut out, threads).unwrap(),
                    _ => plan.execute(Mode::Raise, &mut out, Validation::BeforeWriting, threads),
                };
                match bad_at {
                    None => {
                        got.unwrap();
                        assert!(out == want, "{threads} threads, {way}");
                    }
                    Some(at) => {
                        match got {
                            Err(GatherError::IndexOutOfRange(e)) => {
                                assert_eq!(e.position.as_slice(), &[at, 0][..])
                            }
                            other => panic!("{other:?}"),
                        }
                        assert!(
                            out == before,
                            "out= changed: bad at {at}, {threads} threads, {way}"
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn out_offsets_computed_by_several_threads_are_exact() {
    // One thread's calls in turn, so that its kept buffer of offsets
    // (`execute::KEPT_OFFSETS`) is reused smaller, then grown.
    for n in [3_000, 800, 5_000] {
        out_call_of_n_rows_is_exact(n);
    }
}

fn out_call_of_n_rows_is_exact(n: usize) {
    let (rows, width) = (65_536usize, 256usize);
    let data: Vec<u8> = (0..rows * width).map(|i| (i % 253) as u8).collect();
    let d = ArrayView {
        bytes: &data,
        offset: 0,
        shape: &[rows, width],
        strides: &[width as isize, 1],
        itemsize: 1,
    };
    let mut rng = Rng(11);
    let good: Vec<i64> = (0..n).map(|_| rng.below(rows) as i64).collect();
    let bytes = |ids: &[i64]| -> Vec<u8> { ids.iter().flat_map(|v| v.to_ne_bytes()).collect() };
    let want: Vec<u8> = good
        .iter()
        .flat_map(|&r| data[r as usize * width..(r as usize + 1) * width].to_vec())
        .collect();
    let mut bad = good.clone();
    let first = n / 3 + 7;
    for at in [n - 1, first, n * 2 / 3] {
        bad[at] = rows as i64 + at as i64;
    }
    for threads in [1, 2, 4] {
        let ib = bytes(&good);
        let i = ArrayView {
            bytes: &ib,
            offset: 0,
            shape: &[n],
            strides: &[8],
            itemsize: 8,
        };
        let plan = plan_gather(d, i, IndexType::I64, 0, 0).unwrap();
        for mode in MODES {
            let mut out = vec![0u8; plan.out_bytes()];
            plan.execute(mode, &mut out, Validation::BeforeWriting, threads)
                .unwrap();
            assert!(out == want, "{mode:?}, {threads} threads");
        }
        let ib = bytes(&bad);
        let i = ArrayView {
            bytes: &ib,
            offset: 0,
            shape: &[n],
            strides: &[8],
            itemsize: 8,
        };
        let plan = plan_gather(d, i, IndexType::I64, 0, 0).unwrap();
        let mut out = vec![0xA5u8; plan.out_bytes()];
        match plan.execute(Mode::Raise, &mut out, Validation::BeforeWriting, threads) {
            Err(GatherError::IndexOutOfRange(e)) => assert_eq!(
                (e.value, e.position.as_slice()),
                ((rows + first) as i128, &[first][..])
            ),
            other => panic!("{threads} threads: {other:?}"),
        }
        assert!(
            out.iter().all(|&b| b == 0xA5),
            "out= written before the error"
        );
    }
}

/// `out=` calls of element lookups by pairs of int64 (16 bytes of indices
/// a 4-byte element) gather into a buffer of their own, its indices checked
/// on the way, then copy it into `out`: one under the pool's smallest
/// buffer, one over it. Every mode gives the naive result; a bad index is
/// reported as the first in C order and leaves `out` untouched.
#[test]
fn out_calls_of_element_lookups_gather_through_a_buffer_of_their_own() {
    // Its buffers come from the pool, whose own test counts its bytes.
    let _alone = crate::pool::tests_alone();
    let side = 512usize;
    let data: Vec<u8> = (0..side * side)
        .flat_map(|v| (v as u32).to_ne_bytes())
        .collect();
    let d = ArrayView {
        bytes: &data,
        offset: 0,
        shape: &[side, side],
        strides: &[4 * side as isize, 4],
        itemsize: 4,
    };
    let mut rng = Rng(5);
    for n in [20_000usize, 300_000] {
        let good: Vec<i64> = (0..2 * n).map(|_| rng.below(side) as i64).collect();
        let want: Vec<u8> = good
            .chunks(2)
            .flat_map(|p| ((p[0] as usize * side + p[1] as usize) as u32).to_ne_bytes())
            .collect();
        let mut bad = good.clone();
        let first = n / 3 + 1;
        for at in [2 * n - 1, 2 * first + 1, n * 4 / 3] {
            bad[at] = -(side as i64) - 1;
        }
        for (ids, is_bad) in [(&good, false), (&bad, true)] {
            let ib: Vec<u8> = ids.iter().flat_map(|v| v.to_ne_bytes()).collect();
            let i = ArrayView {
                bytes: &ib,
                offset: 0,
                shape: &[n, 2],
                strides: &[16, 8],
                itemsize: 8,
            };
            let plan = plan_gather_nd(d, i, IndexType::I64, 0).unwrap();
            assert!(plan.stages(), "{n} points");
            for threads in [1, 2, 4] {
                for mode in [Mode::Raise, Mode::Clip] {
                    let mut out = vec![0xA5u8; plan.out_bytes()];
                    let got = plan.execute(mode, &mut out, Validation::BeforeWriting, threads);
                    if !is_bad {
                        got.unwrap();
                        assert!(out == want, "{n} points, {mode:?}, {threads} threads");
                        continue;
                    }
                    if mode == Mode::Clip {
                        continue;
                    }
                    match got {
                        Err(GatherError::IndexOutOfRange(e)) => assert_eq!(
                            (e.value, e.position.as_slice()),
                            (-(side as i128) - 1, &[first, 1][..])
                        ),
                        other => panic!("{n} points, {threads} threads: {other:?}"),
                    }
                    assert!(
                        out.iter().all(|&b| b == 0xA5),
                        "out= written before the error"
                    );
                }
            }
        }
    }
}

#[test]
fn large_parallel_gather_equals_serial() {
    let rows = 50_000usize;
    let data: Vec<u8> = (0..rows * 8).map(|i| (i % 251) as u8).collect();
    let mut rng = Rng(7);
    let idx: Vec<u8> = (0..rows)
        .flat_map(|_| (rng.below(rows) as u32).to_ne_bytes())
        .collect();
    let d = ArrayView {
        bytes: &data,
        offset: 0,
        shape: &[rows, 8],
        strides: &[8, 1],
        itemsize: 1,
    };
    let i = ArrayView {
        bytes: &idx,
        offset: 0,
        shape: &[rows, 1],
        strides: &[4, 4],
        itemsize: 4,
    };
    let plan = plan_gather_nd(d, i, IndexType::U32, 0).unwrap();
    let mut serial = vec![0u8; plan.out_bytes()];
    let mut parallel = vec![0u8; plan.out_bytes()];
    plan.execute(Mode::Raise, &mut serial, Validation::BeforeWriting, 1)
        .unwrap();
    plan.execute(Mode::Raise, &mut parallel, Validation::WhileCopying, 2)
        .unwrap();
    assert_eq!(serial, parallel);
}

#[test]
fn unsigned_indices_above_i64_max_are_out_of_range() {
    let data = [1u8, 2, 3];
    let idx = u64::MAX.to_ne_bytes();
    let d = ArrayView {
        bytes: &data,
        offset: 0,
        shape: &[3],
        strides: &[1],
        itemsize: 1,
    };
    let i = ArrayView {
        bytes: &idx,
        offset: 0,
        shape: &[],
        strides: &[],
        itemsize: 8,
    };
    let plan = plan_gather(d, i, IndexType::U64, 0, 0).unwrap();
    let mut out = [0u8; 1];
    match plan.execute(Mode::Raise, &mut out, Validation::BeforeWriting, 1) {
        Err(GatherError::IndexOutOfRange(e)) => assert_eq!(e.value, u64::MAX as i128),
        other => panic!("{other:?}"),
    }
    plan.execute(Mode::Clip, &mut out, Validation::BeforeWriting, 1)
        .unwrap();
    assert_eq!(out, [3]);
}

#[test]
fn huge_outputs_streamed_past_the_cache_are_exact() {
    // Past the machine's streaming threshold (20 MB of 1000-byte rows on
    // the AMD kind), and of the narrowest slice it streams: non-temporal
    // stores at every alignment.
    let narrowest = crate::machine::tuning().stream_min_slice_bytes;
    for width in [narrowest, narrowest + 8, 1000] {
        let rows = 1024usize;
        let n = crate::machine::tuning().stream_min_out_bytes / width + 4000;
        let data: Vec<u8> = (0..rows * width).map(|i| (i * 31 % 251) as u8).collect();
        let mut rng = Rng(11);
        let picks: Vec<usize> = (0..n).map(|_| rng.below(rows)).collect();
        let idx: Vec<u8> = picks
            .iter()
            .flat_map(|&p| (p as u16).to_ne_bytes())
            .collect();
        let d = ArrayView {
            bytes: &data,
            offset: 0,
            shape: &[rows, width],
            strides: &[width as isize, 1],
            itemsize: 1,
        };
        let i = ArrayView {
            bytes: &idx,
            offset: 0,
            shape: &[n],
            strides: &[2],
            itemsize: 2,
        };
        let plan = plan_gather(d, i, IndexType::U16, 0, 0).unwrap();
        assert!(plan.stream, "{width}");
        for threads in [1, 2] {
            let mut out = vec![0u8; plan.out_bytes()];
            plan.execute(Mode::Raise, &mut out, Validation::BeforeWriting, threads)
                .unwrap();
            for (row, &p) in out.chunks_exact(width).zip(&picks) {
                assert_eq!(row, &data[p * width..(p + 1) * width]);
            }
        }
    }
}

#[test]
fn an_empty_view_whose_offset_is_past_its_bytes_is_rejected() {
    // Shape (0, 3), no bytes, element [0, 0] "at" byte 100: were it accepted,
    // Mode::Zero would zero-fill the row of index 5 and the kernel would form
    // `bytes.as_ptr().add(100)` on an empty slice.
    let d = ArrayView {
        bytes: &[],
        offset: 100,
        shape: &[0, 3],
        strides: &[12, 4],
        itemsize: 4,
    };
    let idx = 5i64.to_ne_bytes();
    let i = ArrayView {
        bytes: &idx,
        offset: 0,
        shape: &[1],
        strides: &[8],
        itemsize: 8,
    };
    let i_nd = ArrayView {
        shape: &[1, 1],
        strides: &[8, 8],
        ..i
    };
    for plan in [
        plan_gather(d, i, IndexType::I64, 0, 0),
        plan_gather_nd(d, i_nd, IndexType::I64, 0),
    ] {
        match plan {
            Err(GatherError::InvalidArgument(msg)) => assert!(msg.contains("data"), "{msg}"),
            Ok(plan) => {
                let mut out = vec![0xAAu8; plan.out_bytes()];
                let got = plan.execute(Mode::Zero, &mut out, Validation::WhileCopying, 1);
                panic!("accepted: {got:?}, {out:?}");
            }
            Err(other) => panic!("{other:?}"),
        }
    }
    let mut out = [0xAAu8; 12];
    // Offset 0 (or bytes.len()) is where an empty view's element [0, 0] is.
    let d = ArrayView { offset: 0, ..d };
    let plan = plan_gather(d, i, IndexType::I64, 0, 0).unwrap();
    plan.execute(Mode::Zero, &mut out, Validation::WhileCopying, 1)
        .unwrap();
    assert_eq!(out, [0; 12]);
}

/// Runs `f` on a thread of its own; panics if it takes longer than `secs`.
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("took too long (or panicked)")
}

/// `indices` of shape `shape` and byte `strides` over the i64 `values`, and
/// the first bad index in C order, if any: its value and position.
struct BroadcastCase {
    shape: &'static [usize],
    strides: &'static [isize],
    values: [i64; 3],
    bad: Option<(i64, &'static [usize])>,
}

#[test]
fn broadcast_indices_are_validated_once_per_distinct_value() {
    // `indices` of 2**40 positions along a stride-0 axis, with `data` of an
    // empty trailing axis: an empty output, whose every index must still be
    // valid. Checking each position would take many minutes.
    const HUGE: usize = 1 << 40;
    let case = |shape, strides, values, bad| BroadcastCase {
        shape,
        strides,
        values,
        bad,
    };
    // The bad index on a stride-0 axis, outer or inner, or on a strided one
    // beside it; `data` has 5 rows, so -5..5 are valid.
    let cases = [
        case(&[HUGE], &[0], [1, 0, 0], None),
        case(&[HUGE], &[0], [-6, 0, 0], Some((-6, &[0]))),
        case(&[HUGE, 3], &[0, 8], [0, 4, 7], Some((7, &[0, 2]))),
        case(&[3, HUGE], &[8, 0], [0, 9, 1], Some((9, &[1, 0]))),
        case(&[2, HUGE, 3], &[0, 0, 8], [-5, 4, 5], Some((5, &[0, 0, 2]))),
    ];
    for c in cases {
        for mode in MODES {
            for validation in [Validation::BeforeWriting, Validation::WhileCopying] {
                let got = within(20, move || {
                    let ib: Vec<u8> = c.values.iter().flat_map(|v| v.to_ne_bytes()).collect();
                    let d = ArrayView {
                        bytes: &[],
                        offset: 0,
                        shape: &[5, 0],
                        strides: &[0, 4],
                        itemsize: 4,
                    };
                    let i = ArrayView {
                        bytes: &ib,
                        offset: 0,
                        shape: c.shape,
                        strides: c.strides,
                        itemsize: 8,
                    };
                    let plan = plan_gather(d, i, IndexType::I64, 0, 0).unwrap();
                    assert_eq!(plan.out_bytes(), 0);
                    plan.execute(mode, &mut [], validation, 2)
                });
                match (mode, c.bad, got) {
                    (Mode::Raise, Some((value, at)), Err(GatherError::IndexOutOfRange(e))) => {
                        assert_eq!((e.value, e.position.as_slice()), (value as i128, at));
                    }
                    (Mode::Raise, Some(_), got) => panic!("{:?}: {got:?}", c.shape),
                    (_, _, got) => assert!(got.is_ok(), "{:?} {mode:?}: {got:?}", c.shape),
                }
            }
        }
    }
}

/// Geometry no NumPy array has (found by `fuzz/`): an empty view's other
/// axes are checked against no buffer, so they may be longer than `isize`
/// or their product may not fit 64 bits. Planning must refuse them as an
/// `Overflow`, not panic on an overflow (debug builds) nor wrap and skip
/// the index checks (release builds).
#[test]
fn absurd_axes_next_to_an_empty_one_are_an_overflow() {
    let one = [5u8];
    let bytes = [0u8; 8];
    // Indices of 2^64 virtual elements (zero strides) gathered into an
    // empty output: the index walk's length did not fit usize.
    let d = ArrayView {
        bytes: &bytes,
        offset: 0,
        shape: &[2, 0],
        strides: &[1, 1],
        itemsize: 1,
    };
    let i = ArrayView {
        bytes: &one,
        offset: 0,
        shape: &[1 << 32, 1 << 32],
        strides: &[0, 0],
        itemsize: 1,
    };
    assert!(matches!(
        plan_gather(d, i, IndexType::I8, 0, 0),
        Err(GatherError::Overflow(_))
    ));
    // An axis of usize::MAX beside an empty one: its size read as i64 was
    // -1, and the out-of-range index u64::MAX passed for valid.
    let d = ArrayView {
        bytes: &bytes,
        offset: 0,
        shape: &[usize::MAX, 0],
        strides: &[1, 1],
        itemsize: 1,
    };
    let idx = u64::MAX.to_ne_bytes();
    let i = ArrayView {
        bytes: &idx,
        offset: 0,
        shape: &[1, 1],
        strides: &[8, 8],
        itemsize: 8,
    };
    assert!(matches!(
        plan_gather_nd(d, i, IndexType::U64, 0),
        Err(GatherError::Overflow(_))
    ));
}

/// The strides of an empty `data` are not checked against a buffer; merging
/// its batch axes multiplied them without a check (found by `fuzz/`).
#[test]
fn huge_strides_of_an_empty_data_do_not_overflow() {
    let bytes = [0u8; 4];
    let d = ArrayView {
        bytes: &bytes,
        offset: 0,
        shape: &[2, 2, 0],
        strides: &[1, isize::MAX, 1],
        itemsize: 2,
    };
    let idx = [0u8; 4];
    let i = ArrayView {
        bytes: &idx,
        offset: 0,
        shape: &[2, 2, 1],
        strides: &[2, 1, 1],
        itemsize: 1,
    };
    let plan = plan_gather_nd(d, i, IndexType::U8, 2).unwrap();
    assert_eq!(plan.out_shape(), &[2, 2]);
    // Every index addresses the empty axis: zeros, or an error.
    let mut out = [0xEEu8; 8];
    plan.execute(Mode::Zero, &mut out, Validation::BeforeWriting, 1)
        .unwrap();
    assert_eq!(out, [0; 8]);
    assert!(matches!(
        plan.execute(Mode::Raise, &mut out, Validation::BeforeWriting, 1),
        Err(GatherError::IndexOutOfRange(_))
    ));
}

/// `ids` as the bytes of an `int64` array if `wide`, else of an `int32`
/// one (each value cast), with its index type and item size.
fn index_bytes(ids: &[i64], wide: bool) -> (Vec<u8>, IndexType, isize) {
    if wide {
        let bytes = ids.iter().flat_map(|v| v.to_ne_bytes());
        (bytes.collect(), IndexType::I64, 8)
    } else {
        let bytes = ids.iter().flat_map(|&v| (v as i32).to_ne_bytes());
        (bytes.collect(), IndexType::I32, 4)
    }
}

/// GatherND tuples of one to five indices, resolved (and, before writing,
/// validated) eight tuples at a time where the CPU allows
/// (`offsets::wide_run` takes up to four) and one at a time otherwise,
/// against a naive loop: `i64` and `i32` indices,
/// negatives from the end or rejected, a bad index at every position of its
/// eight and in the scalar tail, in each place of its tuple, every mode;
/// without batch dimensions (every row's offset from the same place) and
/// with one tuple a batch (each row's from the next batch's place).
#[test]
fn tuples_resolved_eight_at_a_time_are_exact() {
    let all_sizes = [5usize, 3, 4, 2, 3];
    let (width, n) = (3usize, 203usize);
    let mut rng = Rng(11);
    for (k, batch) in (1..=all_sizes.len()).flat_map(|k| [(k, 0usize), (k, 1)]) {
        let sizes = &all_sizes[..k];
        let rows: usize = sizes.iter().product();
        // With a batch axis, tuple t is looked up in batch t (n batches).
        let batches = if batch == 1 { n } else { 1 };
        let data: Vec<u8> = (0..batches * rows * width)
            .map(|v| (v * 7 % 251) as u8)
            .collect();
        let mut shape = sizes.to_vec();
        if batch == 1 {
            shape.insert(0, n);
        }
        shape.push(width);
        let mut strides = vec![0isize; shape.len()];
        let mut step = 1isize;
        for (s, &d) in strides.iter_mut().zip(&shape).rev() {
            *s = step;
            step *= d as isize;
        }
        let d = ArrayView {
            bytes: &data,
            offset: 0,
            shape: &shape,
            strides: &strides,
            itemsize: 1,
        };
        let good: Vec<i64> = (0..n * k)
            .map(|p| {
                let s = sizes[p % k];
                rng.below(2 * s) as i64 - s as i64
            })
            .collect();
        for bad_at in [None, Some(0), Some(7), Some(9), Some(130), Some(n - 1)] {
            let place = bad_at.map_or(0, |p| p % k);
            let s = sizes[place] as i64;
            for bad in [s, -s - 1, i64::from(i32::MAX)] {
                let mut ids = good.clone();
                if let Some(p) = bad_at {
                    ids[p * k + place] = bad;
                }
                for (wide, wrap) in [(true, true), (false, true), (true, false)] {
                    let (ib, ty, size) = index_bytes(&ids, wide);
                    let i = ArrayView {
                        bytes: &ib,
                        offset: 0,
                        shape: &[n, k],
                        strides: &[size * k as isize, size],
                        itemsize: size as usize,
                    };
                    let mut plan = plan_gather_nd(d, i, ty, batch as i64).unwrap();
                    if !wrap {
                        plan = plan.reject_negative_indices();
                    }
                    // The first index of C order outside its axis, and each
                    // tuple's row (clipped if `clip`; `None` if it has a bad
                    // index and does not clip).
                    let resolve = |v: i64, s: usize, clip: bool| {
                        let r = if v < 0 && wrap { v + s as i64 } else { v };
                        if clip {
                            Some(r.clamp(0, s as i64 - 1) as usize)
                        } else {
                            usize::try_from(r).ok().filter(|&r| r < s)
                        }
                    };
                    let first_bad =
                        (0..n * k).find(|&p| resolve(ids[p], sizes[p % k], false).is_none());
                    let runs = [Mode::Raise, Mode::Zero, Mode::Clip]
                        .into_iter()
                        .flat_map(|m| {
                            [
                                (m, Validation::WhileCopying),
                                (m, Validation::BeforeWriting),
                            ]
                        });
                    for (mode, validation) in runs {
                        let mut out = vec![0xEEu8; plan.out_bytes()];
                        let got = plan.execute(mode, &mut out, validation, 1);
                        if let (Mode::Raise, Some(p)) = (mode, first_bad) {
                            match got {
                                Err(GatherError::IndexOutOfRange(e)) => assert_eq!(
                                    (e.value, e.position.as_slice()),
                                    (ids[p] as i128, &[p / k, p % k][..]),
                                    "k {k} batch {batch} wide {wide} wrap {wrap}"
                                ),
                                other => panic!("{other:?}"),
                            }
                            continue;
                        }
                        got.unwrap();
                        for (t, row) in out.chunks_exact(width).enumerate() {
                            let tuple = &ids[t * k..(t + 1) * k];
                            let at = tuple.iter().zip(sizes).try_fold(0, |acc, (&v, &s)| {
                                resolve(v, s, mode == Mode::Clip).map(|r| acc * s + r)
                            });
                            let first = if batch == 1 { t * rows } else { 0 };
                            match at.map(|r| first + r) {
                                Some(r) => assert_eq!(
                                    row,
                                    &data[r * width..(r + 1) * width],
                                    "k {k} batch {batch} wide {wide} wrap {wrap} {mode:?} tuple {t}"
                                ),
                                None => assert!(row.iter().all(|&b| b == 0), "{t}"),
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Gathers whose indices are resolved eight at a time where the CPU allows
/// (`offsets::wide_offsets`: one `i64` or `i32` index a row, read in order),
/// against a naive loop: negatives from the end or not, a bad index at
/// every position of its eight and in the scalar tail, every mode.
#[test]
fn indices_resolved_eight_at_a_time_are_exact() {
    let (rows, width, n) = (50usize, 3usize, 203usize);
    let data: Vec<u8> = (0..rows * width).map(|v| (v * 7 % 251) as u8).collect();
    let d = ArrayView {
        bytes: &data,
        offset: 0,
        shape: &[rows, width],
        strides: &[width as isize, 1],
        itemsize: 1,
    };
    let mut rng = Rng(5);
    let good: Vec<i64> = (0..n)
        .map(|_| rng.below(2 * rows) as i64 - rows as i64)
        .collect();
    for bad_at in [None, Some(0), Some(7), Some(9), Some(130), Some(n - 1)] {
        for bad in [rows as i64, -(rows as i64) - 1, i64::from(i32::MAX)] {
            let mut ids = good.clone();
            if let Some(p) = bad_at {
                ids[p] = bad;
            }
            for wide in [true, false] {
                let (ib, ty, size) = index_bytes(&ids, wide);
                let i = ArrayView {
                    bytes: &ib,
                    offset: 0,
                    shape: &[n],
                    strides: &[size],
                    itemsize: size as usize,
                };
                let plan = plan_gather(d, i, ty, 0, 0).unwrap();
                for mode in [Mode::Raise, Mode::Zero] {
                    let mut out = vec![0xEEu8; plan.out_bytes()];
                    let got = plan.execute(mode, &mut out, Validation::WhileCopying, 1);
                    match (mode, bad_at) {
                        (Mode::Raise, Some(p)) => match got {
                            Err(GatherError::IndexOutOfRange(e)) => {
                                assert_eq!(
                                    (e.value, e.position.as_slice()),
                                    (bad as i128, &[p][..])
                                )
                            }
                            other => panic!("{other:?}"),
                        },
                        _ => {
                            got.unwrap();
                            for (k, (row, &v)) in out.chunks_exact(width).zip(&ids).enumerate() {
                                let r = if v < 0 { v + rows as i64 } else { v };
                                if (0..rows as i64).contains(&r) {
                                    let r = r as usize;
                                    assert_eq!(row, &data[r * width..(r + 1) * width], "{k}");
                                } else {
                                    assert_eq!(Some(k), bad_at);
                                    assert!(row.iter().all(|&b| b == 0));
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
