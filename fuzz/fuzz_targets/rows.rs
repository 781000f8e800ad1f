//! The cargo-fuzz target `rows`: the fuzzer's bytes through
//! `ndgather_oracle::rows::run` (`fuzz/oracle/src/rows.rs` says what it
//! generates and checks).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    ndgather_oracle::rows::run(bytes);
});
