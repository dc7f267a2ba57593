"""Where a hop's time goes: ``python -m benchmarks.hoptrace [--tasks N]``.

The hop scenario measures one figure (previous stage's finish -> next stage's
start).  This tool splits it: it wraps the handlers of StageWorker, TaskActor
and StagePool in this process before the system starts (every actor process
is forked from here, so each inherits the wrappers; nothing in ``actors/``
changes), runs classic tasks one at a time with zero-latency offline stages,
and has every process append ``time.time()`` marks to its own file.  A hop
from request token k (a result) to token k + 2 (the next request: the task
actor moves its token past the answered one, then once more for the next
request) is cut at:

    W0 worker: stage done, result not sent yet      T0 task actor: result received
    T1 task actor: next StageRequest about to go    T2 task actor: handler done (TaskReports sent)
    P0 pool: request received                       P1 pool: handler done (Work sent)
    W2 worker: next Work received

Marks cost ~10 us each; the figures are for reading, not for the targets.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

SEGMENTS = (
    ("worker sends result + WorkDone (W0->W1)", "W0", "W1"),
    ("result delivered to task actor (W0->T0)", "W0", "T0"),
    ("task actor: FSM, checkpoint, next request (T0->T1)", "T0", "T1"),
    ("request delivered to pool (T1->P0)", "T1", "P0"),
    ("pool: queue, Work sent (P0->P1)", "P0", "P1"),
    ("Work delivered to worker (P1->W2)", "P1", "W2"),
    ("task actor sends its TaskReports (T1->T2)", "T1", "T2"),
    ("hop (W0->W2)", "W0", "W2"),
)
ANSWERED = {"W0", "W1", "T0"}  # marks keyed by the answered request's token; the others by the next one's


def _install(trace_dir: Path) -> None:
    """Wrap the handlers; each process writes ``time token_key mark`` lines to ``<dir>/<pid>``."""
    import actors.pool as pool_mod
    import actors.task_actor as task_mod
    import actors.worker as worker_mod

    files: dict[int, int] = {}

    def mark(name: str, task_id: str, token: int) -> None:
        fd = files.get(os.getpid())
        if fd is None:
            fd = files[os.getpid()] = os.open(trace_dir / str(os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, f"{time.time():.6f} {task_id} {token} {name}\n".encode())

    worker, task, pool = worker_mod.StageWorker, task_mod.TaskActor, pool_mod.StagePool
    on_work, run, on_result = worker.receiveMsg_Work, worker._run, task.receiveMsg_StageResult
    send_stage, on_message, on_request = task._send_stage, task.receiveMessage, pool.receiveMsg_StageRequest

    def worker_work(self: Any, work: Any, sender: Any) -> None:
        mark("W2", work.request.task_id, work.request.token)
        on_work(self, work, sender)
        mark("W1", work.request.task_id, work.request.token)

    def worker_run(self: Any, request: Any) -> Any:
        result = run(self, request)
        mark("W0", request.task_id, request.token)
        return result

    def task_result(self: Any, result: Any, sender: Any) -> None:
        mark("T0", result.task_id, result.token)
        on_result(self, result, sender)

    def task_send_stage(self: Any, command: Any) -> None:
        mark("T1", command.task_id, command.token)
        send_stage(self, command)

    def task_message(self: Any, message: Any, sender: Any) -> None:
        on_message(self, message, sender)
        if type(message).__name__ == "StageResult":
            mark("T2", message.task_id, message.token + 2)

    def pool_request(self: Any, request: Any, sender: Any) -> None:
        mark("P0", request.task_id, request.token)
        on_request(self, request, sender)
        mark("P1", request.task_id, request.token)

    worker.receiveMsg_Work, worker._run, task.receiveMsg_StageResult = worker_work, worker_run, task_result
    task._send_stage, task.receiveMessage, pool.receiveMsg_StageRequest = task_send_stage, task_message, pool_request


def _segments(trace_dir: Path, since: float) -> dict[str, list[float]]:
    marks: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    for path in trace_dir.iterdir():
        for line in path.read_text().splitlines():
            stamp, task_id, token, name = line.split()
            if float(stamp) >= since:
                marks[(task_id, int(token))][name] = float(stamp)
    out: dict[str, list[float]] = defaultdict(list)
    for (task_id, token), here in marks.items():
        after = marks.get((task_id, token + 2), {})
        if "W0" not in here or "W2" not in after:
            continue  # the last stage of a task, or a hop with an extra round trip (journal)
        for label, start, end in SEGMENTS:
            first, second = (here if start in ANSWERED else after), (here if end in ANSWERED else after)
            if start in first and end in second:
                out[label].append(second[end] - first[start])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.hoptrace", description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100, help="classic tasks, one at a time (default 100)")
    args = parser.parse_args(argv)
    from benchmarks.common import pegasus_system, state_dir, summary_ms
    from benchmarks.machine import describe, one_line

    with state_dir() as state:
        trace_dir = state / "hoptrace"
        trace_dir.mkdir()
        _install(trace_dir)
        with pegasus_system(state) as system:
            client = system.client
            client.wait(client.submit("what is 2 + 3 * 4?")["task_id"])  # warm-up
            since = time.time()
            for _ in range(args.tasks):
                client.wait(client.submit("what is 2 + 3 * 4?")["task_id"], timeout=60)
        segments = _segments(trace_dir, since)
    print(f"machine: {one_line(describe())}; {args.tasks} classic tasks, one at a time")
    print(f"{'segment':54s} {'hops':>5s} {'p50 ms':>8s} {'mean ms':>8s} {'p99 ms':>8s}")
    for label, *_ in SEGMENTS:
        if values := segments.get(label):
            ms = summary_ms(values)
            print(f"{label:54s} {ms['n']:5d} {ms['p50_ms']:8.3f} {ms['mean_ms']:8.3f} {ms['p99_ms']:8.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
