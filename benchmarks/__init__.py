"""Reproducible performance runs of Pegasus (not timed tests): ``python -m benchmarks [--quick]``.

Scenarios (one module each): ``hop`` (stage-to-stage overhead, with Thespian's
floor from ``floor``), ``pool`` (pool efficiency against N / L), ``scale``
(thousands of tasks through a cap of 32, memory), ``checkpoint`` (store write
cost, bytes per step), ``recovery`` (whole-system SIGKILL and restart) and
``baseline`` (module ``compare``: the same workloads on seed 003's asyncio
design, ``baseline``).  ``tools`` is the CPU-bound plugin tool; ``common`` the
system harness (always shut down), memory sampling and statistics.
"""
