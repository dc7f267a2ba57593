"""The supervisor's memory side without an actor system: a done task's context is archived from the store's
checkpoints (once), and a memory step answers as a tool worker would, a bad one as a failed step."""

from __future__ import annotations

from pathlib import Path

from actors import messages as m
from actors.supervisor import memory
from actors.supervisor.context import Context
from actors.supervisor.task_actors import TaskActors
from pegasus.config import Settings
from pegasus.store import Store
from pegasus.store.checkpoint import encode_full
from pegasus.task import Plan, PlanStep, TaskFSM
from pegasus.task.models import TaskContext


class Supervisor:
    """The supervisor's context with what memory reads of it: its store and settings (and a log that keeps lines)."""

    def __init__(self, store: Store) -> None:
        self.sent, self.lines = [], []
        self.ctx = Context(send=lambda to, message: self.sent.append((to, message)), wake=lambda s, p: None,
                           create=lambda kind: None, exit=lambda: None, task_actors=TaskActors(None, None, None),
                           log=self, store=store, settings=Settings())
        self.store = store

    def info(self, event: str, **fields: object) -> None:
        self.lines.append((event, fields))

    exception = info

    def _archive_task(self, task_id: str) -> None:
        memory.archive_task(self.ctx, task_id)

    def _memory(self):
        return memory.memory_of(self.ctx)

    def receiveMsg_StageRequest(self, request: m.StageRequest, sender: object) -> None:
        memory.memory_step(self.ctx, request, sender)


def stored_task(store: Store, text: str) -> TaskFSM:
    fsm = TaskFSM.create("classic", text, task_id="t1")
    store.create_task({"task_id": "t1", "machine": "classic", "cognitive_state": fsm.state, "priority": 3, "seq": 1,
                       "input": text, "source": "test"}, encode_full(fsm.snapshot()))
    return fsm


def test_a_done_task_is_archived_once_from_its_checkpoints(tmp_path: Path) -> None:
    supervisor = Supervisor(Store(tmp_path / "pegasus.db"))
    stored_task(supervisor.store, "remember that the deploy key is in the vault")
    supervisor._archive_task("t1")
    supervisor._archive_task("t1")
    archived = supervisor._memory().archived("t1")
    assert archived is not None and archived.context["input_text"].startswith("remember that")
    assert [i.id for i in supervisor._memory().search("deploy key vault", kinds=("archive",))] == ["task:t1"]
    supervisor._archive_task("unknown")  # no such task: nothing to archive, nothing raised


def test_a_memory_step_is_answered_like_a_tool_step(tmp_path: Path) -> None:
    supervisor = Supervisor(Store(tmp_path / "pegasus.db"))
    fsm = stored_task(supervisor.store, "x")
    fsm.context.plan = Plan(goal="g", steps=[PlanStep(index=0, description="write", action_params={
        "tool": "memory.append", "args": {"path": "notes/todo", "text": "buy milk"}})])
    request = m.StageRequest("t1", 4, "act", "classic", fsm.context, 0, idempotency_key="t1/a1.0/i0/s0")
    for _ in range(2):  # the same step twice (a restarted run): appended once
        supervisor.receiveMsg_StageRequest(request, "task-actor")
    results = [message for _, message in supervisor.sent]
    assert [(r.ok, r.event_type, r.token) for r in results] == [(True, "TOOL_CALL_COMPLETED", 4)] * 2
    assert supervisor._memory().read_fact("notes/todo").content == "buy milk"
    supervisor.receiveMsg_StageRequest(m.StageRequest("t1", 5, "think", "classic", fsm.context), "task-actor")
    refused = supervisor.sent[-1][1]
    assert not refused.ok and "memory steps only" in refused.error


