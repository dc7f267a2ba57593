"""What the supervisor sends once a message's (or a batch's) writes are committed: the runs it starts on one
task actor travel together, and wait for the ends that come next.

Each message costs both processes a send, a receive, a MAC check, an unpickle and an acknowledgement, so the
``StartTask``s that follow one another among one actor's sends go as one ``StartTasks`` (each actor's order
kept).  Starts alone are not ``urgent``: a group of reports that sent only those lingers as one that sent
nothing (pegasus.store.drain), so several runs' ends share a commit and their successors a message.
"""

from __future__ import annotations

from typing import Any

from actors import messages as m

MOST_STARTS = 64  # runs in one StartTasks: a bound on the message's size (a snapshot each)


def coalesced(sends: list[tuple[Any, Any]]) -> list[tuple[Any, Any]]:
    """``sends`` (address, message) in order, with each run of ``StartTask``s to one address (the same
    address object: ``TaskActors`` holds one per actor) one ``StartTasks``."""
    if len(sends) < 2:
        return sends
    out: list[tuple[Any, Any]] = []
    last: dict[int, int] = {}  # id(address) -> index in ``out`` of its last send
    for address, message in sends:
        at = last.get(id(address))
        if isinstance(message, m.StartTask) and at is not None:
            previous = out[at][1]
            if isinstance(previous, m.StartTask):
                out[at] = (address, m.StartTasks((previous, message)))
                continue
            if isinstance(previous, m.StartTasks) and len(previous.starts) < MOST_STARTS:
                out[at] = (address, m.StartTasks((*previous.starts, message)))
                continue
        last[id(address)] = len(out)
        out.append((address, message))
    return out


def urgent(sends: list[tuple[Any, Any]]) -> bool:
    """Whether ``sends`` hold anything but ``StartTask``s: what someone waits on, sent once committed now."""
    return any(type(message) is not m.StartTask for _, message in sends)
