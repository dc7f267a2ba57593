"""Supervisor, task actor and pools on simpleSystemBase: one process, fast.

simpleSystemBase passes messages by reference; these tests never mutate a
message after sending it, and the multi-process behaviour is covered again in
tests/integration.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from thespian.actors import ActorSystem, ActorTypeDispatcher

from actors import messages as m
from actors.client import Client, RequestError
from actors.pool import StagePool
from actors.task_actor import TaskActor
from pegasus.config import Settings
from pegasus.task import Plan, PlanStep, TaskContext, TaskFSM
from tests.support.recording_pool import RecordingPool


NO_RECALL = {"recall_k": 0}  # the test is the task actor's supervisor: it answers no AskRecall (but in the recall test)


def settings_for(tmp_path: Path, **overrides) -> Settings:
    base = {"system": {"base": "simpleSystemBase", "admin_port": 29999}, "state": {"home": str(tmp_path)}}
    for section, values in overrides.items():
        base.setdefault(section, {}).update(values)
    return Settings().with_overrides(base)


def start(asys: ActorSystem, actor: object, snapshot: object, pool: object, settings: Settings,
          **fields: object) -> m.StartTask:
    """A StartTask for ``actor``, told its settings first (as the supervisor does once per task actor)."""
    asys.tell(actor, m.ConfigureTaskActor(settings))
    return m.StartTask(snapshot, 1, pool, pool, **fields)


@pytest.fixture
def asys() -> Iterator[ActorSystem]:
    """A bare simpleSystemBase system for one actor under test; shut down afterwards.  (Its actors run in
    this process: a worker forgets what earlier tests here taught the process's model ladder, at its start.)"""
    system = ActorSystem("simpleSystemBase", transientUnique=True, logDefs=False)
    yield system
    system.shutdown()


@pytest.fixture
def simple(tmp_path: Path) -> Iterator:
    clients: list[Client] = []

    def start(**overrides) -> Client:
        client = Client.start(settings_for(tmp_path, **overrides), timeout=10)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.close()


# -- supervisor ----------------------------------------------------------------------------


@pytest.mark.parametrize("machine", ["classic", "reason_act"])
def test_a_task_runs_to_done_and_is_inspectable(simple, machine: str) -> None:
    client = simple()
    task = client.submit("what is 2 + 3 * 4?", machine=machine)
    done = client.wait(task["task_id"], timeout=60)
    assert done["lifecycle_state"] == "done" and done["state"] == "completed" and "14" in done["result"]
    assert done["from_store"] is True  # a finished task leaves the supervisor's memory
    assert [s["stage"] for s in done["stages"]][:3] == (["perceive", "think", "plan"] if machine == "classic"
                                                          else ["reason", "act", "act"])
    history = client.history(task["task_id"])
    assert [h["to_state"] for h in history["lifecycle"]] == ["draft", "approved", "queued", "running", "verifying",
                                                             "verified", "done"]
    assert history["cognitive"][-1]["to_state"] == "completed"
    assert [t["task_id"] for t in client.list(state="done")] == [task["task_id"]]
    assert client.list(state="running") == []
    stats = client.stats()
    assert stats["tasks"] == {"done": 1} and stats["pools"]["llm"]["size"] == 3


def test_follow_streams_every_transition_in_order(simple) -> None:
    client = simple()
    task = client.submit("echo hi", follow=True)
    notices = list(client.follow(task["task_id"], timeout=10, subscribe=False))
    lifecycle = [n.to_state for n in notices if n.machine == "lifecycle"]
    cognitive = [n.to_state for n in notices if n.machine == "classic"]
    assert lifecycle == ["draft", "approved", "queued", "running", "verifying", "verified", "done"]
    assert cognitive[0] == "perceiving" and cognitive[-1] == "completed"


def test_ending_one_follow_leaves_the_same_clients_other_follow_streaming(simple) -> None:
    """Regression (issue 16): Unsubscribe dropped every subscription of the client, and a follow threw
    away the notices of the client's other tasks."""
    client = simple()
    b = client.submit("help me", follow=True)["task_id"]  # waits for information: blocked
    follow_b = client.follow(b, timeout=20, subscribe=False, until=frozenset({"done", "failed", "canceled"}))
    seen = [next(follow_b)]  # follow b has started
    a = client.submit("help me too")["task_id"]
    client.wait(a, timeout=60, until=frozenset({"blocked"}))
    assert [n.task_id for n in client.follow(a, timeout=10)] in ([], [a])  # a second follow ends (a is blocked)
    client.wait(b, timeout=60, until=frozenset({"blocked"}))
    client.resume(b, "what is 6*7?")
    seen += list(follow_b)
    lifecycle = [n.to_state for n in seen if n.machine == "lifecycle"]
    assert lifecycle == ["draft", "approved", "queued", "running", "blocked", "queued", "running", "verifying",
                         "verified", "done"]
    assert {n.task_id for n in seen} == {b}
    assert client.stats()["subscribers"] == 0  # each follow removed its own subscription


def test_a_reply_already_delivered_is_taken_without_waiting_for_a_timer(simple, monkeypatch) -> None:
    """Regression (issue 30): on simpleSystemBase a request's tell runs the whole exchange, so its reply is
    there before the client listens; the listen slept until the next timer first (the supervisor's 2.5 s
    pool check) before it took it, for every request."""
    client = simple()
    slept: list[float] = []
    sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda seconds: (slept.append(seconds), sleep(seconds)))
    assert client.stats()["tasks"] == {}
    assert client.locate()["generation"] == 1
    assert slept == []


