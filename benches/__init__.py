"""The benchmarks of ndgather, run as ``python -m benches <suite>`` from the repository root
(``__main__.py`` lists the suites)."""
