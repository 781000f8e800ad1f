//! Tests of `rows.rs`.

use super::*;

/// Rows `ids[k]` of `table` (rows of `row_bytes` bytes, one after the
/// other) by the row path, as the bindings call it for a 2-d table.
fn take_rows_in<I: RowId>(
    table: &[u8],
    row_bytes: usize,
    ids: &[I],
    out: &mut [u8],
    cast: Option<Cast>,
    run: impl FnOnce(&mut (dyn FnMut() + Send)),
) -> Result<(), Declined> {
    if row_bytes == 0 || !table.len().is_multiple_of(row_bytes) {
        return Err(Declined);
    }
    let table = RowTable {
        bytes: table,
        batches: 1,
        dims: &[table.len() / row_bytes],
        row_bytes,
    };
    take_tuples_in(table, ids, out, cast, false, run)
}

fn take_rows_as<I: RowId>(
    table: &[u8],
    row_bytes: usize,
    ids: &[I],
    out: &mut [u8],
    cast: Cast,
) -> Result<(), Declined> {
    take_rows_in(table, row_bytes, ids, out, Some(cast), |copy| copy())
}

fn take_rows<I: RowId>(
    table: &[u8],
    row_bytes: usize,
    ids: &[I],
    out: &mut [u8],
) -> Result<(), Declined> {
    take_rows_in(table, row_bytes, ids, out, None, |copy| copy())
}

fn table(rows: usize, row_bytes: usize) -> Vec<u8> {
    (0..rows * row_bytes)
        .map(|b| (b * 7 + b / 251) as u8)
        .collect()
}

fn naive(table: &[u8], row_bytes: usize, ids: &[i64]) -> Vec<u8> {
    let rows = (table.len() / row_bytes) as i64;
    ids.iter()
        .flat_map(|&id| {
            let r = (if id < 0 { id + rows } else { id }) as usize;
            table[r * row_bytes..(r + 1) * row_bytes].to_vec()
        })
        .collect()
}

#[test]
fn copies_the_rows_named_negatives_from_the_end() {
    // Every width `take_rows` compiles for (4 to 512) and some it does
    // not, from tables that start on a line and 1 to 63 bytes past one.
    let widths = [
        1, 3, 4, 8, 16, 32, 60, 64, 65, 100, 128, 140, 255, 256, 384, 511, 512, 513, 1000, 4096,
    ];
    for (k, row_bytes) in widths.into_iter().enumerate() {
        let mut raw = vec![0u8; 38 * row_bytes + 128];
        let shift = raw.as_ptr().align_offset(64) + [0, 1, 17, 63][k % 4];
        let t = &mut raw[shift..shift + 37 * row_bytes];
        t.copy_from_slice(&table(37, row_bytes));
        let t = &*t;
        let ids: Vec<i64> = vec![0, 36, -1, -37, 5, 5, 20];
        let mut out = vec![0xAA; ids.len() * row_bytes];
        assert_eq!(take_rows(t, row_bytes, &ids, &mut out), Ok(()));
        assert_eq!(out, naive(t, row_bytes, &ids));
        let ids32: Vec<i32> = ids.iter().map(|&i| i as i32).collect();
        let mut out32 = vec![0x55; out.len()];
        assert_eq!(take_rows(t, row_bytes, &ids32, &mut out32), Ok(()));
        assert_eq!(out32, out);
    }
}

#[test]
fn rows_convert_on_their_way() {
    let t: Vec<u8> = (0..40i8).flat_map(|v| v.to_ne_bytes()).collect(); // 10 rows of 4 int8
    let cast = Cast::new(crate::Scalar::I8, false, crate::Scalar::I32, false).unwrap();
    let mut out = vec![0u8; 2 * 4 * 4];
    assert_eq!(take_rows_as(&t, 4, &[9i64, -10], &mut out, cast), Ok(()));
    let got: Vec<i32> = out
        .chunks(4)
        .map(|b| i32::from_ne_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, [36, 37, 38, 39, 0, 1, 2, 3]);
    assert_eq!(
        take_rows_as(&t, 4, &[10i64], &mut out[..16], cast),
        Err(Declined)
    );
}