def test_unconfigured_or_malformed_requests_are_answered_with_errors(simple) -> None:
    client = simple()
    for bad in ("text", 42, {"submit": "x"}):
        reply = client.asys.ask(client.supervisor, bad, 5)
        assert isinstance(reply, m.Reply) and reply.error_type == "UnknownRequest"
    bogus = m.Get.model_construct(request_id="q", task_id=["not", "a", "string"])
    reply = client.asys.ask(client.supervisor, bogus, 5)
    assert (reply.request_id, reply.ok, reply.error_type) == ("q", False, "BadRequest")
    with pytest.raises(RequestError, match="already configured with other settings"):
        client._ask(m.Configure(settings=Settings()))
    assert client.locate()["generation"] == 1  # the guardian: one supervisor so far
    with pytest.raises(RequestError, match="unknown task"):
        client.cancel("missing")


def test_an_unconfigured_supervisor_says_so(asys) -> None:
    from actors.supervisor import Supervisor
    supervisor = asys.createActor(Supervisor)
    reply = asys.ask(supervisor, m.Stats(request_id="s"), 5)
    assert not reply.ok and "not configured" in reply.error


# -- task actor ----------------------------------------------------------------------------------


def test_task_actor_drops_stale_results_and_applies_current_ones(asys, tmp_path: Path) -> None:
    pool = asys.createActor(RecordingPool)
    actor = asys.createActor(TaskActor)
    fsm = TaskFSM.create("classic", "echo hi", task_id="t1")
    settings = settings_for(tmp_path, memory=NO_RECALL)
    [first] = asys.ask(actor, start(asys, actor, fsm.snapshot(), pool, settings), 5).reports
    assert isinstance(first, m.TaskTransitioned) and first.to_state == "perceiving"
    [request] = asys.ask(pool, "requests", 5)
    assert (request.stage, request.token) == ("perceive", 1)
    stale = m.StageResult("t1", 0, "perceive", True, "PERCEIVE_DONE", {"perception": {}})
    asys.tell(actor, stale)
    assert asys.listen(0.2) is None  # dropped: no transition reported
    current = m.StageResult("t1", 1, "perceive", True, "PERCEIVE_DONE", {"perception": {"intents": []}})
    [moved] = asys.ask(actor, current, 5).reports
    assert (moved.from_state, moved.to_state) == ("perceiving", "thinking")
    asys.tell(actor, current)  # the same result again is stale now
    assert asys.listen(0.2) is None
    suspended, final = asys.ask(actor, m.SuspendTask("t1", "hold"), 5).reports
    assert suspended.to_state == "suspended" and suspended.checkpoint[0] == "full"
    assert isinstance(final, m.TaskStopped) and final.state == "suspended"
    assert final.snapshot.context.suspended_state == "thinking"


