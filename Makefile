# The commands the README, people and CI use. Run them with the virtualenv you develop in
# activated, or pass PYTHON=path/to/venv/bin/python. See README.md, "Development".

PYTHON ?= python
# maturin develop installs into $VIRTUAL_ENV; point it at the environment of $(PYTHON).
PYTHON_ENV = $(shell $(PYTHON) -c 'import sys; print(sys.prefix)')
PYTHON_EXE = $(shell $(PYTHON) -c 'import sys; print(sys.executable)')
# The folder the ndgather that $(PYTHON) imports lies in (site-packages, or python/ after
# `make dev`): a build for `python -m benches builds`.
INSTALLED = $(shell $(PYTHON) -c 'import ndgather, pathlib; print(pathlib.Path(ndgather.__file__).parents[1])')
STUBTEST_ALLOWLIST = $(wildcard .ci/stubtest-allowlist.txt)
BENCH_JSON = bench-results/compare_numpy.json
PEERS_JSON = bench-results/compare.json
PEERS_1T_JSON = bench-results/compare-1t.json
ACCESS_JSON = bench-results/access.json
DASK_JSON = bench-results/dask.json
SERVICE_JSON = bench-results/service.json
CAST_JSON = bench-results/cast.json
PREPARED_JSON = bench-results/prepared.json
QUANTIZED_JSON = bench-results/quantized.json
DISK_JSON = bench-results/disk.json
# The table's file for `make bench-disk` (4 GiB, kept for the next run; on a real disk, not tmpfs).
DISK_FILE ?= /tmp/ndgather-bench-disk.f32

# Seconds each fuzz target runs in `make fuzz`.
FUZZ_SECONDS ?= 300

.PHONY: dev check lint format clean test test-rust stress bench-quick
.PHONY: bench bench-doc bench-peers bench-access bench-dask bench-service bench-cast bench-prepared bench-quantized bench-disk fuzz

## dev: build the extension (optimised, quick to rebuild) and install it editable
dev:
	VIRTUAL_ENV=$(PYTHON_ENV) $(PYTHON) -m maturin develop --profile dev-release

## check: the checks of .ci/run that need no release build and no nightly toolchain, in the
## same order. It leaves out what .ci/run does besides: the install (`pip install` into .venv),
## `make wheel`, `make wheel-test`, `make fuzz` (20 s a target) and `make asan`. `.ci/check_doc_refs.py`
## (run by `make lint`) fails when this list and .ci/run disagree.
check: lint test-rust test bench-quick

## format: rewrite what `make lint` checks the format of: cargo fmt (the crate and fuzz/),
## ruff format, and the fixes ruff check can make by itself
format:
	cargo fmt
	cargo fmt --manifest-path fuzz/Cargo.toml
	cargo fmt --manifest-path benches/floor/Cargo.toml
	$(PYTHON) -m ruff format python tests benches
	$(PYTHON) -m ruff check --fix python tests benches

## clean: build and run artefacts: cargo's target dirs (the crate's, fuzz/'s and
## benches/floor/'s), the venvs the Makefile and .ci/wheel-test make (.venv-build, .venv-wheel-test), dist/,
## bench-results/, the extension `make dev` put in python/ndgather/ (run `make dev` again
## after) and the tools' caches. It keeps .venv (yours, and .ci/run's) and fuzz/corpus and
## fuzz/artifacts (the fuzzers' inputs and findings).
clean:
	cargo clean
	cargo clean --manifest-path fuzz/Cargo.toml
	cargo clean --manifest-path benches/floor/Cargo.toml
	rm -rf $(BUILD_VENV) .venv-wheel-test dist bench-results
	rm -f python/ndgather/_core*.so
	rm -rf .pytest_cache .ruff_cache .mypy_cache .hypothesis
	find python tests benches .ci -name __pycache__ -type d -prune -exec rm -rf {} +

