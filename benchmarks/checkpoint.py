"""Scenario 4, checkpoint cost: the store writes of one transition, timed directly.

A classic task with a 200-step plan (echo tool calls, then respond) is driven through its TaskFSM in this
process as its task actor drives it (the same processors, ``Checkpointer`` and ``kind_for``), each write
made on a real SQLite file (WAL) as the supervisor makes it: ``Store.journal_start`` before each tool step,
``Store.cognitive_transition`` (one transaction) after every transition.  Bytes per step: the growth of
the task's payload bytes in the store (``Store.bytes_for``) across one step.
"""

from __future__ import annotations

import time
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


def run(quick: bool) -> dict[str, Any]:
    steps = 40 if quick else 200
    result = measure(steps)
    write, journal = result["cognitive_transition"], result["journal_start"]
    growth = result["bytes_per_step_last10_mean"] / result["bytes_per_step_first10_mean"]
    result["bytes_per_step_growth"] = round(growth, 3)
    checks = [
        check("transition write p50 (cognitive_transition)", write["p50_ms"], "ms", "<= 1", write["p50_ms"] <= 1.0),
        check("transition write p99", write["p99_ms"], "ms"),
        check("journal_start write p50 / p99", f"{journal['p50_ms']} / {journal['p99_ms']}", "ms"),  # type: ignore[arg-type]
        check(f"bytes per step, first 10 -> last 10 of {steps}",
              f"{result['bytes_per_step_first10_mean']:g} -> {result['bytes_per_step_last10_mean']:g}", "B",  # type: ignore[arg-type]
              "flat (last/first <= 1.1)", growth <= 1.1),
        check(f"full context at step {steps} (not written per step)", result["full_context_bytes_at_end"], "B"),
    ]
    return {"figures": result, "checks": checks, "notes": [
        "checkpoint: Store calls timed with perf_counter on a real WAL file (synchronous=NORMAL), one process, "
        "no actor system; 'bytes per step' = growth of Store.bytes_for(task) across one tool step "
        "(delta checkpoint + transition row + journal row)."]}
