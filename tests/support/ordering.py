"""The suite's longest tests start first, one per xdist worker, so they overlap the rest (issue 30).

xdist's ``worksteal`` (``setup.cfg``) first deals the collection out in contiguous runs, one per worker,
then moves tests from the tail of the longest queue to a worker that runs dry.  ``lead_order`` puts the
known-slow tests at the heads of those runs: each starts at once on its own worker, and the rest of its
run is stolen by the others meanwhile.  Pure, so its tests need no xdist.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def first_runs(total: int, workers: int) -> list[int]:
    """Sizes of the runs worksteal first hands each worker (``len(pending) // nodes_remaining``)."""
    sizes, left = [], total
    for remaining in range(workers, 0, -1):
        sizes.append(left // remaining)
        left -= sizes[-1]
    return sizes


def lead_order(items: Sequence[T], rank: Callable[[T], int | None], workers: int) -> list[T]:
    """``items`` with the ranked ones (lowest rank = longest) dealt to the heads of the workers' first runs,
    back and forth (the fifth of four workers' goes behind the fourth, the shortest head), since a run's
    head keeps its place while its tail is stolen.  Items of one rank stay together, in their order (a
    module's tests share its fixture); the others keep their order too.  With one worker the ranked ones
    just come first."""
    groups: dict[int, list[T]] = {}
    for item in items:
        found = rank(item)
        if found is not None:
            groups.setdefault(found, []).append(item)
    rest = [item for item in items if rank(item) is None]
    workers = max(1, workers)
    heads: list[list[T]] = [[] for _ in range(workers)]
    for i, found in enumerate(sorted(groups)):
        turn, place = divmod(i, workers)
        heads[place if turn % 2 == 0 else workers - 1 - place] += groups[found]
    ordered: list[T] = []
    taken = 0
    for head, size in zip(heads, first_runs(len(items), workers)):
        fill = max(0, size - len(head))
        ordered += head + rest[taken:taken + fill]
        taken += fill
    return ordered + rest[taken:]


def unsplit(keys: Sequence[str | None], at: int, lowest: int, whole_tail: bool) -> int | None:
    """A cut of a queue near ``at`` that splits no run of equal keys (``None`` splits anywhere): ``at`` when
    it splits none; else the end of its run, unless that is the queue's end and not ``whole_tail``; else the
    run's start if not below ``lowest``; else None."""
    if not 0 < at < len(keys) or keys[at] is None or keys[at - 1] != keys[at]:
        return at
    end = next((i for i in range(at, len(keys)) if keys[i] != keys[at]), len(keys))
    start = next((i + 1 for i in range(at - 1, -1, -1) if keys[i] != keys[at]), 0)
    if end < len(keys) or whole_tail:
        return end
    return start if start >= lowest else None
