//! The cargo-fuzz target `quantized`: the fuzzer's bytes through
//! `ndgather_oracle::quantized::run` (`fuzz/oracle/src/quantized.rs` says
//! what it generates and checks).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    ndgather_oracle::quantized::run(bytes);
});
