"""Scenario 4, checkpoint cost: the store writes of one transition, timed directly.

A classic task with a 200-step plan (echo tool calls, then respond) is driven through its TaskFSM in this
process as its task actor drives it (the same processors, ``Checkpointer`` and ``kind_for``), each write
made on a real SQLite file (WAL) as the supervisor makes it: ``Store.journal_start`` before each tool step,
``Store.cognitive_transition`` (one transaction) after every transition.  Bytes per step: the growth of
the task's payload bytes in the store (``Store.bytes_for``) across one step.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack

from benchmarks.common import check, percentile, state_dir, summary_ms
from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.store import Checkpointer, Store, kind_for
from pegasus.store.checkpoint import encode_full
from pegasus.store.journal import FINISHED, StepEnd
from pegasus.task import Event, TaskFSM
from pegasus.task.models import Plan, PlanStep

NAME = "checkpoint"


def _plan(steps: int) -> Plan:
    tool_steps = [PlanStep(index=i, description=f"echo step {i}", action_type="tool_call",
                           action_params={"tool": "echo", "args": {"text": f"step {i} of the benchmark"}})
                  for i in range(steps)]
    respond = PlanStep(index=steps, description="respond", action_type="respond", action_params={})
    return Plan(goal="a long task", steps=[*tool_steps, respond], reasoning=f"{steps} echo calls, then respond")


def measure(steps: int) -> dict[str, Any]:
    processors = offline_processors()
    with state_dir() as state:
        store = Store(state / "pegasus.db")
        fsm = TaskFSM.create(machine="classic", input_text="echo step 0 of the benchmark")
        task_id = fsm.task_id
        store.create_task({"task_id": task_id, "machine": "classic", "cognitive_state": fsm.state, "priority": 5,
                           "seq": 1, "input": fsm.context.input_text, "source": "bench", "metadata": {}},
                          encode_full(fsm.snapshot()))
        for source, target, event in (("draft", "approved", "TASK_APPROVED"), ("approved", "queued", "TASK_QUEUED"),
                                      ("queued", "running", "TASK_STARTED")):
            store.lifecycle_transition(task_id, source, target, event, actor="bench", reason="bench", run=1)
        checkpointer = Checkpointer(fsm.snapshot())
        writes: list[float] = []
        journal: list[float] = []
        step_bytes: list[int] = []

        def apply(event_type: str, payload: dict[str, Any], stage: str, finish: StepEnd | None) -> None:
            source = fsm.state
            target = fsm.transition(Event(type=event_type, payload=payload))
            kind = kind_for(target, event_type)
            checkpoint = (kind, checkpointer.make(kind, fsm.snapshot())) if kind else None
            detail = {"stage": stage, "pool": "tool" if stage == "act" else "llm", "index": 0, "pid": 1,
                      "host": "bench", "started": time.time(), "finished": time.time(), "ok": True, "error": None}
            began = time.perf_counter()
            store.cognitive_transition(task_id, 1, "classic", source, target, event_type, detail, checkpoint, finish)
            writes.append(time.perf_counter() - began)

        apply("TASK_CREATED", {}, "none", None)
        for stage in ("perceive", "think"):
            outcome = run_stage(processors, stage, fsm.context, machine="classic")
            apply(str(outcome.event_type), outcome.payload, stage, None)
        apply("PLAN_DONE", {"plan": _plan(steps).model_dump(mode="json")}, "plan", None)
        while fsm.state == "acting":
            step = fsm.context.plan.current_step
            key = f"{task_id}/a1.0/i0/s{step.index}"
            before = store.bytes_for(task_id)
            began = time.perf_counter()
            store.journal_start(key, task_id, 1, step.index, step.action_params.get("tool"), "effectful")
            journal.append(time.perf_counter() - began)
            outcome = run_stage(processors, "act", fsm.context, machine="classic", step_index=step.index)
            finish = StepEnd(key, FINISHED, msgpack.packb({"event_type": str(outcome.event_type),
                                                           "payload": outcome.payload}, use_bin_type=True),
                             step.index, step.action_params.get("tool"), "effectful")
            apply(str(outcome.event_type), outcome.payload, "act", finish)
            step_bytes.append(store.bytes_for(task_id) - before)
        outcome = run_stage(processors, "reflect", fsm.context, machine="classic")
        apply(str(outcome.event_type), outcome.payload, "reflect", None)
        full_context = len(encode_full(fsm.snapshot()))
        db_bytes = sum(p.stat().st_size for p in state.glob("pegasus.db*"))
        store.close()
    tool_steps = step_bytes[:-1]  # the last act step is the respond step
    first, last = tool_steps[:10], tool_steps[-10:]
    return {"steps": steps, "final_state": fsm.state, "transitions": len(writes),
            "cognitive_transition": summary_ms(writes), "journal_start": summary_ms(journal),
            "bytes_per_step_first10_mean": round(sum(first) / len(first), 1),
            "bytes_per_step_last10_mean": round(sum(last) / len(last), 1),
            "bytes_per_step_max": max(tool_steps), "bytes_per_step_p50": percentile([float(b) for b in tool_steps], 50),
            "full_context_bytes_at_end": full_context, "db_files_bytes": db_bytes}


CLASSIC = (("idle", "perceiving", "TASK_CREATED", None), ("perceiving", "thinking", "PERCEIVE_DONE", None),
           ("thinking", "planning", "THINK_DONE", None), ("planning", "acting", "PLAN_DONE", "delta"),
           ("acting", "acting", "TOOL_CALL_COMPLETED", "delta"), ("acting", "reflecting", "TOOL_CALL_COMPLETED", "delta"),
           ("reflecting", "completed", "REFLECT_DONE", "full"))  # a classic task's run: its reports, in order
UP = (("draft", "approved", "TASK_APPROVED"), ("approved", "queued", "TASK_QUEUED"), ("queued", "running", "TASK_STARTED"))
DOWN = (("running", "verifying", "EXECUTION_COMPLETE"), ("verifying", "verified", "TASK_VERIFIED"),
        ("verified", "done", "TASK_DONE"))


class Calls:
    """The connection, with its ``execute`` and ``executemany`` calls counted by what they do."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db, self.calls = db, Counter[str]()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    def execute(self, sql: str, *params: Any) -> sqlite3.Cursor:
        self.calls[statement_kind(sql)] += 1
        return self._db.execute(sql, *params)

    def executemany(self, sql: str, rows: Any) -> sqlite3.Cursor:
        self.calls[statement_kind(sql)] += 1
        return self._db.executemany(sql, rows)


