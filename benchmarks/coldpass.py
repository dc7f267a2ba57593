"""Issue 33: a pass of each actor's loop by how long its poll waited before it and what it read, and what touching
memory costs here after a sleep (why a message to a sleeping process costs 2.5-2.8 times one to a warm one).

``recording(directory)`` wraps Thespian's poll (``PollSet``) while open; the actors of a system started meanwhile
(forks of this process) sum their passes by the wait and by what woke them (``what_of``), with their thread CPU,
into ``<pid>.json``.  ``touch_cost``: CPU of reading N random pages after sleeping T ms.
``python -m benchmarks.coldpass [tasks] [latency_ms]``: docs/performance.md, "Issue 33: a message to a sleeping
process (branch i33-cold)" and "Issue 33: passes for an acknowledgement (branch i33-acks)".
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from actors.wire.thespian_patches.speed.poll_selector import PollSet
from benchmarks.common import role_of, title_of

INSIDE = ", a wait inside"
DUMP_S = 0.5  # a process writes its file at most this often (what a stopped system's last passes lose)
BUCKETS = ((0.001, "< 1 ms"), (0.005, "1-5 ms"), (0.020, "5-20 ms"), (float("inf"), ">= 20 ms"))
WAIT_FOR_ACK = 4  # TCPTransport._XMITStepWaitForAck: a transmit sent whole, its acknowledgement not yet read


def bucket_of(waited_s: float) -> str:
    """The name of the bucket a poll's wait falls in."""
    return next(name for bound, name in BUCKETS if waited_s < bound)


def what_of(ready: list[str], messages: int) -> str:
    """What a pass did, from the kinds of the descriptors its poll returned (``ready_kinds``) and the messages the
    transport took in during it: ``1 message``, ``2 messages + ack``, ``3+ messages``, ``ack only``, ``nothing``
    (a timer, or the loop's own time up), or ``other: accept, send`` (no message, not acknowledgements alone)."""
    if messages:
        name = f"{min(messages, 3)}{'+' if messages >= 3 else ''} message{'s' if messages > 1 else ''}"
        return name + (" + ack" if "ack" in ready else "")
    if not ready:
        return "nothing"
    if all(kind == "ack" for kind in ready):
        return "ack only"
    return "other: " + ", ".join(sorted(set(ready)))


def ready_kinds(transport: Any, fds: list[int]) -> list[str]:
    """What each ready descriptor of a ``TCPTransport`` is: ``ack`` (a transmit waiting for its acknowledgement),
    ``send`` (a transmit that may write), ``incoming`` (a connection that sent to us, or an idle one), ``accept``
    (the listening socket), ``other``."""
    kinds = []
    listening = transport.socket.fileno()
    idle = {sock.socket.fileno() for sock in getattr(transport, "_openSockets", {}).values()
            if getattr(sock, "socket", None) is not None}
    for fd in fds:
        intent = transport._transmitIntents.get(fd)
        if intent is not None:
            kinds.append("ack" if intent.stage == WAIT_FOR_ACK else "send")
        elif fd == listening:
            kinds.append("accept")
        elif fd in transport._incomingSockets or fd in idle:
            kinds.append("incoming")
        else:
            kinds.append("other")
    return kinds


class _Counted(list):  # type: ignore[type-arg]
    """A transport's received envelopes, counting what is put in (Thespian only appends to it and pops)."""

    added = 0

    def append(self, item: Any) -> None:
        self.added += 1
        super().append(item)