## lint: Rust format and clippy (core, bindings, fuzz/: the oracle and the fuzz targets, on
## stable, and the benchmarks' floor kernels in benches/floor/), ruff (lint and format), mypy --strict, stubtest, the minimum supported Rust version
## (.ci/msrv), the files and make targets the docs name (.ci/check_doc_refs.py), the core's layers
## (.ci/check_layering.py, against docs/architecture.md)
lint:
	cargo fmt --check
	cargo fmt --check --manifest-path fuzz/Cargo.toml
	cargo clippy --all-targets -- -D warnings
	PYO3_PYTHON=$(PYTHON_EXE) cargo clippy --features python -- -D warnings
	cargo clippy --manifest-path fuzz/Cargo.toml --all-targets -- -D warnings
	cargo fmt --check --manifest-path benches/floor/Cargo.toml
	cargo clippy --manifest-path benches/floor/Cargo.toml --all-targets -- -D warnings
	$(PYTHON) -m ruff check python tests benches
	$(PYTHON) -m ruff format --check python tests benches
	$(PYTHON) -m mypy --strict python/ndgather
	$(PYTHON) -m mypy.stubtest ndgather._core $(addprefix --allowlist ,$(STUBTEST_ALLOWLIST))
	$(PYTHON) .ci/msrv
	$(PYTHON) .ci/check_doc_refs.py
	$(PYTHON) .ci/check_layering.py

## test: the README's test command
test:
	$(PYTHON) -m pytest tests

## test-rust: the core's tests, without Python, and the benchmarks' floor kernels'
test-rust:
	cargo test
	cargo test --release --manifest-path benches/floor/Cargo.toml

## stress: the stress suite alone
stress:
	$(PYTHON) -m pytest tests -m stress

## bench-quick: every benchmark suite (python -m benches <suite>) on tiny sizes: they run and
## the candidates agree
bench-quick:
	$(PYTHON) -m ndgather --quick
	$(PYTHON) -m benches compare --quick
	$(PYTHON) -m benches compare --peers numpy --quick
	$(PYTHON) -m benches access --quick
	$(PYTHON) -m benches dask --quick
	$(PYTHON) -m benches service --quick --pause-us 50
	$(PYTHON) -m benches cast --quick
	$(PYTHON) -m benches prepared --quick
	$(PYTHON) -m benches quantized --quick
	$(PYTHON) -m benches zarr-floor --quick
	$(PYTHON) -m benches disk --quick
	$(PYTHON) -m benches builds --quick --old $(INSTALLED) --new $(INSTALLED) --cases rows_1m_256b,gather_axis1 --batches 1 --placements 0,16/0,48

## bench: ndgather against each of NumPy's idioms, results in $(BENCH_JSON); then its table
## in docs/performance.md ("NumPy, idiom by idiom")
bench:
	$(PYTHON) -m benches compare --peers numpy --json $(BENCH_JSON)
	$(MAKE) bench-doc

## bench-doc: put the table of the last `make bench` into docs/performance.md
bench-doc:
	$(PYTHON) -m benches report $(BENCH_JSON) --doc docs/performance.md

## bench-peers: ndgather against NumPy, onnxruntime, OpenVINO and TensorFlow (pip install
## ".[bench]"), all threads and one thread; then their tables in docs/performance.md, the
## README's summary table and docs/benchmark.png. Build with `maturin develop --release`
## first: that is what users get.
bench-peers:
	$(PYTHON) -m benches compare --json $(PEERS_JSON)
	$(PYTHON) -m benches compare --threads 1 --json $(PEERS_1T_JSON)
	$(PYTHON) -m benches plot $(PEERS_JSON) --one-thread $(PEERS_1T_JSON) \
		--png docs/benchmark.png --doc docs/performance.md --readme README.md

## bench-access: the large row gathers with random, run-wise and sequential indices beside the
## copy limits (how much of the time is where the reads land); the table goes into
## docs/performance.md
bench-access:
	$(PYTHON) -m benches access --json $(ACCESS_JSON) --doc docs/performance.md

## bench-dask: ndgather.dask against dask's own gathers and in-memory ndgather (pip install
## ".[dask]"), threaded scheduler and a 2-process LocalCluster; the table goes into
## docs/performance.md
bench-dask:
	$(PYTHON) -m benches dask --json $(DASK_JSON) --doc docs/performance.md

## bench-service: per-request batches (1 to 4096 random ids) from tables far larger than the
## caches, ndgather against NumPy, PyTorch, JAX and numba (those installed) and the measured
## limits (benches/floor/, built with cargo), one thread and all threads, medians and p50/p99;
## the table goes into docs/performance.md
bench-service:
	$(PYTHON) -m benches service --json $(SERVICE_JSON) --doc docs/performance.md

## bench-cast: dtype= (float16, bfloat16, int8 tables gathered into float32) against the same
## gather from a float32 table, np.take().astype() and torch's index_select().to(), on the
## service batches and the 1M-rows case; the table goes into docs/performance.md
bench-cast:
	$(PYTHON) -m benches cast --json $(CAST_JSON) --doc docs/performance.md

