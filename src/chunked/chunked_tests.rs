//! The chunked gather against the one-shot gather on the whole array:
//! random shapes, chunk grids, layouts, index types, modes and batch axes.

use super::*;
use crate::mode::Mode;
use crate::test_support::Rng;
use crate::{plan_gather, plan_gather_nd, Validation};

/// Random chunk sizes summing to `n` (zero-size chunks included).
fn split(rng: &mut Rng, n: usize) -> Vec<usize> {
    let mut out = vec![];
    let mut left = n;
    while left > 0 {
        let s = 1 + rng.below(left);
        out.push(s);
        if rng.below(8) == 0 {
            out.push(0);
        }
        left -= s;
    }
    if out.is_empty() {
        out.push(0);
    }
    out
}

struct Case {
    shape: Vec<usize>,
    strides: Vec<isize>,
    data: Vec<u8>,
    idx_shape: Vec<usize>,
    idx: Vec<u8>,
    op: Operator,
}

const ITEM: usize = 3; // an odd itemsize: no alignment is assumed

fn case(rng: &mut Rng, nd: bool, mode: Mode) -> Case {
    let r = 1 + rng.below(4);
    let shape: Vec<usize> = (0..r)
        .map(|_| rng.below(6) + (rng.below(10) > 0) as usize)
        .collect();
    let n: usize = shape.iter().product();
    // C or Fortran order.
    let mut strides = vec![0isize; r];
    let mut acc = ITEM as isize;
    let order: Vec<usize> = if rng.below(2) == 0 {
        (0..r).rev().collect()
    } else {
        (0..r).collect()
    };
    for &a in &order {
        strides[a] = acc;
        acc *= shape[a].max(1) as isize;
    }
    let data: Vec<u8> = (0..n * ITEM).map(|_| rng.next() as u8).collect();
    let b = rng.below(r.min(2));
    let (tuple_axes, op, mut idx_shape): (Vec<usize>, Operator, Vec<usize>) = if nd {
        let k = 1 + rng.below(r - b);
        (
            (b..b + k).collect(),
            Operator::GatherNd {
                batch_dims: b as i64,
            },
            shape[..b].to_vec(),
        )
    } else {
        let a = b + rng.below(r - b);
        (
            vec![a],
            Operator::Gather {
                axis: a as i64,
                batch_dims: b as i64,
            },
            shape[..b].to_vec(),
        )
    };
    for _ in 0..rng.below(3) {
        idx_shape.push(rng.below(5));
    }
    let k = tuple_axes.len();
    if nd {
        idx_shape.push(k);
    }
    let count: usize = idx_shape.iter().product();
    let mut idx = vec![];
    for i in 0..count {
        let s = shape[tuple_axes[i % k]] as i64;
        let v = match mode {
            Mode::Raise if rng.below(50) > 0 => rng.below(2 * s.max(1) as usize) as i64 - s,
            _ => rng.below(2 * s as usize + 7) as i64 - s - 3,
        };
        idx.extend_from_slice(&v.to_ne_bytes());
    }
    Case {
        shape,
        strides,
        data,
        idx_shape,
        idx,
        op,
    }
}

fn c_strides(shape: &[usize], item: usize) -> Vec<isize> {
    let mut s = vec![0isize; shape.len()];
    let mut acc = item as isize;
    for a in (0..shape.len()).rev() {
        s[a] = acc;
        acc *= shape[a].max(1) as isize;
    }
    s
}

fn one_shot(c: &Case, mode: Mode) -> Result<Vec<u8>> {
    let data = ArrayView {
        bytes: &c.data,
        offset: 0,
        shape: &c.shape,
        strides: &c.strides,
        itemsize: ITEM,
    };
    let is = c_strides(&c.idx_shape, 8);
    let idx = ArrayView {
        bytes: &c.idx,
        offset: 0,
        shape: &c.idx_shape,
        strides: &is,
        itemsize: 8,
    };
    let plan = match c.op {
        Operator::GatherNd { batch_dims } => plan_gather_nd(data, idx, IndexType::I64, batch_dims)?,
        Operator::Gather { axis, batch_dims } => {
            plan_gather(data, idx, IndexType::I64, axis, batch_dims)?
        }
    };
    let mut out = vec![0u8; plan.out_bytes()];
    plan.execute(mode, &mut out, Validation::WhileCopying, 1)?;
    Ok(out)
}

/// Every chunk of a grid over `c`'s data (the slice axes whole), as views
/// into the whole array's bytes, with their coordinates.
fn grid_of(rng: &mut Rng, c: &Case, slice_start: usize) -> Vec<Vec<usize>> {
    c.shape
        .iter()
        .enumerate()
        .map(|(a, &n)| {
            if a >= slice_start {
                vec![n]
            } else {
                split(rng, n)
            }
        })
        .collect()
}