def statement_kind(sql: str) -> str:
    """"INSERT transitions", "UPDATE tasks", "SELECT journal", "SAVEPOINT", ...: what a statement does, and where."""
    words = sql.split()
    verb = words[0].upper()
    if verb == "INSERT":
        return f"INSERT {words[words.index('INTO') + 1] if 'INTO' in words else '?'}"
    if verb in ("UPDATE", "DELETE", "SELECT"):
        found = re.search(r"(?:UPDATE|FROM)\s+(\w+)", sql, re.IGNORECASE)
        return f"{verb} {found.group(1) if found else '?'}"
    return verb


def wal_pages(path: Path, page_size: int) -> int:
    wal = path.with_name(path.name + "-wal")
    return max(0, (wal.stat().st_size - 32) // (page_size + 24)) if wal.exists() else 0


def classic_task(store: Store, seq: int, together: bool) -> None:
    """The supervisor's store writes of one classic task's life: submitted and started (one commit),
    its reports (in one commit when ``together``, else one each), done (with the last report)."""
    writes = _task_writes(store, seq)
    with store.group():
        next(writes)  # created and started
    for index in range(len(CLASSIC)):
        if not together or index == 0:
            store.hold()
        next(writes, None)
        if not together or index == len(CLASSIC) - 1:
            store.release()


def statements(tasks: int, together: bool) -> dict[str, Any]:
    """What ``tasks`` classic tasks cost the store, per task (after one to warm up): statements SQLite ran
    (``set_trace_callback``, without those FTS5 runs inside them), calls into sqlite3 by kind, WAL pages."""
    with state_dir() as state:
        store = Store(state / "pegasus.db")
        store.db.execute("PRAGMA wal_autocheckpoint = 0")  # the WAL grows: its pages are counted
        page_size = int(store.db.execute("PRAGMA page_size").fetchone()[0])
        classic_task(store, 1, together)
        traced: list[str] = []
        store.db.set_trace_callback(traced.append)
        calls = Calls(store.db)
        store.db = calls  # type: ignore[assignment]
        pages = wal_pages(store.path, page_size)
        for seq in range(2, tasks + 2):
            classic_task(store, seq, together)
        pages = wal_pages(store.path, page_size) - pages
        store.db = calls._db
        store.close()
    ran = [s for s in traced if not s.startswith("--")]  # "--": run by FTS5 inside a statement
    kinds = Counter(statement_kind(s) for s in ran)
    return {"statements_per_task": round(len(ran) / tasks, 2), "calls_per_task": round(sum(calls.calls.values()) / tasks, 2),
            "wal_pages_per_task": round(pages / tasks, 2),
            "statements_by_kind": {k: round(v / tasks, 2) for k, v in kinds.most_common()},
            "calls_by_kind": {k: round(v / tasks, 2) for k, v in calls.calls.most_common()}}


def _created_and_started(store: Store, fsm: TaskFSM, seq: int, full: bytes) -> None:
    """A classic task's row, its first checkpoint (``full``) and the lifecycle up to running."""
    store.create_task({"task_id": fsm.task_id, "machine": "classic", "cognitive_state": "idle", "priority": 5,
                       "seq": seq, "input": fsm.context.input_text, "source": "bench", "metadata": {}}, full)
    for source, target, event in UP:
        store.lifecycle_transition(fsm.task_id, source, target, event, actor="system", reason=event.lower(), run=1,
                                   updates={"cognitive_state": "idle", "runs": 1})


def _task_writes(store: Store, seq: int, task_id: str | None = None) -> Iterator[None]:
    """``classic_task``'s writes of one task, with each report its own step (the caller commits): created and
    started, then one report a step, the last with the task's end."""
    fsm = TaskFSM.create(machine="classic", input_text=f"what is {seq} + 1?", task_id=task_id)
    task_id, full = fsm.task_id, encode_full(fsm.snapshot())
    _created_and_started(store, fsm, seq, full)
    delta = msgpack.packb({"format": 1, "delta": {"k": {"actions_done": {"+": [{"step_index": 0}]}}}, "metadata": {}})
    detail = {"stage": "act", "pool": "tool", "index": 0, "pid": 1, "started": 1.0, "finished": 1.1, "ok": True}
    for source, target, event, kind in CLASSIC:
        yield
        checkpoint = (kind, full if kind == "full" else delta) if kind else None
        store.cognitive_transition(task_id, 1, "classic", source, target, event, detail, checkpoint, None)
    for source, target, event in DOWN:
        store.lifecycle_transition(task_id, source, target, event, actor="system", reason=event.lower(), run=1,
                                   updates={"cognitive_state": "completed", "runs": 1,
                                            "result": f"{seq} + 1 = {seq + 1}" if target == "done" else None})


def in_flight_pages(ids: Callable[[], str], tasks: int, in_flight: int = 32, per_commit: int = 8,
                    stored: int = 0) -> float:
    """WAL pages a task when ``in_flight`` classic tasks' reports interleave, ``per_commit`` of them a commit
    (a task ended starts the next), after ``stored`` tasks written the same way; task ids from ``ids``.
    Where a task's rows land in the indexes led by its id decides how many pages a commit dirties."""
    with state_dir() as state:
        store = Store(state / "pegasus.db")
        store.db.execute("PRAGMA wal_autocheckpoint = 0")  # the WAL grows: its pages are counted
        page_size = int(store.db.execute("PRAGMA page_size").fetchone()[0])
        seq = itertools.count(1)
        for count in (stored, tasks):
            pages = wal_pages(store.path, page_size)
            live: list[Iterator[None]] = []
            left, reports = count, 0
            store.hold()
            while left or live:
                while left and len(live) < in_flight:
                    task = _task_writes(store, next(seq), ids())
                    next(task)
                    live.append(task)
                    left -= 1
                task = live.pop(0)
                if next(task, StopIteration) is not StopIteration:
                    live.append(task)
                reports += 1
                if reports % per_commit == 0:
                    store.release()
                    store.hold()
            store.release()
        pages = wal_pages(store.path, page_size) - pages
        store.close()
    return round(pages / tasks, 2)


def run(quick: bool) -> dict[str, Any]:
    steps = 40 if quick else 200
    result = measure(steps)
    write, journal = result["cognitive_transition"], result["journal_start"]
    growth = result["bytes_per_step_last10_mean"] / result["bytes_per_step_first10_mean"]
    result["bytes_per_step_growth"] = round(growth, 3)
    tasks = 20 if quick else 200
    result["store_per_task_reports_together"] = together = statements(tasks, together=True)
    result["store_per_task_reports_alone"] = alone = statements(tasks, together=False)
    checks = [
        check("transition write p50 (cognitive_transition)", write["p50_ms"], "ms", "<= 1", write["p50_ms"] <= 1.0),
        check("transition write p99", write["p99_ms"], "ms"),
        check("journal_start write p50 / p99", f"{journal['p50_ms']} / {journal['p99_ms']}", "ms"),  # type: ignore[arg-type]
        check(f"bytes per step, first 10 -> last 10 of {steps}",
              f"{result['bytes_per_step_first10_mean']:g} -> {result['bytes_per_step_last10_mean']:g}", "B",  # type: ignore[arg-type]
              "flat (last/first <= 1.1)", growth <= 1.1),
        check(f"full context at step {steps} (not written per step)", result["full_context_bytes_at_end"], "B"),
        *[check(f"store per classic task, reports {shape}: SQL statements / sqlite3 calls / WAL pages",
                f"{figures['statements_per_task']:g} / {figures['calls_per_task']:g} / "  # type: ignore[arg-type]
                f"{figures['wal_pages_per_task']:g}", "")
          for shape, figures in (("in one commit", together), ("each alone", alone))],
    ]
    return {"figures": result, "checks": checks, "notes": [
        "checkpoint: Store calls timed with perf_counter on a real WAL file (synchronous=NORMAL), one process, "
        "no actor system; 'bytes per step' = growth of Store.bytes_for(task) across one tool step "
        "(delta checkpoint + transition row + journal row).",
        "checkpoint: 'store per classic task' = what the supervisor's store runs for one classic task's life (submit, "
        "seven reports, done; memory's writes not included): SQL statements counted by set_trace_callback, calls "
        "into sqlite3 (an executemany is one): exact; WAL pages appended: within ~10% (where random task ids land)."]}
