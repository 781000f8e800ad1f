#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for SECONDS each (default
# $FUZZ_SECONDS, else 30), one after the other, one process at a time, under
# AddressSanitizer with debug assertions (overflow checks) on. Fails on a
# finding (the reproducer is left in fuzz/artifacts/<target>/). Without a
# nightly toolchain it says so and skips (exit 0); cargo-fuzz is installed
# from crates.io if missing. Used by `make fuzz` and `.ci/run`.
#
# usage: fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-${FUZZ_SECONDS:-30}}

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: SKIPPED: no nightly toolchain (cargo +nightly); fuzzing needs one:"
    echo "      rustup toolchain install nightly"
    exit 0
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: cargo-fuzz is not installed; installing it: cargo install cargo-fuzz --locked"
    cargo install cargo-fuzz --locked
fi

targets=$(cargo +nightly fuzz list)
total=0
for t in $targets; do
    log=$(mktemp)
    echo "fuzz: $t for ${seconds} s"
    if ! cargo +nightly fuzz run --debug-assertions "$t" -- \
        -max_total_time="$seconds" -timeout=30 -print_final_stats=1 >"$log" 2>&1; then
        tail -n 80 "$log"
        echo "fuzz: $t FAILED: a finding (or a build error) above; reproducer in fuzz/artifacts/$t/"
        echo "      replay it: cargo +nightly fuzz run --debug-assertions $t fuzz/artifacts/$t/<file>"
        rm -f "$log"
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rm -f "$log"
    total=$((total + ${runs:-0}))
    echo "fuzz: $t ok: ${runs:-?} executions, no finding"
done
echo "fuzz: all targets ok: $total executions in total, no finding"