#[test]
fn an_id_out_of_range_anywhere_leaves_out_untouched() {
    let t = table(10, 8);
    for bad in [10, -11, i64::MAX, i64::MIN] {
        for at in [0, 3, MAX_ROW_IDS - 1] {
            let mut ids = vec![1i64; MAX_ROW_IDS];
            ids[at] = bad;
            let mut out = vec![0xAA; ids.len() * 8];
            assert_eq!(take_rows(&t, 8, &ids, &mut out), Err(Declined));
            assert!(out.iter().all(|&b| b == 0xAA));
        }
    }
    let ids = [i32::MIN, 0];
    let mut out = vec![0xAA; 16];
    assert_eq!(take_rows(&t, 8, &ids, &mut out), Err(Declined));
}

#[test]
fn reads_at_most_max_row_bytes_of_rows() {
    // 512-byte rows: 256 of them are the bound; 257 are declined, out
    // untouched and the copy never handed to `run`.
    let t = table(300, 512);
    let fits: Vec<i64> = (0..(MAX_ROW_BYTES / 512) as i64)
        .map(|i| (i * 7) % 300)
        .collect();
    let mut out = vec![0xAA; fits.len() * 512];
    let mut runs = 0;
    let got = take_rows_in(&t, 512, &fits, &mut out, None, |copy| {
        runs += 1;
        copy();
    });
    assert_eq!((got, runs), (Ok(()), 1));
    assert_eq!(out, naive(&t, 512, &fits));
    let over: Vec<i64> = (0..fits.len() as i64 + 1).collect();
    let mut out = vec![0xAA; over.len() * 512];
    let got = take_rows_in(&t, 512, &over, &mut out, None, |_| runs += 1);
    assert_eq!((got, runs), (Err(Declined), 1));
    assert!(out.iter().all(|&b| b == 0xAA));
    // A bad id: declined before `run`, whatever the count.
    let mut out = vec![0xAA; 2 * 512];
    let got = take_rows_in(&t, 512, &[1i64, 300], &mut out, None, |_| runs += 1);
    assert_eq!((got, runs), (Err(Declined), 1));
}

#[test]
fn tuples_name_the_slices_past_their_axes() {
    // A (5, 4, 3) table of 8-byte elements: pairs name 24-byte rows of
    // its (20, 24 bytes) view, triples single elements.
    let t = table(60, 8);
    for (dims, row_bytes) in [(&[5usize, 4][..], 24), (&[5, 4, 3][..], 8)] {
        let k = dims.len();
        let tuples: Vec<Vec<i64>> = vec![vec![0; k], vec![-1; k], vec![4, -4, 2], vec![2, 3, -3]];
        let ids: Vec<i64> = tuples.iter().flat_map(|t| t[..k].to_vec()).collect();
        let flat: Vec<i64> = tuples
            .iter()
            .map(|t| {
                let mut row = 0;
                for (&i, &n) in t.iter().zip(dims) {
                    row = row * n as i64 + if i < 0 { i + n as i64 } else { i };
                }
                row
            })
            .collect();
        let mut out = vec![0xAA; tuples.len() * row_bytes];
        let table = RowTable {
            bytes: &t,
            batches: 1,
            dims,
            row_bytes,
        };
        let got = take_tuples_in(table, &ids, &mut out, None, false, |c| c());
        assert_eq!(got, Ok(()));
        assert_eq!(out, naive(&t, row_bytes, &flat));
    }
}

