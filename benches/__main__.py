"""The one entry point of the benchmarks: ``python -m benches <suite> [options]``, run from the
repository root; ``python -m benches <suite> --help`` lists a suite's options.

    python -m benches compare --quick          # every suite on tiny sizes: make bench-quick
    python -m benches service --json bench-results/service.json --doc docs/performance.md
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

#: Each suite and the module of ``benches/`` that holds it.
SUITES = {
    "compare": "compare",
    "access": "access_pattern",
    "service": "service",
    "cast": "cast",
    "prepared": "prepared",
    "quantized": "quantized",
    "dask": "dask_gather",
    "zarr-floor": "zarr_floor",
    "report": "report",
    "plot": "plot",
}


def main(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in SUITES:
        print(f"usage: python -m benches {{{','.join(SUITES)}}} [options]", file=sys.stderr)
        return 2
    module = importlib.import_module(f".{SUITES[argv[0]]}", __package__)
    return int(module.main(argv[1:]))


sys.exit(main(sys.argv[1:]))
