//! The cargo-fuzz target `gather_nd`: the fuzzer's bytes through
//! `ndgather_oracle::gather_nd::run` (`fuzz/oracle/src/gather_nd.rs` says what it
//! generates and checks).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    ndgather_oracle::gather_nd::run(bytes);
});
