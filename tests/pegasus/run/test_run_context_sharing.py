"""The task-run core shares a passivated run's context instead of copying it (issue 33: the copy on
every activation was ~20% of a task actor's handler CPU), and a snapshot stays the value it was."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pegasus import codec
from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.run import (
    Answered,
    AskRecall,
    MemoriesRecalled,
    MessagesSent,
    RunSnapshot,
    SendStage,
    TaskRun,
)
from pegasus.task import TaskFSM
from pegasus.task.names import CognitiveState as S
from tests.pegasus.conftest import FixedClock, Ids, start_run

FACT = {"id": "fact:k@1", "kind": "fact", "title": "k", "text": "The key is in the vault.", "score": 1.0}


def answer(send: SendStage, event_type: str | None, payload: dict[str, Any], token: int | None = None) -> Any:
    return SimpleNamespace(task_id=send.task_id, token=send.token if token is None else token, stage=send.stage,
                           ok=event_type is not None, event_type=event_type, payload=payload, error=None,
                           error_kind="", worker={})


def test_an_activation_that_changes_nothing_keeps_the_held_context_itself() -> None:
    held = RunSnapshot(TaskFSM.create("classic", "what is 1 + 1?", task_id="t1").snapshot(), 1, 5)
    run, out = start_run(held, clock=FixedClock(), ids=Ids())
    held = run.snapshot()
    [send] = [c for c in out if isinstance(c, SendStage)]
    run = TaskRun(held, clock=FixedClock(), ids=Ids())
    run.step(Answered(answer(send, "PERCEIVE_DONE", {}, token=send.token - 1)))  # stale: dropped
    assert run.snapshot().task.context is held.task.context


def test_every_held_snapshot_stays_what_it_was_while_the_run_goes_on_from_it() -> None:
    """Recall, messages (suspend and re-think) and every stage of a classic task, passivated between
    every two inputs as the task actor does: no snapshot a carrier held is changed afterwards."""
    processors = offline_processors(timer=lambda: 0.0)
    clock, ids = FixedClock(), Ids()
    task = TaskFSM.create("classic", "what is 2 + 3 * 4?", task_id="t1", clock=clock, id_factory=ids)
    run, out = start_run(RunSnapshot(task.snapshot(), 1, 5, recall_k=3), clock=clock, ids=ids)
    kept: list[tuple[RunSnapshot, bytes]] = []
    messages = 0
    while not run.stopped:
        held = run.snapshot()
        kept.append((held, codec.encode(held.task)))
        run = TaskRun(held, clock=clock, ids=ids)
        [ask] = [c for c in out if isinstance(c, AskRecall)] or [None]
        if ask is not None:
            out = run.step(MemoriesRecalled(SimpleNamespace(task_id="t1", token=ask.token, identity="I am.",
                                                            items=(FACT,), error=None)))
            continue
        if messages < 1:  # a message while a stage is in flight: taken at its answer (suspend, re-think)
            messages += 1
            run.step(MessagesSent("t1", ((1, "and add 1"),)))
            waiting = run.snapshot()
            assert waiting.task.context is held.task.context  # kept in the inbox: the context is not copied
            held = waiting
            kept.append((held, codec.encode(held.task)))
            run = TaskRun(held, clock=clock, ids=ids)
        [send] = [c for c in out if isinstance(c, SendStage)]
        outcome = run_stage(processors, send.stage, send.context, machine=send.machine, step_index=send.step_index)
        out = run.step(Answered(answer(send, outcome.event_type, outcome.payload)))
    assert run.fsm.state == S.COMPLETED and run.fsm.context.messages_taken == 1 and len(kept) >= 8
    assert [codec.encode(held.task) for held, _ in kept] == [data for _, data in kept]
