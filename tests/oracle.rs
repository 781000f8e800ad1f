//! The fuzz targets' oracle on stable: seeded pseudo-random byte strings
//! through the generators and naive reference of `fuzz/oracle/` (the
//! `ndgather-oracle` crate), the same code the cargo-fuzz targets run on
//! the fuzzer's bytes. Deterministic: the same inputs on every run.
//!
//! A failing input is written to `target/tmp/oracle-<target>-<n>`; replay
//! it under the fuzzer with
//! `cargo +nightly fuzz run --debug-assertions <target> <that file>`.

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use ndgather_oracle::{Outcome, SplitMix64};

/// Inputs per target: a few seconds for all five in a debug build.
const INPUTS: u64 = 3000;

/// Input `n` of a target: random bytes, mostly a few hundred (enough for
/// the shapes, layouts and attributes), sometimes a few thousand (enough
/// index values for the larger arrays; past the end they read as zeros).
fn input(target: &str, n: u64) -> Vec<u8> {
    let salt = target
        .bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31) ^ b as u64);
    let mut rng = SplitMix64(salt ^ n.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let len = match rng.next() % 8 {
        0 => rng.next() % 64,
        1..=5 => 64 + rng.next() % 512,
        _ => 512 + rng.next() % 4096,
    } as usize;
    let mut bytes = Vec::with_capacity(len + 8);
    while bytes.len() < len {
        bytes.extend_from_slice(&rng.next().to_le_bytes());
    }
    bytes.truncate(len);
    bytes
}

/// Runs every input of `target` through `run`; panics on the first
/// disagreement (after saving its input), else counts the outcomes.
fn replay(target: &str, run: fn(&[u8]) -> Vec<Outcome>) -> BTreeMap<Outcome, usize> {
    let mut seen = BTreeMap::new();
    for n in 0..INPUTS {
        let bytes = input(target, n);
        match catch_unwind(AssertUnwindSafe(|| run(&bytes))) {
            Ok(outcomes) => {
                for o in outcomes {
                    *seen.entry(o).or_insert(0) += 1;
                }
            }
            Err(panic) => {
                let path = format!("{}/oracle-{target}-{n}", env!("CARGO_TARGET_TMPDIR"));
                let saved = std::fs::write(&path, &bytes).map_or_else(
                    |e| format!("could not be saved ({e})"),
                    |()| format!("saved as {path}"),
                );
                eprintln!("{target}: input {n} disagrees with the oracle; {saved}");
                std::panic::resume_unwind(panic);
            }
        }
    }
    eprintln!("{target}: {INPUTS} inputs: {seen:?}");
    seen
}

/// The replay reaches every way a call can end at least `least` times
/// (a generator that stopped making, say, valid calls would pass vacuously).
fn assert_reaches(target: &str, seen: &BTreeMap<Outcome, usize>, least: &[(Outcome, usize)]) {
    for &(outcome, n) in least {
        let got = seen.get(&outcome).copied().unwrap_or(0);
        assert!(
            got >= n,
            "{target}: {outcome:?} {got} times, expected at least {n}: {seen:?}"
        );
    }
}

/// What `gather_nd` and `gather` must reach (about half of what 3,000
/// inputs give each: 400-600 invalid, 1,500 exact results, 500-600 first
/// bad indices, about a hundred too large to execute).
const COMMON_OUTCOMES: [(Outcome, usize); 6] = [
    (Outcome::Invalid, 200),
    (Outcome::Overflow, 1),
    (Outcome::PlannedOnly, 40),
    (Outcome::WrongLength, 10),
    (Outcome::Exact, 750),
    (Outcome::OutOfRange, 250),
];

#[test]
fn gather_nd_agrees_with_the_oracle() {
    let seen = replay("gather_nd", ndgather_oracle::gather_nd::run);
    assert_reaches("gather_nd", &seen, &COMMON_OUTCOMES);
}

#[test]
fn gather_agrees_with_the_oracle() {
    let seen = replay("gather", ndgather_oracle::gather::run);
    assert_reaches("gather", &seen, &COMMON_OUTCOMES);
}

#[test]
fn rows_agree_with_the_oracle() {
    let seen = replay("rows", ndgather_oracle::rows::run);
    assert_reaches(
        "rows",
        &seen,
        &[
            (Outcome::Exact, 1000),
            (Outcome::OutOfRange, 300),
            (Outcome::Declined, 20),
        ],
    );
}

#[test]
fn views_agree_with_the_oracle() {
    let seen = replay("views", ndgather_oracle::views::run);
    // Raw geometry is mostly invalid: few calls get as far as executing.
    assert_reaches(
        "views",
        &seen,
        &[
            (Outcome::Invalid, 2000),
            (Outcome::Overflow, 200),
            (Outcome::Exact, 20),
            (Outcome::OutOfRange, 3),
        ],
    );
}

#[test]
fn quantized_agrees_with_the_oracle() {
    let seen = replay("quantized", ndgather_oracle::quantized::run);
    // About half of what 3,000 inputs give: 700 refused (rules, lengths),
    // 30 of them for the output's length alone, 2,200 exact results, 650
    // first bad indices of `mode="raise"`.
    assert_reaches(
        "quantized",
        &seen,
        &[
            (Outcome::Invalid, 350),
            (Outcome::WrongLength, 12),
            (Outcome::Exact, 1000),
            (Outcome::OutOfRange, 300),
        ],
    );
}
