"""The launcher's allocator left with no free blocks in its partly used pools before it forks (issue 33).

CPython's small-object allocator puts a new object in a free block of a partly used pool first.  After the
fork every such block is in a page the launcher shares with every process of the system: each process that
fills one copies the whole page for one small object, and each does so for the same holes.
``take_free_blocks`` allocates exactly what the pools have free (read from ``sys._debugmallocstats``) and
keeps it: what a forked process allocates then goes to pools of its own, packed.  Figures: docs/memory.md.
"""

from __future__ import annotations

import os
import sys
import tempfile

ROUNDS = 3  # each round's own lists and reading leave a few blocks free: the next takes them
_kept: list[list[object]] = []  # never freed: freeing would make the holes again


def free_blocks(rows: list[list[str]]) -> dict[int, int]:
    """Block size -> free blocks in partly used pools, from the rows (lines split) of ``sys._debugmallocstats``'s
    table; {} without one (an interpreter without pymalloc, a format this does not know)."""
    return {int(cells[1]): int(cells[4]) for cells in rows if len(cells) == 5 and all(c.isdigit() for c in cells)}


def allocator_stats() -> str:
    """What ``sys._debugmallocstats`` writes (to the C level's stderr, so read through a file: a pipe could fill)."""
    with tempfile.TemporaryFile() as out:
        saved = os.dup(2)
        try:
            sys.stderr.flush()
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        return out.read().decode("ascii", "replace")


def take_free_blocks() -> int:
    """Fill the free blocks of the partly used pools with objects of their size, kept; the blocks taken."""
    taken = 0
    for _ in range(ROUNDS):
        rows = [line.split() for line in allocator_stats().splitlines()]
        free = free_blocks(rows)
        made: list[object] = [rows, free]  # kept too: freed, the reading would leave holes of its own
        for size, count in free.items():
            made.append(_objects(size, count))
            taken += count
        _kept.append(made)
    return taken


def _objects(size: int, count: int) -> list[object]:
    """``count`` new objects each taking one block of ``size`` bytes (16: a bare object; 32: a two-digit int;
    more: a bytes object, 33 bytes and its length)."""
    if size == 16:
        return [object() for _ in range(count)]
    if size == 32:
        return [(1 << 40) + n for n in range(count)]
    if size < 48:
        return []  # another build's size classes (8-byte alignment): no object here of exactly that size
    return [bytes(size - 33) for _ in range(count)]
