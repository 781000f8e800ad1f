"""The one entry point of the benchmarks: ``python -m benches <suite> [options]``, run from the
repository root; ``python -m benches <suite> --help`` lists a suite's options, and
``python -m benches`` the suites. ``runner.py`` runs them.

    python -m benches compare --quick          # tiny sizes: runs, and the candidates agree
    python -m benches service --json bench-results/service.json --doc docs/performance.md
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from .runner import main

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
    "disk": "disk",
    "builds": "builds",
    "report": "report",
    "plot": "plot",
}


def entry(argv: Sequence[str]) -> int:
    if not argv or argv[0] not in SUITES:
        print("usage: python -m benches <suite> [options]; the suites:", file=sys.stderr)
        for name, module in SUITES.items():
            print(f"  {name:11s} benches/{module}.py", file=sys.stderr)
        return 2
    suite = importlib.import_module(f".{SUITES[argv[0]]}", __package__)
    return main(argv[0], suite, argv[1:])


sys.exit(entry(sys.argv[1:]))