#[test]
fn each_batch_takes_its_tuples_from_its_own_block() {
    // A (3, 4, 5) table of 8-byte elements, batch_dims=1: 3 blocks of
    // (4, 5); two pairs a batch name elements, one index a batch rows
    // of 40 bytes.
    let t = table(60, 8);
    let pairs: [i64; 12] = [0, 0, 3, 4, -1, -1, 2, 1, 1, -5, -4, 0];
    let want: Vec<i64> = vec![0, 19, 20 + 19, 20 + 11, 40 + 5, 40];
    let mut out = vec![0xAA; 6 * 8];
    let blocks = RowTable {
        bytes: &t,
        batches: 3,
        dims: &[4, 5],
        row_bytes: 8,
    };
    assert_eq!(
        take_tuples_in(blocks, &pairs, &mut out, None, false, |c| c()),
        Ok(())
    );
    assert_eq!(out, naive(&t, 8, &want));
    let rows = RowTable {
        dims: &[4],
        row_bytes: 40,
        ..blocks
    };
    let mut out = vec![0xAA; 3 * 40];
    let got = take_tuples_in(rows, &[3i64, -4, 1], &mut out, None, false, |c| c());
    assert_eq!(got, Ok(()));
    assert_eq!(out, naive(&t, 40, &[3, 4, 9]));
    // Tuples that do not split evenly into the batches, or blocks that
    // do not make up the table: declined.
    let got = take_tuples_in(rows, &[0i64, 1], &mut out[..80], None, false, |c| c());
    assert_eq!(got, Err(Declined));
    let two = RowTable { batches: 2, ..rows };
    let got = take_tuples_in(two, &[0i64, 1], &mut out[..80], None, false, |c| c());
    assert_eq!(got, Err(Declined));
    // An index beyond its block's axis but inside the table's rows.
    let got = take_tuples_in(rows, &[0i64, 4, 0], &mut out, None, false, |c| c());
    assert_eq!(got, Err(Declined));
}

#[test]
fn each_index_of_a_tuple_is_checked_against_its_own_axis() {
    // (0, 4) would be row 4 of the 20 rows of a (5, 4) table: still
    // out of range, as is any index outside its axis anywhere.
    let t = table(20, 8);
    for bad in [
        [0i64, 4],
        [0, -5],
        [5, 0],
        [-6, 0],
        [i64::MIN, 0],
        [0, i64::MAX],
    ] {
        let mut ids = vec![1i64; 2 * MAX_ROW_IDS];
        ids[2 * (MAX_ROW_IDS - 1)..].copy_from_slice(&bad);
        let mut out = vec![0xAA; MAX_ROW_IDS * 8];
        let table = RowTable {
            bytes: &t,
            batches: 1,
            dims: &[5, 4],
            row_bytes: 8,
        };
        let got = take_tuples_in(table, &ids, &mut out, None, false, |c| c());
        assert_eq!(got, Err(Declined));
        assert!(out.iter().all(|&b| b == 0xAA));
    }
    // Dims that do not make up the table, or ids not whole tuples.
    let mut out = vec![0; 16];
    let no = |dims: &[usize], ids: &[i64], out: &mut [u8]| {
        let table = RowTable {
            bytes: &t,
            batches: 1,
            dims,
            row_bytes: 8,
        };
        take_tuples_in(table, ids, out, None, false, |c| c())
    };
    assert_eq!(no(&[5, 3], &[0, 0], &mut out[..8]), Err(Declined));
    assert_eq!(no(&[5, 4], &[0, 0, 1], &mut out[..8]), Err(Declined));
    assert_eq!(no(&[], &[], &mut []), Err(Declined));
    assert_eq!(no(&[5, 4], &[0, 1, 2, 3], &mut out), Ok(()));
}

#[test]
fn declines_what_is_not_a_short_list_of_whole_rows() {
    let t = table(10, 8);
    let mut out = vec![0; 8 * (MAX_ROW_IDS + 1)];
    let many = vec![0i64; MAX_ROW_IDS + 1];
    assert_eq!(take_rows(&t, 8, &many, &mut out), Err(Declined));
    assert_eq!(take_rows::<i64>(&t, 8, &[], &mut []), Err(Declined));
    assert_eq!(take_rows(&t, 0, &[0i64], &mut []), Err(Declined));
    assert_eq!(
        take_rows(&t[..79], 8, &[0i64], &mut out[..8]),
        Err(Declined)
    );
    assert_eq!(take_rows(&t, 8, &[0i64], &mut out[..9]), Err(Declined));
    assert_eq!(take_rows(&[], 8, &[0i64], &mut out[..8]), Err(Declined));
}

