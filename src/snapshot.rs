//! A copy of an index array and a digest of its bytes, made in one pass on
//! the worker threads. `ndgather.dask` keeps such a copy of in-memory
//! indices (the caller may write to theirs after the call) and names its
//! graph by the digest: copying and hashing with NumPy and dask's
//! `tokenize` spent most of its time faulting in the copy's pages and
//! reading the bytes twice.
//!
//! The digest is XXH64 (the published algorithm, from `xxhash-rust`) of
//! each [`PART`] of the bytes, seeded with the part's number, then XXH64 of
//! those digests in order (little-endian), seeded with the length: the same
//! bytes give the same digest on any number of threads.

use std::sync::atomic::{AtomicU64, Ordering};

use xxhash_rust::xxh64::{xxh64, Xxh64};

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
    let mut all = Xxh64::new(src.len() as u64);
    for d in &digests {
        all.update(&d.load(Ordering::Relaxed).to_le_bytes());
    }
    all.digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the reference implementation (Python's `xxhash` 3.x,
    /// `xxh64(bytes, seed).intdigest()`); the strings with seed 0 are the
    /// vectors other implementations check against too (Zig's standard
    /// library, LLVM's unit tests): a swap to another hash, or another
    /// variant of this one, fails here.
    #[test]
    fn xxh64_matches_the_reference() {
        let ramp: Vec<u8> = (0..40).collect();
        let long: Vec<u8> = (0..300).map(|i| (i % 100) as u8).collect();
        for (bytes, seed, want) in [
            (&b""[..], 0, 0xef46_db37_51d8_e999),
            (b"a", 0, 0xd24e_c4f1_a98c_6e5b),
            (b"abc", 0, 0x44bc_2cf5_ad77_0999),
            (b"message digest", 0, 0x066e_d728_fcee_b3be),
            (b"abcdefghijklmnopqrstuvwxyz", 0, 0xcfe1_f278_fa89_835c),
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

    /// The whole digest (parts and the digest of their digests) is the one
    /// `ndgather.dask`'s graph names have always carried: values of the
    /// hand-written XXH64 this module had before it used `xxhash-rust`.
    #[test]
    fn digests_are_pinned() {
        for (n, want) in [
            (0, 0xef46_db37_51d8_e999),
            (1, 0x2bd6_1d69_b2d5_b113),
            (31, 0x48de_35c5_2722_75d0),
            (PART - 1, 0x07d4_b7e6_ebb4_59cf),
            (PART, 0x7c85_c32c_db7c_a043),
            (3 * PART + 17, 0xf4f6_0db2_0e81_9025),
        ] {
            let src: Vec<u8> = (0..n).map(|i| (i * 7 + i / 251) as u8).collect();
            assert_eq!(copy_and_digest(&src, None, 2), want, "{n} bytes");
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
