//! The cargo-fuzz target `gather`: the fuzzer's bytes through
//! `ndgather_oracle::gather::run` (`fuzz/oracle/src/gather.rs` says what it
//! generates and checks).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    ndgather_oracle::gather::run(bytes);
});
