"""TaskRun.step never raises, whatever comes in and in whatever order (issue 30: one core shape).

Answers with any event type, token, task or error kind, suspends, messages and streamed text, in
random sequences: every step returns commands, the run stays restorable from its snapshot, and its
token never goes back."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st

from pegasus.run import (
    Answered, MemoriesRecalled, MessagesSent, RunSnapshot, SendStage, Streamed, SuspendAsked, TaskRun,
)
from pegasus.streaming import TextDelta
from pegasus.task import TaskFSM
from pegasus.task.events import EventType
from tests.pegasus.conftest import FixedClock, Ids
from tests.pegasus.run.test_task_run import EFFECTS, acting, begin

EVENTS = st.sampled_from([None, *[str(event) for event in EventType], "NOT_AN_EVENT"])
KINDS = st.sampled_from(["", "timeout", "worker_died", "queue_full", "exception", "not_started", "odd"])
VALUES = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.just({"step_index": 0, "success": False}))
PAYLOADS: st.SearchStrategy[dict[str, Any]] = st.one_of(
    st.just({}), st.dictionaries(st.sampled_from(["result", "exit_reason", "plan", "journal"]), VALUES))


@st.composite
def inputs(draw: Any, run: TaskRun) -> Any:
    token = draw(st.sampled_from([run.token, run.token - 1, run.token + 1]))
    task_id = draw(st.sampled_from(["t1", "t9"]))
    kind = draw(st.sampled_from(["answer", "recall", "suspend", "message", "delta"]))
    if kind == "answer":
        event = draw(EVENTS)
        return Answered(SimpleNamespace(task_id=task_id, token=token, stage=draw(st.sampled_from(["act", "think"])),
                                        ok=event is not None, event_type=event, payload=draw(PAYLOADS),
                                        error=draw(st.one_of(st.none(), st.text(max_size=5))),
                                        error_kind=draw(KINDS), worker={}))
    if kind == "recall":
        return MemoriesRecalled(SimpleNamespace(task_id=task_id, token=token, identity="", items=(),
                                                error=draw(st.one_of(st.none(), st.just("down")))))
    if kind == "suspend":
        return SuspendAsked(task_id, "hold")
    if kind == "message":
        return MessagesSent(task_id, ((draw(st.integers(1, 3)), "more"),))
    return Streamed(TextDelta(task_id, token, "think", 1, "x"))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), start=st.sampled_from(["new", "acting"]))
def test_step_never_raises_and_the_run_stays_restorable(data: st.DataObject, start: str) -> None:
    task = TaskFSM.create("classic", "x", task_id="t1") if start == "new" else acting("append_key")
    run, _ = begin(task)
    for _ in range(data.draw(st.integers(1, 12))):
        before = run.token
        commands = run.step(data.draw(inputs(run)))
        assert isinstance(commands, list)
        assert run.token >= before
        if run.stopped:
            break
        again = TaskRun(run.snapshot(), effect_of=EFFECTS.get, clock=FixedClock(), ids=Ids())  # type: ignore[arg-type]
        assert again.unreadable is None and again.token == run.token
        run = again
    if not run.stopped:  # a run that goes on has asked for its next stage with the current token, or waits
        assert all(command.token == run.token for command in commands if isinstance(command, SendStage))
        assert isinstance(run.snapshot(), RunSnapshot)
