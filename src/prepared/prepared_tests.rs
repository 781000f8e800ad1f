//! Tests of `prepared/mod.rs`.

use super::order::{SORT_IGNORED_BITS, SORT_PARALLEL_MIN_ROWS};
use super::*;
use crate::test_support::view;
use crate::Scalar;
use crate::{plan_gather, plan_gather_nd, Validation};

fn i64_bytes(v: &[i64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// A 3-d array of u16, its element [i, j, k] = i * 100 + j * 10 + k.
fn data3(shape: [usize; 3]) -> Vec<u8> {
    let mut v = vec![];
    for i in 0..shape[0] {
        for j in 0..shape[1] {
            for k in 0..shape[2] {
                v.extend(((i * 100 + j * 10 + k) as u16).to_ne_bytes());
            }
        }
    }
    v
}

/// Prepared and one-shot gathers agree, in every mode, on a
/// C-contiguous array and on a transposed view of another one.
#[test]
fn matches_one_shot_on_any_strides() {
    let shape = [4usize, 3, 5];
    let bytes = data3(shape);
    let c_strides = [30isize, 10, 2];
    // The same values, stored with axes in reverse (Fortran order).
    let mut f = vec![0u8; bytes.len()];
    for i in 0..4 {
        for j in 0..3 {
            for k in 0..5 {
                let src = (i * 15 + j * 5 + k) * 2;
                let dst = (k * 12 + j * 4 + i) * 2;
                f[dst..dst + 2].copy_from_slice(&bytes[src..src + 2]);
            }
        }
    }
    let f_strides = [2isize, 8, 24];
    let ids = i64_bytes(&[1, -1, 3, 0, 7, -9, 2, 0]);
    let ishape = [4usize, 2];
    let istrides = [16isize, 8];
    let cases: [(Operator, &[usize], &[isize]); 3] = [
        (Operator::GatherNd { batch_dims: 0 }, &ishape, &istrides),
        (
            Operator::Gather {
                axis: 1,
                batch_dims: 0,
            },
            &ishape,
            &istrides,
        ),
        (
            Operator::Gather {
                axis: -1,
                batch_dims: 1,
            },
            &ishape,
            &istrides,
        ),
    ];
    for (op, is, ist) in cases {
        for mode in [Mode::Raise, Mode::Zero, Mode::Clip] {
            let indices = view(&ids, is, ist, 8);
            let prepared = Prepared::new(op, &shape, indices, IndexType::I64, mode, 2);
            for (data_bytes, strides) in [(&bytes, &c_strides), (&f, &f_strides)] {
                let data = view(data_bytes, &shape, strides, 2);
                let oneshot = match op {
                    Operator::GatherNd { batch_dims } => {
                        plan_gather_nd(data, indices, IndexType::I64, batch_dims)
                    }
                    Operator::Gather { axis, batch_dims } => {
                        plan_gather(data, indices, IndexType::I64, axis, batch_dims)
                    }
                };
                let oneshot = oneshot.and_then(|p| {
                    let mut out = vec![0u8; p.out_bytes()];
                    p.execute(mode, &mut out, Validation::BeforeWriting, 1)
                        .map(|()| out)
                });
                let got = prepared.as_ref().map_err(Clone::clone).and_then(|p| {
                    let call = p.bind(data)?;
                    let mut out = vec![0xAAu8; call.out_bytes()];
                    call.execute(&mut out, 2).map(|()| out)
                });
                assert_eq!(got, oneshot, "{op:?} {mode:?} strides {strides:?}");
            }
        }
    }
}

/// Points from a large array take the address-order path: positions
/// sorted, rows a permutation; the result is still the one-shot one, in
/// every mode, on a C-ordered array and on its transpose's view.
#[test]
fn address_order_gathers_equal_one_shot() {
    // An array of 1 MiB takes the address order only when told to.
    super::order::SORT_ANY_SIZE.store(true, std::sync::atomic::Ordering::Relaxed);
    let shape = [1024usize, 1024];
    let bytes: Vec<u8> = (0..1024 * 1024).map(|v: u32| (v * 7 % 253) as u8).collect();
    let mut t = vec![0u8; bytes.len()];
    for i in 0..1024 {
        for j in 0..1024 {
            t[j * 1024 + i] = bytes[i * 1024 + j];
        }
    }
    let mut state = 12345u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % 2400) as i64 - 1200
    };
    // Below and above the size from which the sort runs in parallel.
    for n in [40_000, SORT_PARALLEL_MIN_ROWS + 1000] {
        let ids: Vec<i64> = (0..2 * n).map(|_| next()).collect();
        let ids = i64_bytes(&ids);
        let ishape = [n, 2];
        let indices = view(&ids, &ishape, &[16, 8], 8);
        let op = Operator::GatherNd { batch_dims: 0 };
        for mode in [Mode::Zero, Mode::Clip] {
            let p = Prepared::new(op, &shape, indices, IndexType::I64, mode, 2).unwrap();
            let order = p.order.as_ref().expect("address order");
            let Positions::U32(sorted) = &p.positions else {
                panic!("32-bit positions")
            };
            let key = |&w: &u32| {
                if w.is_mark() {
                    u64::MAX
                } else {
                    w as u64 >> SORT_IGNORED_BITS
                }
            };
            assert!(sorted.windows(2).all(|w| key(&w[0]) <= key(&w[1])));
            assert!(is_permutation(order, n));
            for (data, strides) in [(&bytes, [1024isize, 1]), (&t, [1, 1024])] {
                let d = view(data, &shape, &strides, 1);
                let mut want = vec![0u8; n];
                plan_gather_nd(d, indices, IndexType::I64, 0)
                    .unwrap()
                    .execute(mode, &mut want, Validation::WhileCopying, 2)
                    .unwrap();
                for threads in [1, 2] {
                    let mut got = vec![0xAAu8; n];
                    p.bind(d).unwrap().execute(&mut got, threads).unwrap();
                    assert!(
                        got == want,
                        "{mode:?} strides {strides:?}, {threads} threads"
                    );
                }
                // A conversion on the way goes through the scatter buffer too.
                let cast = crate::convert::Cast::new(Scalar::U8, false, Scalar::U16, false);
                let cast = cast.unwrap();
                let mut want = vec![0u8; 2 * n];
                let plan = plan_gather_nd(d, indices, IndexType::I64, 0).unwrap();
                let plan = plan.with_cast(cast).unwrap();
                plan.execute(mode, &mut want, Validation::WhileCopying, 2)
                    .unwrap();
                let mut got = vec![0xAAu8; 2 * n];
                let call = p.bind(d).unwrap().with_cast(cast).unwrap();
                call.execute(&mut got, 2).unwrap();
                assert!(got == want, "{mode:?} strides {strides:?}, cast");
            }
        }
    }
}

