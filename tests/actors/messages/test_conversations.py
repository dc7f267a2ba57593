"""Every message of every conversation survives pickling (Thespian sends them pickled), with a sample of each.

A message class added to a conversation without a sample here fails
``test_every_message_of_a_conversation_has_a_sample``: its round trip is then
written, not forgotten.
"""

from __future__ import annotations

import dataclasses
import inspect
import pickle
from types import ModuleType
from typing import Any

import pytest
from pydantic import BaseModel
from thespian.actors import ActorAddress
from thespian.system.transport.IPBase import TCPv4ActorAddress

from actors.messages import contact, gateway, mcp, recall, stage_work, supervision, task_messages, task_run, triggers
from pegasus.requests import base, memory, tasks, tokens, triggers as request_triggers
from pegasus.admission import TransitionNotice
from pegasus.streaming import TextDelta
from pegasus.config import Gate, Settings
from pegasus.run import ChildStep
from pegasus.store.journal import StepEnd
from pegasus.task import TaskFSM
from pegasus.task.models import Plan, PlanStep
from pegasus.tools.mcp_policy import ServerView

ADDRESS = ActorAddress(TCPv4ActorAddress("127.0.0.1", 40001, external=False))


def _fsm() -> TaskFSM:
    fsm = TaskFSM.create("classic", "echo hi", task_id="t1")
    fsm.context.plan = Plan(goal="g", steps=[PlanStep(index=0, description="echo", action_params={"tool": "echo"})])
    return fsm


def _samples() -> dict[ModuleType, list[Any]]:
    fsm, settings = _fsm(), Settings()
    request = stage_work.StageRequest("t1", 2, "act", "classic", fsm.context, 0, idempotency_key="t1/a1.0/i0/s0",
                                      journal_to=ADDRESS, run=1)
    result = stage_work.StageResult("t1", 2, "act", True, "TOOL_CALL_COMPLETED", {"result": {"ok": 1}},
                                    worker={"pid": 7})
    moved = task_run.TaskTransitioned("t1", 1, "acting", "reflecting", "TOOL_CALL_COMPLETED", "2026-01-01T00:00:00+00:00",
                                      {"stage": "act"}, ("delta", b"\x81"),
                                      StepEnd("t1/a1.0/i0/s0", "finished", b"\x80", 0, "echo", "effectful"), 42)
    return {
        tasks: [
            base.Request(request_id="r"), tasks.Configure(request_id="c", settings=settings),
            tasks.Submit(text="echo hi", machine="reason_act", priority=2, metadata={"a": [1]}, key="k"),
            tasks.SubmitMany(tasks=[tasks.Submit(text="a"), tasks.Submit(text="b")]),
            tasks.Get(task_id="t1"), tasks.ListTasks(state="done", limit=5), tasks.History(task_id="t1"),
            tasks.Suspend(task_id="t1"), tasks.Resume(task_id="t1", message="more"),
            tasks.Cancel(task_id="t1"), tasks.Approve(task_id="t1"), tasks.Retry(task_id="t1"),
            tasks.Subscribe(task_id="t1"), tasks.Unsubscribe(), tasks.Stats(), tasks.StoreStatus(),
            tasks.Backup(path="/tmp/b.db"), tasks.Locate(request_id="l"),
            base.Reply("r", True, data={"task_id": "t1"}), base.Reply("r", False, error="no", error_type="X"),
            tasks.Tree(task_id="t1"), tasks.TaskContextRequest(task_id="t1"),
            tasks.SendMessage(task_id="t1", text="only papers from 2024"),
            tasks.ListTasks(text="quarterly report", metadata={"team": "ops"}), tasks.TaskLog(task_id="t1", after=3),
            tasks.DeleteTask(task_id="t1"), tasks.Purge(older_than_days=30.0, state="done"),
            TransitionNotice("t1", "lifecycle", "draft", "approved", "TASK_APPROVED", "now", {"reason": "auto"}),
            TextDelta("t1", 4, "reason", 1, '{"answer": "4', 2),
        ],
        base: [base.Request(request_id="r"), base.Reply("r", True, data={"task_id": "t1"})],
        task_run: [
            task_run.ConfigureTaskActor(settings),
            task_run.StartTask(fsm.snapshot(), 1, ADDRESS, ADDRESS, "MESSAGE_RECEIVED", {"text": "x"}, "1.0",
                               {"k": {"status": "finished"}}),
            task_run.StartTasks((task_run.StartTask(fsm.snapshot(), 1, ADDRESS, ADDRESS, task_id="t1"),
                                 task_run.StartTask(fsm.snapshot(), 2, ADDRESS, ADDRESS, task_id="t1"))),
            task_run.SuspendTask("t1", "wait"), moved, task_run.DropTask("t1", 1),
            task_run.TaskAbandoned("t1", 1, "unreadable"),
            task_run.TaskReports((moved,), 0.25), task_run.TaskStopped("t1", 1, "completed", fsm.snapshot(), None),
            task_run.TaskStopped("t1", 1, "acting", fsm.snapshot(), None,
                                 (ChildStep("t1/a1.0/i0/s0", 0, {"text": "echo hi", "priority": 3}),)),
        ],
        stage_work: [
            request, result, stage_work.StageRequest("t1", 1, "gate", gate=Gate(name="lint", command=["true"])),
            stage_work.StageRequest("memory-vectors", 1, "embed_rows", texts=("a fact", "an episode"), timeout_s=15.0),
            stage_work.StepStarting("t1/a1.0/i0/s0", "t1", 1, 0, "echo", 3),
            stage_work.StepGo("t1/a1.0/i0/s0", 3, False, reason="the run is over", existing={"status": "started"}),
            stage_work.PoolConfig("llm", 3, 100, 120.0, settings, 1), stage_work.WorkerInit("tool", 0, settings),
            stage_work.WorkerReady(0, 1234, "host"), stage_work.Work(5, request, ADDRESS),
            stage_work.WorkDone(5, result, {"usage": {"calls": 1}}), stage_work.PoolStatsRequest(9),
            stage_work.PoolStats(9, "llm", 3, 1, 0, 0, [{"index": 0}], [{"name": "m"}]), stage_work.CancelTask("t1"),
            stage_work.StopStage(5), stage_work.Work(6, request, ADDRESS, held=True), stage_work.HeldStart(6),
            stage_work.HeldGo(6, False),
        ],
        supervision: [supervision.RestartDue(2), supervision.RetryDue("t1"), supervision.StoreProbe(),
                      supervision.TaskActorsDue(), supervision.PoolDue("llm"), supervision.PoolsCheck(),
                      supervision.StatsDue(3), supervision.CommitDue(), supervision.PoolReady("tool", 4242),
                      supervision.PoolReplaced("llm", "new address", "dead address"),
                      supervision.ChildTrouble("KeyError: 'x'"), supervision.KeeperDue(),
                      supervision.RetentionDue()],
        mcp: [mcp.McpSubscribe(settings), mcp.McpListing({"git": ServerView("ready", ({"name": "git_log"},), "")}),
              mcp.McpCall(1, "git", "git_log", {"repo_path": "."}), mcp.McpAnswer(1, True, "log"),
              mcp.McpAnswer(2, False, None), mcp.McpHeld((1, 2)), mcp.McpHeldAnswer((1, 2), (2,))],
        task_messages: [task_messages.MessageTask("t1", 2, ((1, "only papers from 2024"),))],
        contact: [contact.WorkerPing(12.5), contact.WorkerPong(12.5)],
        request_triggers: [request_triggers.ScheduleAdd(name="tidy", text="tidy up", cron="0 3 * * *", tz="Europe/Paris",
                                        overlap="buffer_one", catchup="1h"),
                           request_triggers.ScheduleList(),
                           request_triggers.SchedulePause(name="tidy"), request_triggers.ScheduleResume(name="tidy"),
                           request_triggers.ScheduleTrigger(name="tidy"), request_triggers.ScheduleRemove(name="tidy"),
                           request_triggers.WebhookAdd(name="gh", text="Review {pull_request.title}", secret_file="/tmp/s"),
                           request_triggers.WebhookList(), request_triggers.WebhookRemove(name="gh"),
                           request_triggers.DeliverWebhook(name="gh", headers={"X-GitHub-Delivery": "d1"},
                                                           body=b'{"a": 1}')],
        triggers: [triggers.ScheduleDue(1700000000.0)],
        tokens: [tokens.TokenCreate(name="ci", scope="submit", token_hash="ab" * 32), tokens.TokenList(),
                 tokens.TokenRevoke(name="ci")],
        gateway: [gateway.StartGateway("/tmp/state"), gateway.GatewayCheck(start=True)],
        memory: [memory.MemoryList(prefix="ops/"), memory.MemorySearch(text="deploy key", k=3, query_vector=[0.5, 1.0]),
                 memory.MemoryShow(item_id="fact:ops/key@2"), memory.MemoryWrite(path="ops/key", content="vault"),
                 memory.MemoryForget(item_id="episode:3"), memory.MemoryExport(after_episode=500),
                 memory.MemoryImport(facts=[{"path": "a", "version": 1, "content": "x", "created_at": "now",
                                             "task_id": None}], episodes=[])],
        recall: [recall.AskRecall("t1", 2, 7, "where is the deploy key?", 5),
                 recall.Recalled("t1", 7, "You are Pegasus.", ({"id": "fact:deploy-key@1", "kind": "fact",
                                                                "title": "deploy-key", "text": "vault", "score": 1.0},)),
                 recall.Recalled("t1", 8, "", (), error="StoreError: locked"),
                 recall.RecallVectorDue("t1", 9), recall.VectorsDue()],
    }


