//! A copy of an index array and a digest of its bytes, made in one pass on
//! the worker threads. `ndgather.dask` keeps such a copy of in-memory
//! indices (the caller may write to theirs after the call) and names its
//! graph by the digest: copying and hashing with NumPy and dask's
//! `tokenize` spent most of its time faulting in the copy's pages and
//! reading the bytes twice.
//!
//! The digest is XXH64 (the published algorithm) of each [`PART`] of the
//! bytes, seeded with the part's number, then XXH64 of those digests in
//! order: the same bytes give the same digest on any number of threads.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::threads::{for_each_task, Disjoint};

/// Bytes copied and then hashed at a time (while they are in L2).
const PART: usize = 256 * 1024;

/// Copies `src` into `dst` (if given; the same length) and returns the
/// digest of the copy's bytes (of `src`'s without one), on up to `threads`
/// threads.
///
/// # Panics
/// If `dst` is given with another length than `src` (a caller's bug).
pub fn copy_and_digest(src: &[u8], dst: Option<&mut [u8]>, threads: usize) -> u64 {
    if let Some(d) = &dst {
        assert_eq!(d.len(), src.len(), "copy_and_digest: lengths differ");
    }
    let parts = src.len().div_ceil(PART);
    let digests: Vec<AtomicU64> = (0..parts).map(|_| AtomicU64::new(0)).collect();
    let out = dst.map(|d| Disjoint::new(d.as_mut_ptr()));
    let part = |t: usize| {
        let start = t * PART;
        let mut bytes = &src[start..src.len().min(start + PART)];
        if let Some(out) = &out {
            // SAFETY: part `t` of `dst` (the same range as `bytes`, inside
            // it: same lengths) is written and read by this task alone, and
            // `dst` is a slice of its own, not overlapping `src`.
            bytes = unsafe {
                let d = out.at(start);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), d, bytes.len());
                std::slice::from_raw_parts(d, bytes.len())
            };
        }
        // The digest of the copy kept, not of `src`: a caller writing to
        // `src` meanwhile cannot make them differ.
        digests[t].store(xxh64(bytes, t as u64), Ordering::Relaxed);
    };
    for_each_task(threads, parts, &part);
    let all: Vec<u8> = digests
        .iter()
        .flat_map(|d| d.load(Ordering::Relaxed).to_le_bytes())
        .collect();
    xxh64(&all, src.len() as u64)
}

const P1: u64 = 0x9E37_79B1_85EB_CA87;
const P2: u64 = 0xC2B2_AE3D_27D4_EB4F;
const P3: u64 = 0x1656_67B1_9E37_79F9;
const P4: u64 = 0x85EB_CA77_C2B2_AE63;
const P5: u64 = 0x27D4_EB2F_1656_67C5;

fn round(acc: u64, input: u64) -> u64 {
    acc.wrapping_add(input.wrapping_mul(P2))
        .rotate_left(31)
        .wrapping_mul(P1)
}

fn merge(acc: u64, lane: u64) -> u64 {
    (acc ^ round(0, lane)).wrapping_mul(P1).wrapping_add(P4)
}

fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(w)
}

/// XXH64 of `bytes` with `seed`, as published (Yann Collet's xxHash).
fn xxh64(bytes: &[u8], seed: u64) -> u64 {
    let n = bytes.len();
    let mut i = 0;
    let mut h = if n >= 32 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while i + 32 <= n {
            for (j, lane) in v.iter_mut().enumerate() {
                *lane = round(*lane, u64_at(bytes, i + 8 * j));
            }
            i += 32;
        }
        let h = v[0]
            .rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18));
        v.iter().fold(h, |h, &lane| merge(h, lane))
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(n as u64);
    while i + 8 <= n {
        h ^= round(0, u64_at(bytes, i));
        h = h.rotate_left(27).wrapping_mul(P1).wrapping_add(P4);
        i += 8;
    }
    if i + 4 <= n {
        let mut w = [0u8; 4];
        w.copy_from_slice(&bytes[i..i + 4]);
        h ^= u64::from(u32::from_le_bytes(w)).wrapping_mul(P1);
        h = h.rotate_left(23).wrapping_mul(P2).wrapping_add(P3);
        i += 4;
    }
    for &b in &bytes[i..] {
        h ^= u64::from(b).wrapping_mul(P5);
        h = h.rotate_left(11).wrapping_mul(P1);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(P2);
    h ^= h >> 29;
    h = h.wrapping_mul(P3);
    h ^ (h >> 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the reference implementation (Python's `xxhash` 3.x,
    /// `xxh64(bytes, seed).intdigest()`).
    #[test]
    fn xxh64_matches_the_reference() {
        let ramp: Vec<u8> = (0..40).collect();
        let long: Vec<u8> = (0..300).map(|i| (i % 100) as u8).collect();
        for (bytes, seed, want) in [
            (&b""[..], 0, 0xef46_db37_51d8_e999),
            (b"a", 0, 0xd24e_c4f1_a98c_6e5b),
            (b"abc", 0, 0x44bc_2cf5_ad77_0999),
            (&ramp[..], 0, 0xf5da_40f1_b117_41e9),
            (&long[..], 0, 0x75b2_b7bd_e369_159c),
            (&b""[..], 7, 0x95f0_626f_6f0a_4409),
            (b"a", 7, 0xdc63_49d4_89e0_f965),
            (b"abc", 7, 0x9e75_5206_1566_76d7),
            (&ramp[..], 7, 0xfc9f_7a1b_2401_2cb5),
            (&long[..], 7, 0x213c_0598_346f_2cca),
        ] {
            assert_eq!(
                xxh64(bytes, seed),
                want,
                "{} bytes, seed {seed}",
                bytes.len()
            );
        }
    }

    /// The copy is exact, and the digest depends on the bytes only: not on
    /// the thread count, nor on whether a copy is made; one changed byte
    /// changes it.
    #[test]
    fn copies_exactly_and_digests_the_bytes_alone() {
        for n in [0, 1, 31, PART - 1, PART, 3 * PART + 17] {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
            let mut dst = vec![0u8; n];
            let d1 = copy_and_digest(&src, Some(&mut dst), 1);
            assert_eq!(dst, src, "{n} bytes");
            assert_eq!(copy_and_digest(&src, None, 2), d1, "{n} bytes");
            assert_eq!(copy_and_digest(&src, None, 3), d1, "{n} bytes");
            if n > 0 {
                let mut other = src.clone();
                other[n / 2] ^= 1;
                assert_ne!(copy_and_digest(&other, None, 2), d1, "{n} bytes");
            }
        }
    }
}