## bench-prepared: a prepared gather (ndgather.prepare_gather_nd once, then 10 calls) against
## 10 one-shot calls, on the 2M-points and 1M-rows cases; the table goes into
## docs/performance.md
bench-prepared:
	$(PYTHON) -m benches prepared --json $(PREPARED_JSON) --doc docs/performance.md

## bench-quantized: com.microsoft GatherBlockQuantized, 1,024 token ids from a (151936, 4096)
## 4-bit table (uint8-packed, block 32, float32 scales), ndgather against an onnxruntime
## session of the one-node model and the NumPy idiom, results bit-identical; the table goes
## into docs/performance.md
bench-quantized:
	$(PYTHON) -m benches quantized --json $(QUANTIZED_JSON) --doc docs/performance.md

## bench-disk: random rows gathered from a 4 GiB float32 file ($(DISK_FILE), written once and
## reused; delete it after), cold (dropped from the page cache) and warm, 512 B and 4 KiB rows,
## 64 to 4,096 ids: ndgather (all threads, one, prefault off) against fancy indexing and
## np.take on np.memmap with and without MADV_RANDOM, and a floor of os.pread from N threads;
## about 5 minutes and 4 GiB of RAM (an in-memory copy for the warm goal). The table goes into
## docs/performance.md ("Tables in files")
bench-disk:
	$(PYTHON) -m benches disk --file $(DISK_FILE) --json $(DISK_JSON) --doc docs/performance.md
# --- Release artefacts: `make wheel`, then `make wheel-test` (README, "Development") ---
BUILD_VENV = .venv-build
# The interpreter .venv-build is made with (any CPython >= 3.10; abi3 needs none to build).
BUILD_PYTHON ?= python3

.PHONY: wheel wheel-test

$(BUILD_VENV)/.installed: .ci/wheel-requirements.txt
	rm -rf $(BUILD_VENV)
	$(BUILD_PYTHON) -m venv $(BUILD_VENV)
	$(BUILD_VENV)/bin/python -m pip install -r .ci/wheel-requirements.txt
	touch $@

## wheel: dist/ gets one abi3 wheel tagged manylinux2014 (glibc 2.17, baseline x86-64) and the
## sdist, built with the pinned toolchain of .ci/wheel-requirements.txt (maturin, zig from
## PyPI) in $(BUILD_VENV); then `auditwheel show` and the checks of .ci/check_dist.py (tags,
## external libraries, instructions, metadata, licenses, twine check). Needs cargo.
wheel: $(BUILD_VENV)/.installed
	rm -rf dist
	env -u RUSTFLAGS -u CARGO_ENCODED_RUSTFLAGS -u CARGO_BUILD_RUSTFLAGS \
		PATH="$(abspath $(BUILD_VENV))/bin:$$PATH" \
		$(BUILD_VENV)/bin/maturin build --release --locked --zig \
		--compatibility manylinux2014 --out dist
	$(BUILD_VENV)/bin/maturin sdist --out dist
	$(BUILD_VENV)/bin/python .ci/check_dist.py dist

## wheel-test: the wheel in dist/ (from `make wheel`) installed with the test extra into a
## clean venv per CPython 3.10-3.13 found (pyenv or python3.X on PATH), and the 3.10 one
## again with the oldest NumPy allowed; `python -m pytest tests` in each with no cargo on PATH
wheel-test:
	.ci/wheel-test
## fuzz: every cargo-fuzz target in fuzz/ for $(FUZZ_SECONDS) s each, one at a time, under
## AddressSanitizer; fails on a finding. Needs a nightly toolchain (cargo +nightly); installs
## cargo-fuzz if missing. `make fuzz FUZZ_SECONDS=30` for a quick pass.
fuzz:
	fuzz/run.sh $(FUZZ_SECONDS)

.PHONY: asan

## asan: the extension built with the nightly toolchain and -Zsanitizer=address, and the whole
## pytest suite (stress included, then tests/core with the result pool off) run against it,
## in a copy of the package (.ci/asan; the OpenVINO runtime's tests are skipped there: it
## cannot load under ASan). Fails on any ASan report. Needs a nightly toolchain and GCC's
## libasan; says so and skips without nightly.
## `make asan ASAN_TESTS="tests/core -x"` runs those pytest arguments instead.
ASAN_TESTS ?=
asan:
	PYTHON=$(PYTHON) .ci/asan $(ASAN_TESTS)
