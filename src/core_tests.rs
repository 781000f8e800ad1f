//! End-to-end tests of the core against a naive element-by-element
//! reference, over random shapes, strides, index types and modes.

use crate::{plan_gather, plan_gather_nd, ArrayView, GatherError, IndexType, Mode, Validation};

/// Tiny deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A strided array of u16 elements whose values are their C-order
/// position, stored in a buffer laid out with a random axis order,
/// padding and reversed axes.
struct Strided {
    bytes: Vec<u8>,
    offset: usize,
    shape: Vec<usize>,
    strides: Vec<isize>,
}

fn strided(rng: &mut Rng, shape: &[usize]) -> Strided {
    let n = shape.len();
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    // Element strides in the memory order, with a random gap per axis.
    let mut strides = vec![0isize; n];
    let mut step = 1usize;
    for &axis in order.iter().rev() {
        strides[axis] = step as isize;
        step *= shape[axis].max(1) * (1 + rng.below(2));
    }
    let mut offset = 0usize;
    for (axis, s) in strides.iter_mut().enumerate() {
        if rng.below(3) == 0 && shape[axis] > 0 {
            offset += (shape[axis] - 1) * *s as usize;
            *s = -*s;
        }
    }
    let len = step.max(1);
    let mut bytes = vec![0u8; len * 2];
    let total: usize = shape.iter().product();
    for flat in 0..total {
        let mut rest = flat;
        let mut pos = offset as isize;
        for axis in (0..n).rev() {
            pos += (rest % shape[axis]) as isize * strides[axis];
            rest /= shape[axis];
        }
        let p = pos as usize * 2;
        bytes[p..p + 2].copy_from_slice(&(flat as u16).to_ne_bytes());
    }
    Strided {
        bytes,
        offset: offset * 2,
        shape: shape.to_vec(),
        strides: strides.iter().map(|s| s * 2).collect(),
    }
}

impl Strided {
    fn view(&self) -> ArrayView<'_> {
        ArrayView {
            bytes: &self.bytes,
            offset: self.offset,
            shape: &self.shape,
            strides: &self.strides,
            itemsize: 2,
        }
    }
}

/// Indices as a C-contiguous i32 array.
fn index_bytes(values: &[i64]) -> Vec<u8> {
    values
        .iter()
        .flat_map(|&v| (v as i32).to_ne_bytes())
        .collect()
}

fn c_strides(shape: &[usize], itemsize: usize) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = itemsize as isize;
    for i in (0..shape.len()).rev() {
        s[i] = acc;
        acc *= shape[i].max(1) as isize;
    }
    s
}

/// The index `v` resolved on an axis of `s`; negatives count from the end
/// when `wrap` (else they are out of range, or clip to 0).
fn resolve(v: i64, s: usize, mode: Mode, wrap: bool) -> Option<usize> {
    let s = s as i64;
    let w = match v {
        0.. => v,
        _ if wrap => v + s,
        _ if mode == Mode::Clip => 0,
        _ => return None,
    };
    match mode {
        Mode::Clip if s > 0 => Some(w.clamp(0, s - 1) as usize),
        _ if (0..s).contains(&w) => Some(w as usize),
        _ => None,
    }
}

fn c_flat(coords: &[usize], shape: &[usize]) -> usize {
    coords
        .iter()
        .zip(shape)
        .fold(0, |acc, (&c, &n)| acc * n + c)
}

fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut c = vec![0; shape.len()];
    for i in (0..shape.len()).rev() {
        c[i] = flat % shape[i];
        flat /= shape[i];
    }
    c
}