fn chunks_of<'a>(
    c: &'a Case,
    sizes: &[Vec<usize>],
    shapes: &'a mut Vec<Vec<usize>>,
) -> Vec<(Vec<usize>, usize)> {
    // All coordinates in C order, with their offsets; shapes kept aside.
    let mut out = vec![];
    let counts: Vec<usize> = sizes.iter().map(|s| s.len()).collect();
    let total: usize = counts.iter().product();
    for flat in 0..total {
        let mut coords = vec![0; counts.len()];
        let mut rest = flat;
        for a in (0..counts.len()).rev() {
            coords[a] = rest % counts[a];
            rest /= counts[a];
        }
        let start: Vec<usize> = coords
            .iter()
            .zip(sizes)
            .map(|(&i, s)| s[..i].iter().sum())
            .collect();
        let shape: Vec<usize> = coords.iter().zip(sizes).map(|(&i, s)| s[i]).collect();
        let empty = shape.contains(&0);
        let off: isize = start
            .iter()
            .zip(&c.strides)
            .map(|(&s, &t)| s as isize * t)
            .sum();
        shapes.push(shape);
        out.push((coords, if empty { 0 } else { off as usize }));
    }
    out
}

fn run(
    c: &Case,
    sizes: &[Vec<usize>],
    keep: &dyn Fn(&[usize]) -> bool,
    mode: Mode,
    threads: usize,
) -> Result<Vec<u8>> {
    let mut shapes = vec![];
    let placed = chunks_of(c, sizes, &mut shapes);
    let chunks: Vec<(Vec<usize>, ArrayView<'_>)> = placed
        .into_iter()
        .zip(&shapes)
        .filter(|((coords, _), _)| keep(coords))
        .map(|((coords, off), shape)| {
            let v = ArrayView {
                bytes: &c.data,
                offset: off,
                shape,
                strides: &c.strides,
                itemsize: ITEM,
            };
            (coords, v)
        })
        .collect();
    let grid = ChunkGrid {
        chunk_sizes: sizes.to_vec(),
        chunks,
        itemsize: ITEM,
    };
    let is = c_strides(&c.idx_shape, 8);
    let idx = ArrayView {
        bytes: &c.idx,
        offset: 0,
        shape: &c.idx_shape,
        strides: &is,
        itemsize: 8,
    };
    let layout = chunked_layout(&c.shape, ITEM, &c.idx_shape, IndexType::I64, c.op)?;
    let mut out = vec![0u8; layout.out_bytes];
    gather_chunks(
        &grid,
        idx,
        IndexType::I64,
        c.op,
        mode,
        None,
        None,
        &mut out,
        threads,
    )?;
    Ok(out)
}

fn slice_start(c: &Case) -> Option<usize> {
    let layout = chunked_layout(&c.shape, ITEM, &c.idx_shape, IndexType::I64, c.op).ok()?;
    Some(layout.indexed[layout.indexed.len() - 1] + 1)
}

#[test]
fn chunked_equals_one_shot_on_the_whole() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut compared = 0;
    for round in 0..3000 {
        let mode = [Mode::Raise, Mode::Zero, Mode::Clip][round % 3];
        let c = case(&mut rng, round % 2 == 0, mode);
        let Some(ss) = slice_start(&c) else { continue };
        let sizes = grid_of(&mut rng, &c, ss);
        let threads = 1 + rng.below(3);
        let want = one_shot(&c, mode);
        let got = run(&c, &sizes, &|_| true, mode, threads);
        assert_eq!(got, want, "round {round}");
        compared += want.is_ok() as usize;
        // Only the chunks some index reads: the same result.
        let is = c_strides(&c.idx_shape, 8);
        let idx = ArrayView {
            bytes: &c.idx,
            offset: 0,
            shape: &c.idx_shape,
            strides: &is,
            itemsize: 8,
        };
        let Ok(touched) = touched_chunks(&sizes, idx, IndexType::I64, c.op, mode, None, threads)
        else {
            assert!(want.is_err());
            continue;
        };
        // Scanned in parts on several threads: the same set as on one.
        let alone = touched_chunks(&sizes, idx, IndexType::I64, c.op, mode, None, 1);
        assert_eq!(alone.as_ref(), Ok(&touched), "round {round}");
        let layout = chunked_layout(&c.shape, ITEM, &c.idx_shape, IndexType::I64, c.op).unwrap();
        let dims: Vec<usize> = (0..layout.batch_dims)
            .chain(layout.indexed.iter().copied())
            .collect();
        let keep = |coords: &[usize]| {
            touched
                .iter()
                .any(|t| t.iter().zip(&dims).all(|(&v, &d)| coords[d] == v))
        };
        assert_eq!(
            run(&c, &sizes, &keep, mode, threads),
            want,
            "round {round} (touched only)"
        );
        // And no more than those: without any one of them, the gather
        // reads a chunk it was not given.
        if want.as_ref().is_ok_and(|o| !o.is_empty()) {
            for left_out in &touched {
                let keep_but = |coords: &[usize]| {
                    keep(coords) && !left_out.iter().zip(&dims).all(|(&v, &d)| coords[d] == v)
                };
                assert!(
                    matches!(
                        run(&c, &sizes, &keep_but, mode, threads),
                        Err(GatherError::InvalidArgument(_))
                    ),
                    "round {round}: chunk {left_out:?} is touched but not read"
                );
            }
        }
    }
    assert!(compared > 1000, "{compared}");
}