#[test]
fn clipping_clamps_each_index_into_its_own_axis() {
    // A (5, 4) table of 8-byte elements: ids name rows of 32 bytes, pairs
    // elements. Negatives count from the end first, then every index is
    // clamped into its axis (`Mode::Clip`), against a naive clamp.
    let t = table(20, 8);
    let clamp = |i: i64, n: usize| {
        let n = n as i64;
        (if i < 0 { i + n } else { i }).clamp(0, n - 1)
    };
    let wild = [0i64, 4, 5, -1, -5, -6, 99, i64::MIN, i64::MAX, 2];
    for (dims, row_bytes) in [(&[5usize][..], 32), (&[5, 4][..], 8)] {
        let k = dims.len();
        let ids: Vec<i64> = (0..wild.len() * k)
            .map(|p| wild[(p * 3 + p / k) % wild.len()])
            .collect();
        let flat: Vec<i64> = ids
            .chunks_exact(k)
            .map(|tuple| {
                tuple
                    .iter()
                    .zip(dims)
                    .fold(0, |row, (&i, &n)| row * n as i64 + clamp(i, n))
            })
            .collect();
        let table = RowTable {
            bytes: &t,
            batches: 1,
            dims,
            row_bytes,
        };
        let mut out = vec![0xAA; flat.len() * row_bytes];
        assert_eq!(
            take_tuples_in(table, &ids, &mut out, None, true, |c| c()),
            Ok(())
        );
        assert_eq!(out, naive(&t, row_bytes, &flat));
        // Without clipping, the same ids are declined, `out` untouched.
        let mut out = vec![0xAA; flat.len() * row_bytes];
        let got = take_tuples_in(table, &ids, &mut out, None, false, |c| c());
        assert_eq!(got, Err(Declined));
        assert!(out.iter().all(|&b| b == 0xAA));
    }
    // An empty axis has nothing to clamp into: declined (the general path
    // raises the error).
    let empty = RowTable {
        bytes: &[],
        batches: 1,
        dims: &[0],
        row_bytes: 8,
    };
    let mut out = vec![0xAA; 8];
    assert_eq!(
        take_tuples_in(empty, &[0i64], &mut out, None, true, |c| c()),
        Err(Declined)
    );
}

#[test]
fn rows_requested_ahead_may_fill_every_id() {
    // From a table past the prefetch bound, 512 rows of 512 bytes (256 KiB)
    // take the row path where its copy requests them ahead as it goes, and
    // are declined where every row is requested first; converted, or from
    // a table in a core's L2, the bound is `MAX_ROW_BYTES` everywhere.
    let tuning = crate::machine::tuning();
    let rows = tuning.prefetch_min_data_bytes / 512 + 1024;
    let t = table(rows, 512);
    let ahead = tuning.rows_requested_ahead && tuning.half_kib_rows_by_moves;
    let most = max_row_bytes(512, false, t.len());
    assert_eq!(
        most,
        if ahead {
            MAX_ROW_IDS * 512
        } else {
            MAX_ROW_BYTES
        }
    );
    assert_eq!(max_row_bytes(512, true, t.len()), MAX_ROW_BYTES);
    assert_eq!(max_row_bytes(512, false, 300 * 512), MAX_ROW_BYTES);
    assert_eq!(max_row_bytes(64, false, t.len()), MAX_ROW_BYTES);
    assert_eq!(max_row_bytes(513, false, t.len()), MAX_ROW_BYTES);
    let ids: Vec<i64> = (0..MAX_ROW_IDS as i64)
        .map(|k| (k * 7919 + 13) % rows as i64)
        .collect();
    let mut out = vec![0xAA; ids.len() * 512];
    let got = take_rows(&t, 512, &ids, &mut out);
    if ahead {
        assert_eq!(got, Ok(()));
        assert_eq!(out, naive(&t, 512, &ids));
    } else {
        assert_eq!(got, Err(Declined));
        assert!(out.iter().all(|&b| b == 0xAA));
    }
}