/// Naive gather_nd: `None` if an index is bad.
fn reference_nd(
    shape: &[usize],
    idx_shape: &[usize],
    idx: &[i64],
    b: usize,
    mode: Mode,
    wrap: bool,
) -> Option<Vec<u16>> {
    let q = idx_shape.len();
    let k = idx_shape[q - 1];
    let rows: usize = idx_shape[..q - 1].iter().product();
    let slice_shape = &shape[b + k..];
    let slice: usize = slice_shape.iter().product();
    let mut out = Vec::with_capacity(rows * slice);
    let bad = |p: usize| resolve(idx[p], shape[b + p % k], mode, wrap).is_none();
    if mode != Mode::Zero && (0..idx.len()).any(bad) {
        return None;
    }
    for row in 0..rows {
        let rc = unravel(row, &idx_shape[..q - 1]);
        let mut coords: Vec<usize> = rc[..b].to_vec();
        let mut zero = false;
        for j in 0..k {
            match resolve(idx[row * k + j], shape[b + j], mode, wrap) {
                Some(x) => coords.push(x),
                None if mode == Mode::Zero => {
                    zero = true;
                    coords.push(0);
                }
                None => return None,
            }
        }
        for e in 0..slice {
            let mut full = coords.clone();
            full.extend(unravel(e, slice_shape));
            out.push(if zero { 0 } else { c_flat(&full, shape) as u16 });
        }
    }
    Some(out)
}

/// Naive gather: `None` if an index is bad.
fn reference_take(
    shape: &[usize],
    idx_shape: &[usize],
    idx: &[i64],
    axis: usize,
    b: usize,
    mode: Mode,
    wrap: bool,
) -> Option<Vec<u16>> {
    let out_shape: Vec<usize> = shape[..axis]
        .iter()
        .chain(&idx_shape[b..])
        .chain(&shape[axis + 1..])
        .copied()
        .collect();
    let total: usize = out_shape.iter().product();
    // Every stored index is checked, even when the output is empty.
    if mode != Mode::Zero
        && idx
            .iter()
            .any(|&v| resolve(v, shape[axis], mode, wrap).is_none())
    {
        return None;
    }
    let extra = idx_shape.len() - b;
    let mut out = Vec::with_capacity(total);
    for flat in 0..total {
        let oc = unravel(flat, &out_shape);
        let mut ic: Vec<usize> = oc[..b].to_vec();
        ic.extend(&oc[axis..axis + extra]);
        let v = idx[c_flat(&ic, idx_shape)];
        let mut dc: Vec<usize> = oc[..axis].to_vec();
        match resolve(v, shape[axis], mode, wrap) {
            Some(x) => dc.push(x),
            None if mode == Mode::Zero => {
                out.push(0);
                continue;
            }
            None => return None,
        }
        dc.extend(&oc[axis + extra..]);
        out.push(c_flat(&dc, shape) as u16);
    }
    Some(out)
}

fn as_u16(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks_exact(2)
        .map(|c| u16::from_ne_bytes([c[0], c[1]]))
        .collect()
}

fn random_shape(rng: &mut Rng, rank: usize) -> Vec<usize> {
    (0..rank)
        .map(|_| rng.below(4) + usize::from(rng.below(8) != 0))
        .collect()
}

const MODES: [Mode; 3] = [Mode::Raise, Mode::Zero, Mode::Clip];

#[test]
fn gather_nd_matches_reference_on_random_inputs() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for case in 0..3000 {
        let r = 1 + rng.below(4);
        let shape = random_shape(&mut rng, r);
        let b = rng.below(r);
        let k = 1 + rng.below(r - b);
        let mut idx_shape: Vec<usize> = shape[..b].to_vec();
        idx_shape.extend((0..rng.below(3)).map(|_| rng.below(4)));
        idx_shape.push(k);
        let n: usize = idx_shape.iter().product();
        let idx: Vec<i64> = (0..n)
            .map(|p| {
                let s = shape[b + p % k] as i64;
                rng.below((2 * s + 3) as usize) as i64 - s - 1
            })
            .collect();
        let data = strided(&mut rng, &shape);
        let ib = index_bytes(&idx);
        let is = c_strides(&idx_shape, 4);
        let iv = ArrayView {
            bytes: &ib,
            offset: 0,
            shape: &idx_shape,
            strides: &is,
            itemsize: 4,
        };
        let mode = MODES[case % 3];
        let wrap = case % 7 != 0;
        let mut plan = plan_gather_nd(data.view(), iv, IndexType::I32, b as i64).unwrap();
        if !wrap {
            plan = plan.reject_negative_indices();
        }
        let mut out = vec![0xAAu8; plan.out_bytes()];
        let threads = 1 + case % 2;
        let got = plan.execute(mode, &mut out, Validation::BeforeWriting, threads);
        match reference_nd(&shape, &idx_shape, &idx, b, mode, wrap) {
            Some(want) => {
                assert!(got.is_ok(), "case {case}: {got:?}");
                assert_eq!(
                    as_u16(&out),
                    want,
                    "case {case}: shape {shape:?} idx {idx_shape:?} b={b} {mode:?}"
                );
            }
            None => {
                assert!(
                    matches!(got, Err(GatherError::IndexOutOfRange(_))),
                    "case {case}: {got:?}"
                );
                assert!(
                    out.iter().all(|&x| x == 0xAA),
                    "case {case}: output written before error"
                );
            }
        }
    }
}