fn rows_case() -> Case {
    // data (10, 2) u24 values, indices [3, 7, -1].
    let shape = vec![10, 2];
    let data: Vec<u8> = (0..60).map(|v| v as u8).collect();
    let idx: Vec<u8> = [3i64, 7, -1].iter().flat_map(|v| v.to_ne_bytes()).collect();
    Case {
        strides: c_strides(&shape, ITEM),
        shape,
        data,
        idx_shape: vec![3],
        idx,
        op: Operator::Gather {
            axis: 0,
            batch_dims: 0,
        },
    }
}

#[test]
fn a_missing_chunk_is_an_error_and_untouched_ones_are_not_needed() {
    let c = rows_case();
    let sizes = vec![vec![4, 4, 2], vec![2]];
    // Rows 3, 7 and 9 read chunks 0, 1 and 2.
    let want = one_shot(&c, Mode::Raise);
    assert_eq!(run(&c, &sizes, &|_| true, Mode::Raise, 1), want);
    let sizes5 = vec![vec![2, 2, 2, 2, 2], vec![2]];
    let keep = |co: &[usize]| [1, 3, 4].contains(&co[0]);
    assert_eq!(run(&c, &sizes5, &keep, Mode::Raise, 1), want);
    let without = |co: &[usize]| co[0] == 1 || co[0] == 4;
    match run(&c, &sizes5, &without, Mode::Raise, 1) {
        Err(GatherError::InvalidArgument(m)) => assert!(m.contains("chunk (3, 0)"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn slice_axes_must_be_one_chunk() {
    let c = rows_case();
    let sizes = vec![vec![10], vec![1, 1]];
    match run(&c, &sizes, &|_| true, Mode::Raise, 1) {
        Err(GatherError::InvalidArgument(m)) => assert!(m.contains("axis 1"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn errors_move_to_the_whole() {
    let mut c = rows_case();
    c.idx[8..16].copy_from_slice(&10i64.to_ne_bytes());
    let is = [8isize];
    let idx = ArrayView {
        bytes: &c.idx,
        offset: 0,
        shape: &c.idx_shape,
        strides: &is,
        itemsize: 8,
    };
    let whole = Whole {
        data_shape: vec![10, 6],
        index_offset: vec![100],
    };
    let sizes = vec![vec![5, 5], vec![2]];
    let op = c.op;
    match touched_chunks(
        &sizes,
        idx,
        IndexType::I64,
        op,
        Mode::Raise,
        Some(&whole),
        1,
    ) {
        Err(GatherError::IndexOutOfRange(e)) => {
            assert_eq!(
                (e.value, e.position.clone(), e.data_shape.clone()),
                (10, vec![101], vec![10, 6])
            );
            assert_eq!(e.axis_size, 10);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        touched_chunks(&sizes, idx, IndexType::I64, op, Mode::Zero, None, 1),
        Ok(vec![vec![0], vec![1]])
    );
}

/// Any itemsize the Rust API takes is only counted, never allocated (the
/// stand-in of the whole array once held one element of that many bytes,
/// and the views fuzz target found the allocation of a terabyte aborting),
/// and the sizes past NumPy's bound are the one-shot planner's `Overflow`.
#[test]
fn huge_itemsizes_are_counted_not_allocated() {
    let op = Operator::GatherNd { batch_dims: 0 };
    let t = 1usize << 40;
    let layout = chunked_layout(&[4, 2], t, &[3, 1], IndexType::I64, op).unwrap();
    assert_eq!((layout.out_shape, layout.out_bytes), (vec![3, 2], 6 * t));
    assert!(matches!(
        chunked_layout(&[1 << 30, 2], t, &[3, 1], IndexType::I64, op),
        Err(GatherError::Overflow(_))
    ));
    // The data fits, the result does not.
    assert!(matches!(
        chunked_layout(&[2, 1 << 20], t, &[1 << 10, 1], IndexType::I64, op),
        Err(GatherError::Overflow(_))
    ));
}
