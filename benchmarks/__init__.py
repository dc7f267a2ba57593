"""Reproducible performance runs of Pegasus (not timed tests): ``python -m benchmarks [--quick]``.

One module per scenario (``benchmarks/__main__.py`` lists them), ``common`` the system harness (always
shut down), memory sampling and statistics, ``tools`` the CPU-bound plugin tool.  What each scenario
measures: docs/performance.md, "What each scenario measures".
"""
