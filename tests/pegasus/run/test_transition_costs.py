"""What a task actor does per transition, counted (issue 33: the task actors' CPU per task): classic tasks
through the host core, each stage run by the offline processors as a worker would, every report delivered."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.levels import Level
from pegasus.run import Answered, RunSnapshot, SendStage, Started, TaskRun, TaskTransitioned
from pegasus.store import delta
from pegasus.store.checkpoint import encode_full, rebuild
from pegasus.store.sqlite import Checkpoint
from pegasus.run.host import AskPool, Delivered, Handled, HostCommand, LogLine, Report, RunHost, Start
from pegasus.task import TaskContext, TaskFSM
from tests.pegasus.conftest import FixedClock, Ids, start_run

PROCESSORS = offline_processors(timer=lambda: 0.0)


def run_classic(core: RunHost, task_id: str, text: str = "what is 2 + 3?") -> list[HostCommand]:
    """One classic task from its start to its end; every command the host gave, in order."""
    task = TaskFSM.create("classic", text, task_id=task_id).snapshot()
    pending: list[Any] = [Start(task_id, task, 1, 10, Started(), "supervisor", "llm", "tool", lambda tool: None,
                                identity="I am.")]
    out: list[HostCommand] = []
    while pending:
        given = core.step(pending.pop(0)) + core.step(Handled())
        out += given
        for command in given:
            if isinstance(command, Report):
                pending.append(Delivered())
            elif isinstance(command, AskPool):
                pending.append(answer(command))
    assert not core.runs  # it ended
    return out


def answer(ask: AskPool) -> Answered:
    """The stage ``ask`` requests, run by the offline processors as a worker would."""
    stage = ask.stage
    done = run_stage(PROCESSORS, stage.stage, stage.context, machine=stage.machine, step_index=stage.step_index)
    return Answered(SimpleNamespace(task_id=stage.task_id, token=stage.token, stage=stage.stage,
                                    ok=done.event_type is not None, event_type=done.event_type, payload=done.payload,
                                    error=None, error_kind="", worker={}))


def test_a_classic_task_writes_no_info_line_its_transitions_lines_are_debug() -> None:
    """Each transition's line was an info line: the task actor rendered and wrote ~7 a task (~12% of its
    handlers' CPU) though its report stores all of it.  Now a debug line, made only for a carrier that writes
    debug lines (``RunHost(debug=True)``)."""
    out = run_classic(RunHost(pid=7, clock=FixedClock(), ids=Ids(), debug=True), "t1")
    lines = [command.line for command in out if isinstance(command, LogLine)]
    reports = [report for command in out if isinstance(command, Report) for report in command.reports]
    assert [line.event for line in lines if line.level != Level.DEBUG] == []
    assert [line.fields["state"] for line in lines] == [report.to_state for report in reports
                                                        if hasattr(report, "to_state")]


def test_at_the_default_level_a_classic_task_makes_no_log_line_at_all() -> None:
    """The transitions' debug lines were built (a Log and its fields, a LogLine) and dropped by the task actor at
    every transition below debug: ~7 a task that nobody read.  Now not made."""
    out = run_classic(RunHost(pid=7, clock=FixedClock(), ids=Ids()), "t1")
    assert [command.line.event for command in out if isinstance(command, LogLine)] == []


def test_a_checkpoint_dumps_only_the_context_fields_changed_and_the_checkpoints_rebuild_the_context(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Each checkpoint dumped the whole context to JSON and diffed all of it (~6% of a task actor's handler CPU);
    a field still holding the value the last checkpoint was dumped from is as that checkpoint has it.  What the
    store rebuilds from the checkpoints is the run's context after every one, the run passivated and restored
    between every two inputs as a task actor does."""
    dumped: list[int] = []
    model_dump = TaskContext.model_dump

    def counting(self: TaskContext, **kwargs: Any) -> dict[str, Any]:
        dumped.append(len(kwargs.get("include") or type(self).model_fields))
        return model_dump(self, **kwargs)

    clock, ids = FixedClock(), Ids()
    task = TaskFSM.create("classic", "what is 2 + 3 * 4?", task_id="t1", clock=clock, id_factory=ids)
    rows = [Checkpoint(0, 1, "full", task.state, encode_full(task.snapshot()))]
    monkeypatch.setattr(TaskContext, "model_dump", counting)
    run, out = start_run(RunSnapshot(task.snapshot(), 1, 5, recall_k=0, identity="I am."), clock=clock, ids=ids)
    while True:
        for report in out:
            if isinstance(report, TaskTransitioned) and report.checkpoint is not None:
                kind, data = report.checkpoint
                row = Checkpoint(len(rows), 1, kind, report.to_state, data)
                rows = [row] if kind == "full" else [*rows, row]  # a full checkpoint starts them again
                monkeypatch.setattr(TaskContext, "model_dump", model_dump)
                assert rebuild("t1", rows).context == run.fsm.context
                monkeypatch.setattr(TaskContext, "model_dump", counting)
        if run.stopped:
            break
        run = TaskRun(run.snapshot(), clock=clock, ids=ids)
        [send] = [command for command in out if isinstance(command, SendStage)]
        out = run.step(answer(AskPool("llm", send, None)))
    assert run.fsm.state == "completed"
    assert dumped[0] == len(TaskContext.model_fields)  # the run's start
    assert dumped[1:] == [4, 2, 3, 1]  # perceived, reasoned, recalled, planned; a step twice; the reflection


