//! Every executed call replayed as a chunked gather (`ndgather.dask`'s
//! core): `data` cut into a grid of chunks (views of its own bytes, so of
//! its strides), the chunks the indices touch found by `touched_chunks`,
//! and the gather made from those chunks alone by `gather_chunks`. Both
//! must give the one-shot call's bytes, or name its first bad index.
//!
//! The grid comes from a generator seeded by the call's shapes and first
//! bytes: the same input always makes the same grid. Axes that may be cut
//! (batch, indexed and gather's outer axes) are cut into up to 5 chunks of
//! any sizes, zero included; the gathered slice's axes stay whole.

use ndgather::chunked::{chunked_layout, gather_chunks, touched_chunks, ChunkGrid};
use ndgather::{ArrayView, GatherError, Operator};

use crate::reference::{Expected, Op, Widening, UNTOUCHED};
use crate::{Call, SplitMix64};

/// Replays `call` (executed, with `expected` its reference's answer) as a
/// chunked gather; panics on any disagreement.
pub(crate) fn check_chunked(call: &Call, op: Op, expected: &Expected) {
    if call.reject_negative || call.out_len_delta != 0 {
        return; // options of the one-shot call only
    }
    let op = match op {
        Op::GatherNd { batch_dims } => Operator::GatherNd { batch_dims },
        Op::Gather { axis, batch_dims } => Operator::Gather { axis, batch_dims },
    };
    let (dv, iv) = (call.data.view(), call.indices.view());
    let layout = chunked_layout(dv.shape, dv.itemsize, iv.shape, call.index_type, op)
        .expect("the call planned, so its shapes are valid");
    // The first axis of the gathered slice: after the tuple's axes.
    let slice_start = match op {
        Operator::GatherNd { .. } => layout.batch_dims + layout.indexed.len(),
        Operator::Gather { .. } => layout.indexed[0] + 1,
    };
    let mut rng = SplitMix64(seed(call));
    let sizes: Vec<Vec<usize>> = dv
        .shape
        .iter()
        .enumerate()
        .map(|(a, &n)| {
            if a < slice_start {
                cut(&mut rng, n)
            } else {
                vec![n]
            }
        })
        .collect();
    let touched = touched_chunks(
        &sizes,
        iv,
        call.index_type,
        op,
        call.mode,
        None,
        call.threads,
    );
    let touched = match (expected, touched) {
        (Expected::Bytes(_), Ok(t)) => t,
        (Expected::Bad(want), Err(GatherError::IndexOutOfRange(got))) => {
            assert_eq!(*got, *want, "chunked scan: the error names another index");
            vec![]
        }
        (_, got) => panic!("chunked scan: the one-shot call and the scan disagree: {got:?}"),
    };
    // The chunks given: those whose batch and indexed coordinates were
    // reported (all of them when the scan failed: the gather must then fail
    // the same way), at every position of gather's outer axes.
    let dims: Vec<usize> = (0..layout.batch_dims)
        .chain(layout.indexed.iter().copied())
        .collect();
    let mut places: Vec<(Vec<usize>, Vec<usize>, usize)> = vec![]; // coords, shape, offset
    for_each_chunk(&sizes, |coords| {
        let keep = matches!(expected, Expected::Bad(_))
            || touched
                .iter()
                .any(|t| t.iter().zip(&dims).all(|(&v, &d)| coords[d] == v));
        if keep {
            let shape: Vec<usize> = coords
                .iter()
                .enumerate()
                .map(|(a, &c)| sizes[a][c])
                .collect();
            // Element [0, ...] of the chunk, which exists in a chunk with
            // elements (so the sum stays inside the buffer); an empty chunk
            // keeps the array's own offset (its strides may be absurd).
            let mut start_off = call.data.offset as isize;
            if !shape.contains(&0) {
                for (a, &c) in coords.iter().enumerate() {
                    let start: usize = sizes[a][..c].iter().sum();
                    start_off += start as isize * dv.strides[a];
                }
            }
            places.push((coords.to_vec(), shape, start_off as usize));
        }
    });
    let chunks = places
        .iter()
        .map(|(coords, shape, offset)| {
            (
                coords.clone(),
                ArrayView {
                    bytes: &call.data.bytes,
                    offset: *offset,
                    shape,
                    strides: dv.strides,
                    itemsize: dv.itemsize,
                },
            )
        })
        .collect();
    let grid = ChunkGrid {
        chunk_sizes: sizes,
        chunks,
        itemsize: dv.itemsize,
    };
    // The chunked gather into a fresh output of `len` bytes, converting by `cast`.
    let gather = |cast, len| {
        let mut out = vec![UNTOUCHED; len];
        let got = gather_chunks(
            &grid,
            iv,
            call.index_type,
            op,
            call.mode,
            None,
            cast,
            &mut out,
            call.threads,
        );
        (out, got)
    };
    let (out, got) = gather(None, layout.out_bytes);
    match (expected, got) {
        (Expected::Bytes(want), Ok(())) => {
            assert!(
                out == *want,
                "chunked: wrong bytes (grid {:?})",
                grid.chunk_sizes
            );
            // And converting (`dtype=`), through the general chunked walk.
            if let Some(widening) = Widening::of(call) {
                let want = widening.convert(want, dv.itemsize);
                let (out, got) = gather(Some(widening.cast), want.len());
                if !matches!(got, Err(GatherError::Overflow(_))) {
                    got.expect("the chunked cast of a valid call");
                    assert!(out == want, "chunked cast {:?}: wrong bytes", widening.cast);
                }
            }
        }
        (Expected::Bad(want), Err(GatherError::IndexOutOfRange(got))) => {
            assert_eq!(*got, *want, "chunked: the error names another index");
        }
        (_, got) => panic!(
            "chunked: the one-shot call and the chunked gather disagree (grid {:?}): {got:?}",
            grid.chunk_sizes
        ),
    }
}

/// A seed from the call's geometry and first bytes.
fn seed(call: &Call) -> u64 {
    let mut h = 0x243F_6A88_85A3_08D3u64;
    let mut mix = |v: u64| h = (h ^ v).wrapping_mul(0x100_0000_01B3).rotate_left(17);
    for &n in call.data.shape.iter().chain(&call.indices.shape) {
        mix(n as u64);
    }
    for &b in call.indices.bytes.iter().chain(&call.data.bytes).take(64) {
        mix(u64::from(b));
    }
    mix(call.threads as u64);
    h
}

/// `n` cut into 1 to 5 chunks of random sizes (zero-size ones too; one
/// chunk of size 0 for an empty axis).
fn cut(rng: &mut SplitMix64, n: usize) -> Vec<usize> {
    let parts = 1 + (rng.next() % 5) as usize;
    let mut cuts: Vec<usize> = (1..parts)
        .map(|_| (rng.next() % (n as u64 + 1)) as usize)
        .collect();
    cuts.sort_unstable();
    let mut sizes = Vec::with_capacity(parts);
    let mut last = 0;
    for c in cuts.into_iter().chain([n]) {
        sizes.push(c - last);
        last = c;
    }
    sizes
}

/// Calls `f` with the grid coordinates of every chunk, in C order.
fn for_each_chunk(sizes: &[Vec<usize>], mut f: impl FnMut(&[usize])) {
    let counts: Vec<usize> = sizes.iter().map(Vec::len).collect();
    if counts.is_empty() {
        f(&[]);
        return;
    }
    crate::for_each_coord(&counts, |c| {
        f(c);
        true
    });
}