#[test]
fn gather_matches_reference_on_random_inputs() {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    for case in 0..3000 {
        let r = 1 + rng.below(4);
        let shape = random_shape(&mut rng, r);
        let axis = rng.below(r);
        let b = rng.below(axis + 1);
        let mut idx_shape: Vec<usize> = shape[..b].to_vec();
        idx_shape.extend((0..rng.below(3)).map(|_| rng.below(4)));
        let n: usize = idx_shape.iter().product();
        let s = shape[axis] as i64;
        let idx: Vec<i64> = (0..n)
            .map(|_| rng.below((2 * s + 3) as usize) as i64 - s - 1)
            .collect();
        let data = strided(&mut rng, &shape);
        let ib = index_bytes(&idx);
        let is = c_strides(&idx_shape, 4);
        let iv = ArrayView {
            bytes: &ib,
            offset: 0,
            shape: &idx_shape,
            strides: &is,
            itemsize: 4,
        };
        let mode = MODES[case % 3];
        let wrap = case % 7 != 0;
        let mut plan = plan_gather(data.view(), iv, IndexType::I32, axis as i64, b as i64).unwrap();
        if !wrap {
            plan = plan.reject_negative_indices();
        }
        let mut out = vec![0u8; plan.out_bytes()];
        let got = plan.execute(mode, &mut out, Validation::WhileCopying, 1 + case % 2);
        match reference_take(&shape, &idx_shape, &idx, axis, b, mode, wrap) {
            Some(want) => {
                assert!(got.is_ok(), "case {case}: {got:?}");
                assert_eq!(
                    as_u16(&out),
                    want,
                    "case {case}: shape {shape:?} idx {idx_shape:?} axis={axis} b={b} {mode:?}"
                );
            }
            None => assert!(
                matches!(got, Err(GatherError::IndexOutOfRange(_))),
                "case {case}: {got:?}"
            ),
        }
    }
}

#[test]
fn first_bad_index_is_reported_whatever_the_threads() {
    // 2,000 rows take the out= path that computes all offsets first;
    // 200,000 rows the one that validates in a pass of its own.
    for rows in [2_000usize, 200_000] {
        let first = rows * 7 / 20 + 1;
        let data: Vec<u8> = (0..100u16).flat_map(|v| v.to_ne_bytes()).collect();
        let mut idx = vec![1i64; rows];
        for bad in [rows * 3 / 4, first, rows - 1] {
            idx[bad] = 100 + bad as i64;
        }
        let ib: Vec<u8> = idx.iter().flat_map(|v| v.to_ne_bytes()).collect();
        let d = ArrayView {
            bytes: &data,
            offset: 0,
            shape: &[100],
            strides: &[2],
            itemsize: 2,
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
    // 20 MB of 1000-byte rows: non-temporal stores at every alignment.
    let (rows, width, n) = (1024usize, 1000usize, 20_000usize);
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
    assert!(plan.stream);
    for threads in [1, 2] {
        let mut out = vec![0u8; plan.out_bytes()];
        plan.execute(Mode::Raise, &mut out, Validation::BeforeWriting, threads)
            .unwrap();
        for (row, &p) in out.chunks_exact(width).zip(&picks) {
            assert_eq!(row, &data[p * width..(p + 1) * width]);
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