def test_a_task_done_now_is_archived_from_its_completed_checkpoint_not_dumped_again(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    supervisor = Supervisor(Store(tmp_path / "pegasus.db"))
    fsm = stored_task(supervisor.store, "remember that the deploy key is in the vault")
    snapshot = fsm.snapshot()
    supervisor.ctx.completed["t1"] = encode_full(snapshot)  # as _transitioned keeps it from the run's report
    dumps: list[object] = []
    real = TaskContext.model_dump
    monkeypatch.setattr(TaskContext, "model_dump", lambda self, **kw: dumps.append(self) or real(self, **kw))
    memory.archive_task(supervisor.ctx, "t1", snapshot, last=True)
    assert dumps == []  # the task actor dumped it for the checkpoint: msgpack reads it back
    assert supervisor._memory().archived("t1").context == real(snapshot.context, mode="json")
    supervisor.ctx.completed.clear()  # no checkpoint at hand (a run that stopped apart from it): dumped
    memory.archive_task(supervisor.ctx, "t2", snapshot, last=True)
    assert len(dumps) == 1 and supervisor._memory().archived("t2").context == real(snapshot.context, mode="json")


def test_the_identity_each_start_carries_resolves_the_state_dir_once(tmp_path: Path, monkeypatch) -> None:
    """Recall off, every StartTask carries the identity text: before, each resolved the state dir again (a
    stat of each part of its path; 2.4% of the supervisor's busy samples at L = 50 ms, memory off)."""
    supervisor = Supervisor(Store(tmp_path / "p.db"))
    supervisor.ctx.settings = Settings().with_overrides({"state": {"home": str(tmp_path)}})
    (tmp_path / "identity.md").write_text("I am the test's agent.\n")
    resolved: list[object] = []
    real = Settings.state_dir
    monkeypatch.setattr(Settings, "state_dir", lambda self: resolved.append(self) or real(self))
    assert memory.identity(supervisor.ctx) == "I am the test's agent."  # read (and the dir resolved) once
    resolved.clear()
    assert {memory.identity(supervisor.ctx) for _ in range(5)} == {"I am the test's agent."} and resolved == []
    supervisor.ctx.settings = supervisor.ctx.settings.with_overrides({})  # configured again: resolved again
    memory.identity(supervisor.ctx)
    assert resolved == [supervisor.ctx.settings]


def test_a_task_done_now_is_archived_with_its_checkpoints_context_bytes_not_unpacked_and_packed_again(
        tmp_path: Path, monkeypatch) -> None:
    """The archive's context is the slice of the completed checkpoint the task actor packed: the same bytes as
    packing it again, with no msgpack unpack of the checkpoint and no pack of the context (one of each before)."""
    import msgpack

    from pegasus import codec
    from pegasus.store.checkpoint import full_context

    supervisor = Supervisor(Store(tmp_path / "pegasus.db"))
    fsm = stored_task(supervisor.store, "remember that the deploy key is in the vault")
    fsm.context.messages.append({"role": "user", "content": "a" * 70000})  # a map past 65,535 bytes: no short form
    snapshot = fsm.snapshot()
    full = encode_full(snapshot)
    supervisor.ctx.completed["t1"] = full
    calls: list[str] = []
    unpackb, pack = msgpack.unpackb, codec.pack
    monkeypatch.setattr(msgpack, "unpackb", lambda data, **k: calls.append(f"unpackb {len(data)}") or unpackb(data, **k))
    monkeypatch.setattr(codec, "pack", lambda value: calls.append(f"pack {type(value).__name__}") or pack(value))
    memory.archive_task(supervisor.ctx, "t1", snapshot, last=True)
    stored, = supervisor.store.db.execute("SELECT context FROM memory_archive WHERE task_id = 't1'").fetchone()
    assert calls == ["pack NoneType"]  # the result (none yet); the context's bytes as they were
    assert stored == pack(unpackb(full)["data"]["context"])
    assert full_context(b"\x80") is None and full_context(codec.pack({"pegasus": 1, "type": "Plan", "data": {}})) is None
    assert full_context(full[:-3]) is None and full_context(b"not msgpack") is None
