"""Where a hop's time goes: ``python -m benchmarks.hoptrace [--tasks N]``.

The hop scenario measures one figure (previous stage's finish -> next stage's start); this splits it.
It wraps handlers of StageWorker, TaskActor and StagePool in this process before the system starts
(every actor process is a fork of it: nothing in ``actors/`` changes), runs classic tasks one at a time
with zero-latency offline stages, and each process appends ``time.time()`` marks to a file of its own
(~10 us a mark: the figures are for reading, not for the targets).  tests/benchmarks/test_hoptrace.py.
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
ANSWERED = {"W0", "W1", "T0", "T2"}  # marks keyed by the answered request's token; the others by the next one's


def _install(trace_dir: Path) -> None:
    """Wrap the handlers; each process writes ``time task token stage mark`` lines to ``<dir>/<pid>``.

    A hop, from a result to its task's next request, is cut at:
        W0 worker: stage done, result not sent yet      T0 task actor: result received
        T1 task actor: next StageRequest about to go    T2 task actor: handler done (reports handed on)
        P0 pool: request received                       P1 pool: handler done (Work sent)
        W2 worker: next Work received         (the home host's own runs: P0-P1 its pool's step, T0 in WorkDone)
    """
    import actors.pool as pool_mod
    import actors.task_actor as task_mod
    import actors.worker as worker_mod

    files: dict[int, int] = {}

    def mark(name: str, about: Any) -> None:
        """``about``: a StageRequest or StageResult (its task, token and stage name the request)."""
        fd = files.get(os.getpid())
        if fd is None:
            fd = files[os.getpid()] = os.open(trace_dir / str(os.getpid()), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, f"{time.time():.6f} {about.task_id} {about.token} {about.stage} {name}\n".encode())

    worker, task, pool = worker_mod.StageWorker, task_mod.TaskActor, pool_mod.StagePool
    on_work, run, on_result = worker.receiveMsg_Work, worker._run, task.receiveMsg_StageResult
    ask_pool, on_message, on_pool_message = task._ask_pool, task.receiveMessage, pool.receiveMessage
    home_ask, answer_here = task.home_ask, task.answer_here

    def worker_work(self: Any, work: Any, sender: Any) -> None:
        mark("W2", work.request)
        on_work(self, work, sender)
        mark("W1", work.request)

    def worker_run(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
        result = run(self, request, *args, **kwargs)
        mark("W0", request)
        return result

    def task_result(self: Any, result: Any, sender: Any) -> None:
        mark("T0", result)
        on_result(self, result, sender)

    def task_ask_pool(self: Any, command: Any) -> None:
        mark("T1", command.stage)
        ask_pool(self, command)

    def task_answer_here(self: Any, result: Any) -> None:
        mark("T0", result)
        answer_here(self, result)

    def task_message(self: Any, message: Any, sender: Any) -> None:
        on_message(self, message, sender)
        if type(message).__name__ == "StageResult":
            mark("T2", message)
        elif type(message).__name__ == "WorkDone" and message.result is not None:
            mark("T2", message.result)

    def task_home_ask(self: Any, request: Any) -> bool:
        if not self.home.hosts(request.pool):
            return False  # its pool is elsewhere: marked there
        mark("P0", request)
        home_ask(self, request)
        mark("P1", request)
        return True

    def pool_message(self: Any, message: Any, sender: Any) -> None:
        request = type(message).__name__ == "StageRequest"
        if request:
            mark("P0", message)
        on_pool_message(self, message, sender)
        if request:
            mark("P1", message)

    worker.receiveMsg_Work, worker._run, task.receiveMsg_StageResult = worker_work, worker_run, task_result
    task._ask_pool, task.receiveMessage, pool.receiveMessage = task_ask_pool, task_message, pool_message
    task.home_ask, task.answer_here = task_home_ask, task_answer_here


def _segments(trace_dir: Path, since: float) -> dict[str, list[float]]:
    """Each hop's segments.  A request is (task, token, stage): the post-task reflection, which the
    supervisor asks with a token of its own, is never taken for a stage of the run."""
    marks: dict[tuple[str, int, str], dict[str, float]] = defaultdict(dict)
    for path in trace_dir.iterdir():
        for line in path.read_text().splitlines():
            stamp, task_id, token, stage, name = line.split()
            if float(stamp) >= since:
                marks[(task_id, int(token), stage)][name] = float(stamp)
    asked: dict[str, list[tuple[int, str]]] = defaultdict(list)  # each task's requests its task actor sent
    for (task_id, token, stage), here in marks.items():
        if "T1" in here:
            asked[task_id].append((token, stage))
    out: dict[str, list[float]] = defaultdict(list)
    for (task_id, token, _), here in marks.items():
        later = sorted(key for key in asked[task_id] if key[0] > token)
        if not {"W0", "T0"} <= set(here) or not later:
            continue  # the last stage of a task, or a stage the task actor did not ask
        after = marks[(task_id, *later[0])]  # the next request: its token is past the answer's and any recall's
        for label, start, end in SEGMENTS:
            first, second = (here if start in ANSWERED else after), (here if end in ANSWERED else after)
            if start in first and end in second:
                out[label].append(second[end] - first[start])
    return out


def _one_task(client: Any) -> None:
    """A classic task to its end; a failed one (a wrapper out of step with the code it wraps) stops the trace."""
    task = client.wait(client.submit("what is 2 + 3 * 4?")["task_id"], timeout=60)
    if task["lifecycle_state"] != "done":
        raise RuntimeError(f"task {task['task_id']} ended {task['lifecycle_state']}: {task.get('error')}")


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
            _one_task(system.client)  # warm-up
            since = time.time()
            for _ in range(args.tasks):
                _one_task(system.client)
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
