"""Recall before think / reason in the task-run core (issue 19), without an actor system: the stage waits
for the supervisor's memories, records them in the context and in its transition, and a stale answer is dropped."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from pegasus import codec
from pegasus.run import Answered, MemoriesRecalled, SuspendAsked, AskRecall, Command, RunSnapshot, SendStage, TaskRun, TaskTransitioned
from pegasus.run.recall import needs_recall, recall_query
from pegasus.task import TaskFSM
from pegasus.task.models import Recall, TaskContext, TaskSnapshot
from pegasus.task.names import CognitiveState as S, StageName
from tests.pegasus.conftest import FixedClock, Ids, start_run

FACT = {"id": "fact:deploy-key@1", "kind": "fact", "title": "deploy-key", "text": "The deploy key is in the vault.",
        "score": 1.5}


def begin(task: TaskFSM, recall_k: int = 5, identity: str = "") -> tuple[TaskRun, list[Command]]:
    run, commands = start_run(RunSnapshot(task.snapshot(), 1, 5, recall_k=recall_k, identity=identity),
                                  clock=FixedClock(), ids=Ids())
    assert run is not None
    return run, commands


def of(kind: type, commands: list[Command]) -> list[Any]:
    return [command for command in commands if isinstance(command, kind)]


def recalled(ask: AskRecall, items: tuple[dict[str, Any], ...] = (FACT,), **fields: Any) -> SimpleNamespace:
    return SimpleNamespace(**{"task_id": ask.task_id, "token": ask.token, "identity": "I am Pegasus.",
                              "items": items, "error": None, **fields})


def answered(send: SendStage, event_type: str, payload: dict[str, Any]) -> SimpleNamespace:
    return SimpleNamespace(task_id=send.task_id, token=send.token, stage=send.stage, ok=True, event_type=event_type,
                           payload=payload, error=None, error_kind="", worker={})


def test_a_reason_stage_waits_for_its_memories_and_gets_them_in_its_context() -> None:
    run, commands = begin(TaskFSM.create("reason_act", "where is the deploy key?", task_id="t1"))
    [ask] = of(AskRecall, commands)
    assert of(SendStage, commands) == []  # the stage waits for the recall
    assert (ask.query, ask.k) == ("where is the deploy key?", 5)
    [send] = of(SendStage, run.step(MemoriesRecalled(recalled(ask))))
    assert send.stage == StageName.REASON and send.token > ask.token
    assert send.context.recall.identity == "I am Pegasus."
    assert send.context.recall.ids == ["fact:deploy-key@1"]
    plan = {"goal": "g", "steps": [{"index": 0, "description": "respond", "action_type": "respond"}]}
    out = run.step(Answered(answered(send, "REASON_DONE", {"reasoning": {}, "plan": plan})))
    [moved] = of(TaskTransitioned, out)
    assert moved.stage["memories"] == ["fact:deploy-key@1"]  # the history says what the stage was given
    assert of(AskRecall, out) == []  # acting next: no recall


def test_a_classic_task_recalls_before_think_once_per_iteration() -> None:
    run, commands = begin(TaskFSM.create("classic", "count the lines in README.md", task_id="t1"))
    [perceive] = of(SendStage, commands)
    assert of(AskRecall, commands) == []  # perceive does not recall
    out = run.step(Answered(answered(perceive, "PERCEIVE_DONE", {"perception": {"intents": [{"tool": "count"}]}})))
    [ask] = of(AskRecall, out)
    assert "count the lines in README.md" in ask.query
    [think] = of(SendStage, run.step(MemoriesRecalled(recalled(ask, items=()))))
    assert think.stage == StageName.THINK and think.context.recall.memories == []
    assert not needs_recall(StageName.THINK, think.context, 5)  # iteration 0 has its recall
    think.context.iteration = 1
    assert needs_recall(StageName.THINK, think.context, 5)  # a new iteration recalls again


def test_a_stale_or_late_recall_is_dropped() -> None:
    run, commands = begin(TaskFSM.create("reason_act", "x", task_id="t1"))
    [ask] = of(AskRecall, commands)
    assert of(SendStage, run.step(MemoriesRecalled(recalled(ask, token=ask.token - 1)))) == []
    out = run.step(SuspendAsked("t1", "by request"))
    assert [(r.from_state, r.to_state) for r in of(TaskTransitioned, out)] == [(S.REASONING, S.SUSPENDED)]
    assert of(SendStage, run.step(MemoriesRecalled(recalled(ask)))) == []  # the task moved on: nothing applied


def test_a_failed_recall_lets_the_stage_run_without_memories() -> None:
    run, commands = begin(TaskFSM.create("reason_act", "x", task_id="t1"))
    [ask] = of(AskRecall, commands)
    [send] = of(SendStage, run.step(MemoriesRecalled(recalled(ask, items=(), identity="", error="StoreError: locked"))))
    assert send.context.recall.error == "StoreError: locked" and send.context.recall.memories == []


def test_with_recall_off_the_stage_goes_at_once_with_the_identity_it_was_started_with() -> None:
    _, commands = begin(TaskFSM.create("reason_act", "x", task_id="t1"), recall_k=0, identity="You are Atlas.")
    [send] = of(SendStage, commands)
    assert of(AskRecall, commands) == [] and send.stage == StageName.REASON
    assert (send.context.recall.identity, send.context.recall.memories) == ("You are Atlas.", [])


def test_the_recall_survives_passivation_and_a_checkpoint_of_an_older_version_loads() -> None:
    run, commands = begin(TaskFSM.create("reason_act", "x", task_id="t1"))
    [ask] = of(AskRecall, commands)
    run.step(MemoriesRecalled(recalled(ask)))
    again = TaskRun(run.snapshot())
    assert again.fsm.context.recall == run.fsm.context.recall and again.recall_k == 5
    old = run.fsm.snapshot().model_dump(mode="json")
    del old["context"]["recall"]  # written before issue 19
    assert TaskSnapshot.model_validate(codec.unpack(codec.pack(old))).context.recall is None


def test_the_query_holds_the_input_the_users_messages_and_the_perception() -> None:
    context = TaskContext(input_text="deploy", messages=[{"role": "user", "content": "the key"},
                                                         {"role": "system", "content": "not this"}],
                          perception={"summary": "find the vault", "task_type": "tool_use", "sources": ["input"]})
    assert recall_query(context) == "deploy the key find the vault"
    assert Recall().ids == []