def test_a_free_task_actor_runs_the_next_task_and_drops_what_was_meant_for_the_last(asys, tmp_path: Path) -> None:
    pool = asys.createActor(RecordingPool)
    actor = asys.createActor(TaskActor)
    settings = settings_for(tmp_path, memory=NO_RECALL)
    first = TaskFSM.create("classic", "echo hi", task_id="t1")
    asys.ask(actor, start(asys, actor, first.snapshot(), pool, settings), 5)
    asys.ask(actor, m.SuspendTask("t1", "hold"), 5)  # t1 stops: the actor is free
    second = TaskFSM.create("classic", "echo again", task_id="t9")
    [started] = asys.ask(actor, start(asys, actor, second.snapshot(), pool, settings), 5).reports
    assert (started.task_id, started.to_state) == ("t9", "perceiving")
    requests = asys.ask(pool, "requests", 5)
    assert [(r.task_id, r.token) for r in requests] == [("t1", 1), ("t9", 3)]  # tokens only grow
    asys.tell(actor, m.StageResult("t1", 1, "perceive", True, "PERCEIVE_DONE", {"perception": {}}))
    asys.tell(actor, m.StageResult("t1", 3, "perceive", True, "PERCEIVE_DONE", {"perception": {}}))
    asys.tell(actor, m.SuspendTask("t1", "late"))
    assert asys.listen(0.2) is None  # t1's answers and its suspension are not t9's
    current = m.StageResult("t9", 3, "perceive", True, "PERCEIVE_DONE", {"perception": {"intents": []}})
    [moved] = asys.ask(actor, current, 5).reports
    assert (moved.task_id, moved.from_state, moved.to_state) == ("t9", "perceiving", "thinking")


def test_a_run_that_cannot_start_is_reported_abandoned_and_the_task_actor_serves_on(asys, tmp_path: Path) -> None:
    # The supervisor restarts the abandoned run from its checkpoint (on_run_lost); the other
    # runs the task actor holds go on (before, the whole process exited, and every run with it).
    pool = asys.createActor(RecordingPool)
    actor = asys.createActor(TaskActor)
    settings = settings_for(tmp_path)
    abandoned = asys.ask(actor, start(asys, actor, None, pool, settings, task_id="t4"), 5)  # the restore raises
    assert isinstance(abandoned, m.TaskAbandoned) and (abandoned.task_id, abandoned.run) == ("t4", 1)
    assert "cannot start" in abandoned.reason
    good = TaskFSM.create("classic", "echo hi", task_id="t3").snapshot()
    assert isinstance(asys.ask(actor, start(asys, actor, good, pool, settings), 5), m.TaskReports)


def test_a_task_actor_holds_many_runs_and_applies_each_answer_to_its_own(asys, tmp_path: Path) -> None:
    """Virtual task actors: several runs passivated in one process, each activated by its own answers;
    a dropped (canceled) run's answer is stale."""
    pool = asys.createActor(RecordingPool)
    actor = asys.createActor(TaskActor)
    settings = settings_for(tmp_path, memory=NO_RECALL)
    for task_id in ("a", "b", "c"):
        snapshot = TaskFSM.create("classic", "echo hi", task_id=task_id).snapshot()
        asys.ask(actor, start(asys, actor, snapshot, pool, settings), 5)
    requests = {r.task_id: r.token for r in asys.ask(pool, "requests", 5)}
    assert sorted(requests) == ["a", "b", "c"] and len(set(requests.values())) == 3  # tokens never shared
    asys.tell(actor, m.DropTask("b", 1))
    asys.tell(actor, m.StageResult("b", requests["b"], "perceive", True, "PERCEIVE_DONE", {"perception": {}}))
    assert asys.listen(0.2) is None  # b's run is forgotten: its answer changes nothing
    for task_id in ("c", "a"):
        answer = m.StageResult(task_id, requests[task_id], "perceive", True, "PERCEIVE_DONE", {"perception": {}})
        [moved] = asys.ask(actor, answer, 5).reports
        assert (moved.task_id, moved.from_state, moved.to_state) == (task_id, "perceiving", "thinking")
    later = {r.task_id: (r.stage, r.token) for r in asys.ask(pool, "requests", 5)[3:]}
    assert set(later) == {"a", "c"} and {stage for stage, _ in later.values()} == {"think"}


def test_task_actor_fails_the_task_when_an_llm_stage_fails(asys, tmp_path: Path) -> None:
    pool = asys.createActor(RecordingPool)
    actor = asys.createActor(TaskActor)
    fsm = TaskFSM.create("reason_act", "echo hi", task_id="t2")
    asys.ask(actor, start(asys, actor, fsm.snapshot(), pool, settings_for(tmp_path, memory=NO_RECALL)), 5)
    failed, stopped = asys.ask(actor, m.StageResult("t2", 1, "reason", False, error="deadline",
                                                    error_kind="timeout"), 5).reports
    assert failed.to_state == "failed"
    assert (stopped.state, stopped.exit_reason) == ("failed", "timeout")