def test_a_run_is_made_once_and_kept_between_its_inputs_not_passivated_and_restored(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The host passivated each run to a snapshot after every input and restored it from that snapshot at the
    next (an FSM, a checkpointer, a RunSnapshot and a TaskSnapshot each time: ~35 us a stage in a task actor woken
    for each answer).  Nothing reads a run between two of its inputs: it is kept as it is."""
    made: list[str] = []
    passivated: list[str] = []
    init, snapshot = TaskRun.__init__, TaskRun.snapshot

    def counting_init(self: TaskRun, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        made.append(self.task_id)

    def counting_snapshot(self: TaskRun) -> RunSnapshot:
        passivated.append(self.task_id)
        return snapshot(self)

    monkeypatch.setattr(TaskRun, "__init__", counting_init)
    monkeypatch.setattr(TaskRun, "snapshot", counting_snapshot)
    core = RunHost(pid=7, clock=FixedClock(), ids=Ids())
    out = run_classic(core, "t1") + run_classic(core, "t2")
    assert sum(isinstance(report, TaskTransitioned) for command in out if isinstance(command, Report)
               for report in command.reports) >= 14  # every transition reported, as before
    assert (made, passivated) == (["t1", "t2"], [])


def test_a_checkpoint_diffs_only_the_fields_its_transition_changed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A delta checkpoint diffed the whole context against the last one, a call for each of its ~25 fields though
    a transition changes one to four (the others are the same objects); those alone are diffed now, to the same
    delta."""
    diff, diff_fields = delta.diff, delta.diff_fields
    same_containers: list[Any] = []
    deltas: list[Any] = []

    def watched(old: Any, new: Any) -> Any:
        if old is new and isinstance(old, (dict, list)):
            same_containers.append(old)
        return diff(old, new)

    def checked(old: dict[str, Any], new: dict[str, Any], changed: Any) -> Any:
        found = diff_fields(old, new, changed)
        monkeypatch.setattr(delta, "diff", diff)  # the whole diff, for the check: not watched
        assert found == diff(old, new)
        monkeypatch.setattr(delta, "diff", watched)
        deltas.append(found)
        return found

    monkeypatch.setattr(delta, "diff", watched)
    monkeypatch.setattr(delta, "diff_fields", checked)
    run_classic(RunHost(pid=7, clock=FixedClock(), ids=Ids()), "t1")
    assert len(deltas) >= 3 and all(deltas)  # a classic task's delta checkpoints, each changing something
    assert same_containers == []
