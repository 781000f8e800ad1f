//! The cargo-fuzz target `views`: the fuzzer's bytes through
//! `ndgather_oracle::views::run` (`fuzz/oracle/src/views.rs` says what it
//! generates and checks).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    ndgather_oracle::views::run(bytes);
});
