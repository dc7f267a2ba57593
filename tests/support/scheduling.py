"""xdist's ``worksteal`` that never splits a module whose tests share a module-scoped fixture (issue 30).

worksteal hands out and steals contiguous slices of the queue wherever its count falls, so such a module
(one Chromium and one system for the dashboard's eleven tests) was cut in two and its fixture set up on
two workers.  Here a slice ends at such a module's edge (``ordering.unsplit``); a queue with no such edge
to steal at is left alone, and a worker with nothing to steal stops, as in worksteal.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from xdist.scheduler.worksteal import MIN_PENDING, WorkStealingScheduling

from tests.support.ordering import unsplit

SHARED = ('scope="module"', "scope='module'")


@functools.cache
def _shares_a_fixture(path: Path) -> bool:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return False
    return any(mark in text for mark in SHARED)


class ModulesWhole(WorkStealingScheduling):
    """worksteal whose slices end at the edges of modules that share a module-scoped fixture."""

    def __init__(self, config: Any, log: Any = None, root: Path | None = None) -> None:
        super().__init__(config, log)
        self.root = root or Path.cwd()

    def _keys(self, indices: Sequence[int]) -> list[str | None]:
        assert self.collection is not None
        modules = [self.collection[i].split("::", 1)[0] for i in indices]
        return [module if _shares_a_fixture(self.root / module) else None for module in modules]

    def _send_tests(self, node: Any, num: int) -> None:
        super()._send_tests(node, unsplit(self._keys(self.pending), num, 1, whole_tail=True) or num)

    def _steal_cut(self, queue: list[int]) -> int | None:
        """Where worksteal would cut this queue to steal its tail (half, leaving MIN_PENDING), moved to an edge."""
        count = min(len(queue) // 2, max(0, len(queue) - MIN_PENDING))
        return unsplit(self._keys(queue), len(queue) - count, MIN_PENDING, whole_tail=False) if count else None

    def check_schedule(self) -> None:
        """worksteal's, but stealing from the longest queue that has an edge to cut at."""
        up = [node for node in self.node2pending if not node.shutting_down]
        idle = [node for node in up if len(self.node2pending[node]) < MIN_PENDING]
        if idle and self.pending:
            for i, node in enumerate(idle):
                self._send_tests(node, len(self.pending) // (len(idle) - i))
            idle = [node for node in up if len(self.node2pending[node]) < MIN_PENDING]
        if not idle or self.steal_requested_from_node is not None:
            return
        cuts = [(node, cut) for node in up for cut in [self._steal_cut(self.node2pending[node])] if cut is not None]
        if not cuts:
            for node in idle:
                node.shutdown()  # nothing left to steal: it ends now instead of waiting
            return
        node, cut = max(cuts, key=lambda found: len(self.node2pending[found[0]]))
        node.send_steal(self.node2pending[node][cut:])
        self.steal_requested_from_node = node