#[test]
fn positions_are_32_bits_when_they_fit() {
    let ids = i64_bytes(&[0, 1]);
    let indices = view(&ids, &[2], &[8], 8);
    let op = Operator::Gather {
        axis: 0,
        batch_dims: 0,
    };
    let small = Prepared::new(op, &[3, 1 << 40], indices, IndexType::I64, Mode::Raise, 1);
    assert!(matches!(small.unwrap().positions, Positions::U32(_)));
    let wide = Prepared::new(op, &[1 << 33, 2], indices, IndexType::I64, Mode::Raise, 1);
    assert!(matches!(wide.unwrap().positions, Positions::U64(_)));
}

/// A gather with an empty result from a shape of more than `u32::MAX`
/// leading elements has no positions; its parts make it again.
#[test]
fn an_empty_gather_from_a_huge_shape_round_trips() {
    let ids = i64_bytes(&[0, 1]);
    let indices = view(&ids, &[2], &[8], 8);
    let op = Operator::Gather {
        axis: 0,
        batch_dims: 0,
    };
    let p = Prepared::new(op, &[1 << 33, 0], indices, IndexType::I64, Mode::Raise, 1).unwrap();
    let (op, shape, ishape, ty, mode, positions, order) = p.parts();
    let order = order.map(<[u32]>::to_vec);
    let back = Prepared::from_parts(op, shape, ishape, ty, mode, positions.clone(), order);
    assert_eq!(back, Ok(p));
}

#[test]
fn shape_mismatch_and_forged_parts_are_refused() {
    let ids = i64_bytes(&[2, -1]);
    let indices = view(&ids, &[2], &[8], 8);
    let op = Operator::Gather {
        axis: 0,
        batch_dims: 0,
    };
    let p = Prepared::new(op, &[3, 2], indices, IndexType::I64, Mode::Raise, 1).unwrap();
    assert_eq!(p.positions, Positions::U32(vec![2, 2]));
    let bytes = [0u8; 12];
    let err = p.bind(view(&bytes, &[2, 3], &[6, 2], 2)).err().unwrap();
    assert_eq!(
        err,
        GatherError::InvalidArgument(
            "data has shape (2, 3) but the gather was prepared for data of shape (3, 2)".into()
        )
    );
    let (op, shape, ishape, ty, mode, positions, order) = p.parts();
    assert!(order.is_none());
    let back = Prepared::from_parts(op, shape, ishape, ty, mode, positions.clone(), None).unwrap();
    assert_eq!(back, p);
    for forged in [
        Positions::U32(vec![2, 3]),
        Positions::U32(vec![2]),
        Positions::U32(vec![2, u32::MAX]),
        Positions::U64(vec![2, 2]),
    ] {
        assert!(Prepared::from_parts(op, shape, ishape, ty, mode, forged, None).is_err());
    }
    // The zero-fill marker belongs to mode "zero" only.
    let zero = Positions::U32(vec![u32::MAX, 1]);
    assert!(Prepared::from_parts(op, shape, ishape, ty, Mode::Zero, zero.clone(), None).is_ok());
    // An order must be a permutation of the rows.
    for (order, ok) in [
        (vec![1, 0], true),
        (vec![0, 0], false),
        (vec![0, 2], false),
        (vec![0], false),
    ] {
        let got =
            Prepared::from_parts(op, shape, ishape, ty, Mode::Zero, zero.clone(), Some(order));
        assert_eq!(got.is_ok(), ok);
    }
}

#[test]
fn errors_are_the_one_shot_errors() {
    let ids = i64_bytes(&[0, 5, 1, -7]);
    let indices = view(&ids, &[2, 2], &[16, 8], 8);
    let data = vec![0u8; 6];
    let d = view(&data, &[2, 3], &[3, 1], 1);
    let want = plan_gather_nd(d, indices, IndexType::I64, 0)
        .unwrap()
        .execute(Mode::Raise, &mut [0u8; 2], Validation::WhileCopying, 1)
        .unwrap_err();
    let op = Operator::GatherNd { batch_dims: 0 };
    let got = Prepared::new(op, &[2, 3], indices, IndexType::I64, Mode::Raise, 1);
    assert_eq!(got.unwrap_err(), want);
    let bad = Operator::GatherNd { batch_dims: 2 };
    let want = plan_gather_nd(d, indices, IndexType::I64, 2).unwrap_err();
    let got = Prepared::new(bad, &[2, 3], indices, IndexType::I64, Mode::Raise, 1);
    assert_eq!(got.unwrap_err(), want);
}