class _Passes:
    """This process's passes by bucket and what they did: ``{"bucket | what": [passes, thread CPU s, descriptors
    ready]}``.  A pass runs from the poll's return to the next poll (what woke it, its handlers, its sends); one off
    the CPU 20 ms or more inside (a worker's model wait) is counted apart.  A fork starts empty (its parent's passes
    are its parent's).  ``clock`` and ``cpu_clock``: wall and thread CPU seconds."""

    def __init__(self, directory: Path, clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.directory, self.clock, self.cpu_clock = directory, clock, cpu_clock
        self.pid = 0
        self.rows: dict[str, list[float]] = {}
        self.entered = self.returned = self.waited_s = 0.0
        self.last_dump = -DUMP_S  # the first pass writes the file
        self.left_cpu: float | None = None  # thread CPU when the last poll returned: a pass is running
        self.ready: list[str] = []
        self.envelopes: _Counted | None = None  # the transport's received envelopes, counted
        self.added = 0  # how many had been received when the pass began

    def polling(self, envelopes: _Counted | None = None) -> None:
        """The loop calls its poll: the pass that began at the last return ends here.  ``envelopes``: its
        transport's received envelopes, counted (None: no transport, every pass reads as no message)."""
        if self.pid != os.getpid():
            self.pid, self.rows, self.left_cpu = os.getpid(), {}, None
        if self.left_cpu is not None:
            cpu_s, wall_s = self.cpu_clock() - self.left_cpu, self.clock() - self.returned
            messages = self.envelopes.added - self.added if self.envelopes is not None else 0
            # off the CPU 20 ms or more inside the pass: a worker's model wait (or a long preemption)
            name = bucket_of(self.waited_s) + (INSIDE if wall_s - cpu_s >= 0.020 else "") + " | " \
                + what_of(self.ready, messages)
            row = self.rows.setdefault(name, [0, 0.0, 0])
            row[0] += 1
            row[1] += cpu_s
            row[2] += len(self.ready)
            if self.clock() - self.last_dump >= DUMP_S:
                self.dump()
        self.left_cpu = None
        self.envelopes = envelopes
        self.added = envelopes.added if envelopes is not None else 0
        self.entered = self.clock()

    def polled(self, ready: list[str]) -> None:
        """The poll returned these descriptors (their ``ready_kinds``)."""
        self.returned = self.clock()
        self.waited_s, self.ready = self.returned - self.entered, ready
        self.left_cpu = self.cpu_clock()

    def dump(self) -> None:
        self.last_dump = self.clock()
        path = self.directory / f"{os.getpid()}.json"
        path.with_suffix(".tmp").write_text(json.dumps({"title": title_of(os.getpid()), "rows": self.rows}),
                                            encoding="utf-8")
        path.with_suffix(".tmp").replace(path)


@contextlib.contextmanager
def recording(directory: Path) -> Iterator[None]:
    """Every pass of the loops forked from this process while open is summed into ``directory``."""
    passes = _Passes(directory)
    original = PollSet.select

    def select(self: PollSet, timeout: float | None = None) -> list[Any]:
        caller = sys._getframe(1)
        transport = caller.f_locals.get("self") if caller.f_code.co_name == "_runWithExpiry" else None
        envelopes = None
        if transport is not None:
            envelopes = transport._incomingEnvelopes
            if not isinstance(envelopes, _Counted):
                envelopes = transport._incomingEnvelopes = _Counted(envelopes)
        passes.polling(envelopes)
        ready = original(self, timeout)
        passes.polled(ready_kinds(transport, [key.fd for key, _ in ready]) if transport is not None
                      else ["other"] * len(ready))
        return ready

    PollSet.select = select  # type: ignore[method-assign]
    try:
        yield
    finally:
        PollSet.select = original  # type: ignore[method-assign]


def read(directory: Path) -> dict[str, dict[str, dict[str, float]]]:
    """Every process's file summed by role (``llm worker``, ``task actor`` ...) and by bucket and what the pass
    did (``"< 1 ms | ack only"``): passes, CPU us a pass, descriptors ready a pass."""
    sums: dict[str, dict[str, list[float]]] = {}
    for path in directory.glob("*.json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        by_bucket = sums.setdefault(role_of(data["title"]), {})
        for name, (passes, cpu_s, ready) in data["rows"].items():
            row = by_bucket.setdefault(name, [0, 0.0, 0])
            row[0] += passes
            row[1] += cpu_s
            row[2] += ready
    order = [name + inside for inside in ("", INSIDE) for _, name in BUCKETS]

    def key(name: str) -> tuple[int, str]:
        bucket, _, what = name.partition(" | ")
        return order.index(bucket), what

    return {role: {name: {"passes": int(row[0]), "cpu_us_a_pass": round(1e6 * row[1] / row[0], 1),
                          "ready_a_pass": round(row[2] / row[0], 2)}
                   for name, row in sorted(rows.items(), key=lambda kv: key(kv[0])) if row[0]}
            for role, rows in sorted(sums.items())}


def by_what(rows: dict[str, dict[str, float]], tasks: int) -> dict[str, dict[str, float]]:
    """One role's rows (``read``) summed over the waits by what the pass did: passes a task, CPU us a pass and
    CPU ms a task."""
    sums: dict[str, list[float]] = {}
    for name, row in rows.items():
        what = name.partition(" | ")[2]
        total = sums.setdefault(what, [0, 0.0])
        total[0] += row["passes"]
        total[1] += row["passes"] * row["cpu_us_a_pass"]
    return {what: {"passes_a_task": round(passes / tasks, 2), "cpu_us_a_pass": round(cpu_us / passes, 1),
                   "cpu_ms_a_task": round(cpu_us / tasks / 1000, 3)}
            for what, (passes, cpu_us) in sorted(sums.items(), key=lambda kv: -kv[1][1])}


def touch_cost(pages: int = 500, away_ms: tuple[float, ...] = (0.0, 1.0, 5.0, 20.0, 50.0),
               repeats: int = 30) -> dict[str, float]:
    """Median thread CPU (us) of reading one byte of each of ``pages`` random pages of a private 32 MiB mapping,
    right after sleeping each ``away_ms`` (the mapping touched before every read)."""
    size = 32 << 20
    memory = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory.write(b"\1" * size)
    offsets = random.sample(range(0, size, mmap.PAGESIZE), pages)
    out = {}
    for away in away_ms:
        times = []
        for _ in range(repeats):
            time.sleep(away / 1000.0)
            began = time.thread_time()
            for offset in offsets:
                touched = memory[offset]  # noqa: F841 - the read is the point
            times.append(time.thread_time() - began)
        out[f"{away:g} ms"] = round(sorted(times)[len(times) // 2] * 1e6, 1)
    memory.close()
    return out


def main(argv: list[str]) -> None:
    tasks = int(argv[0]) if argv else 240
    latency_ms = float(argv[1]) if len(argv) > 1 else 50.0
    from benchmarks import cpusplit  # noqa: PLC0415 - only the run needs the system

    print(f"load {os.getloadavg()[0]:.1f}")
    print("500 pages touched after sleeping, us:", touch_cost())
    with tempfile.TemporaryDirectory(prefix="pegasus-coldpass-") as directory, recording(Path(directory)):
        spent = cpusplit.workload(tasks, latency_ms, memory=False)
        rows = read(Path(directory))
    print("CPU ms a task:", spent["cpu_ms_per_task"])
    for role, buckets in rows.items():
        for name, row in buckets.items():
            print(f"{role:14} after a wait {name:32} {row}")
    for role, buckets in rows.items():
        for what, row in by_what(buckets, tasks).items():
            print(f"{role:14} {what:24} {row}")
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