def _message_classes(module: ModuleType) -> set[type]:
    """The messages a conversation defines: its public classes (not those it imports, nor pydantic's
    ``Request[R]`` parametrizations, which it registers in the module)."""
    return {cls for name, cls in inspect.getmembers(module, inspect.isclass)
            if cls.__module__ == module.__name__ and not name.startswith("_") and "[" not in name}


CONVERSATIONS = [base, tasks, memory, tokens, request_triggers, task_run, stage_work, supervision, mcp, triggers, contact,
                 gateway, recall, task_messages]


def _same(one: Any, other: Any) -> bool:
    if dataclasses.is_dataclass(one) or isinstance(one, BaseModel):
        return type(one) is type(other) and one == other
    return one == other


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=lambda module: module.__name__.removeprefix("actors.").replace(".", "_"))
def test_every_message_of_a_conversation_round_trips_through_pickle(conversation: ModuleType) -> None:
    for message in _samples()[conversation]:
        again = pickle.loads(pickle.dumps(message))
        assert _same(again, message), type(message).__name__
        assert type(again).__module__ == type(message).__module__  # Thespian finds it by module path


@pytest.mark.parametrize("conversation", CONVERSATIONS, ids=lambda module: module.__name__.removeprefix("actors.").replace(".", "_"))
def test_every_message_of_a_conversation_has_a_sample(conversation: ModuleType) -> None:
    sampled = {type(message) for message in _samples()[conversation]}
    assert _message_classes(conversation) <= sampled, _message_classes(conversation) - sampled