#[test]
fn wide_rows_of_a_table_past_the_prefetch_bound_copy_exactly() {
    // Rows of 65 bytes and more (by 32-byte moves, the lines of the rows
    // requested ahead as they are copied where the machine's model says:
    // `machine::Tuning::rows_requested_ahead`; by `memcpy` from 513 bytes,
    // and for 512 where `machine::Tuning::half_kib_rows_by_moves` is not
    // set) from a table the row path requests its rows from, as many rows
    // as it takes, and fewer than it requests ahead.
    for row_bytes in [128, 140, 256, 512, 1000, 4096] {
        let rows = (crate::machine::tuning().prefetch_min_data_bytes / row_bytes) + 1024;
        let t = table(rows, row_bytes);
        assert!(prefetches(t.len()));
        let most = (MAX_ROW_BYTES / row_bytes).min(MAX_ROW_IDS);
        for count in [1, 3, most] {
            let ids: Vec<i64> = (0..count as i64)
                .map(|k| (k * 7919 + 13) % rows as i64 - (k % 3) * (rows as i64 / 2))
                .collect();
            let mut out = vec![0xAA; ids.len() * row_bytes];
            assert_eq!(take_rows(&t, row_bytes, &ids, &mut out), Ok(()));
            assert_eq!(
                out,
                naive(&t, row_bytes, &ids),
                "{count} rows of {row_bytes} bytes"
            );
        }
    }
}

#[test]
fn a_split_copy_takes_the_same_rows_as_one_thread() {
    // The copy split over 2, 3 and 5 threads (each thread requesting and
    // copying its own rows), from a table past the prefetch bound and from
    // a small one, widths compiled for and not, converted or not.
    let big_rows = crate::machine::tuning().prefetch_min_data_bytes / 128 + 1024;
    let cast = Cast::new(crate::Scalar::I8, false, crate::Scalar::I32, false).unwrap();
    for (rows, row_bytes) in [(big_rows, 128), (37, 4), (37, 32), (37, 140), (300, 512)] {
        let t = table(rows, row_bytes);
        let dims = [rows];
        let table = RowTable {
            bytes: &t,
            batches: 1,
            dims: &dims,
            row_bytes,
        };
        let count = (MAX_ROW_BYTES / row_bytes).min(MAX_ROW_IDS);
        let ids: Vec<i64> = (0..count as i64)
            .map(|k| (k * 7919 + 13) % rows as i64 - (k % 3) * (rows as i64 / 2))
            .collect();
        let want = naive(&t, row_bytes, &ids);
        for threads in [2, 3, 5, usize::MAX] {
            let mut out = vec![0xAA; want.len()];
            let got = take_tuples_split_in(table, &ids, &mut out, None, false, threads, |c| c());
            assert_eq!(got, Ok(()));
            assert_eq!(out, want, "{row_bytes}-byte rows, {threads} threads");
            // Converted: each int8 widened to int32.
            let mut wide = vec![0u8; want.len() * 4];
            let got =
                take_tuples_split_in(table, &ids, &mut wide, Some(cast), false, threads, |c| c());
            assert_eq!(got, Ok(()));
            let widened: Vec<u8> = want
                .iter()
                .flat_map(|&b| i32::from(b as i8).to_ne_bytes())
                .collect();
            assert_eq!(wide, widened);
            // A bad id anywhere: declined, `out` untouched.
            let mut bad = ids.clone();
            bad[count - 1] = rows as i64;
            let mut out = vec![0xAA; want.len()];
            let got = take_tuples_split_in(table, &bad, &mut out, None, false, threads, |c| c());
            assert_eq!(got, Err(Declined));
            assert!(out.iter().all(|&b| b == 0xAA));
            // Clipped, the bad id takes the last row.
            let mut clipped = want.clone();
            clipped[(count - 1) * row_bytes..].copy_from_slice(&t[(rows - 1) * row_bytes..]);
            let got = take_tuples_split_in(table, &bad, &mut out, None, true, threads, |c| c());
            assert_eq!(got, Ok(()));
            assert_eq!(out, clipped);
        }
    }
}