def test_a_task_actor_asks_its_supervisor_for_memories_and_sends_the_stage_with_them(asys, tmp_path: Path) -> None:
    """Issue 19: before reason, the task actor asks the supervisor (the test here) and waits for its answer."""
    pool = asys.createActor(RecordingPool)
    actor = asys.createActor(TaskActor)
    fsm = TaskFSM.create("reason_act", "where is the deploy key?", task_id="t5")
    ask = asys.ask(actor, start(asys, actor, fsm.snapshot(), pool, settings_for(tmp_path)), 5)
    assert isinstance(ask, m.AskRecall) and (ask.task_id, ask.k, ask.query) == ("t5", 5, "where is the deploy key?")
    assert isinstance(asys.listen(5), m.TaskReports)  # idle -> reasoning, sent after the ask
    assert asys.ask(pool, "requests", 5) == []  # the stage waits for the memories
    item = {"id": "fact:deploy-key@1", "kind": "fact", "title": "deploy-key", "text": "In the vault.", "score": 2.0}
    asys.tell(actor, m.Recalled("t5", ask.token - 1, "You are Pegasus.", (item,)))  # stale: dropped
    asys.tell(actor, m.Recalled("t5", ask.token, "You are Pegasus.", (item,)))
    [request] = wait_requests(asys, pool, 1)
    assert request.stage == "reason" and request.context.recall.ids == ["fact:deploy-key@1"]
    assert request.context.recall.identity == "You are Pegasus."


def wait_requests(asys: ActorSystem, pool: object, n: int) -> list[m.StageRequest]:
    for _ in range(100):
        requests = asys.ask(pool, "requests", 5)
        if len(requests) >= n:
            return list(requests)
    raise AssertionError(f"fewer than {n} requests reached the pool")


# -- pools ------------------------------------------------------------------------------------------


def _act_request(token: int) -> m.StageRequest:
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="echo",
                                          action_params={"tool": "echo", "args": {"text": f"n{token}"}})])
    return m.StageRequest("t", token, "act", "classic", TaskContext(input_text="echo", plan=plan), 0)


class _Requester(ActorTypeDispatcher):
    """Sends requests to a pool in one burst (so they queue); tells its client each result
    and whether the pool itself sent it."""

    def receiveMsg_tuple(self, message: tuple, sender) -> None:
        self.client, self.pool, requests = sender, message[0], message[1]
        for request in requests:
            self.send(self.pool, request)

    def receiveMsg_StageResult(self, result: m.StageResult, sender) -> None:
        self.send(self.client, (result, sender == self.pool))


def test_pool_queues_beyond_its_workers_and_refuses_past_its_queue_limit(asys, tmp_path: Path) -> None:
    pool = asys.createActor(StagePool)
    assert isinstance(asys.ask(pool, m.PoolConfig("tool", 1, 1, 30.0, settings_for(tmp_path)), 5), m.PoolReady)
    requester = asys.createActor(_Requester)
    asys.tell(requester, (pool, [_act_request(token) for token in (1, 2, 3)]))
    answers = {result.token: (result, from_pool) for result, from_pool in (asys.listen(5) for _ in range(3))}
    assert answers[3][0].ok is False and answers[3][0].error_kind == "queue_full"
    assert answers[1][0].ok and answers[2][0].ok
    assert answers[1][0].payload["result"]["output"] != answers[2][0].payload["result"]["output"]
    assert not answers[1][1] and not answers[2][1]  # results come from the worker, not through the pool
    assert answers[3][1]  # a refusal is the pool's
    worker = answers[1][0].worker
    assert worker["pool"] == "tool" and worker["finished"] >= worker["started"]
    stats = asys.ask(pool, m.PoolStatsRequest(7), 5)  # the worker's WorkDone note freed it for request 2
    assert (stats.ask_id, stats.size, stats.busy, stats.queued) == (7, 1, 0, 0)


def test_a_request_to_a_pool_not_configured_yet_runs_once_it_is(asys, tmp_path: Path) -> None:
    """A restored task's request may reach a new pool before its PoolConfig: it waits, then runs."""
    pool = asys.createActor(StagePool)
    assert asys.ask(pool, _act_request(1), 0.3) is None  # held, not refused
    asys.tell(pool, m.PoolConfig("tool", 1, 1, 30.0, settings_for(tmp_path)))
    answers = [asys.listen(5), asys.listen(5)]  # the pool's PoolReady (its pid, for the supervisor) and the result
    assert {type(answer) for answer in answers} == {m.PoolReady, m.StageResult}
    result = next(answer for answer in answers if isinstance(answer, m.StageResult))
    assert result.ok and result.token == 1
