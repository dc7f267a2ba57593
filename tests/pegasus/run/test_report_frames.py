"""A task actor's reports never make a message larger than a frame (``[system] max_frame_bytes``): Thespian refuses
such a message whole, unsent, and its reports were lost, their tasks "running" for ever.  A batch closes before its
reports' estimated bytes pass half the frame; a run whose one report cannot fit is abandoned, saying why; a batch
refused all the same (``Unsent``) has its runs abandoned, to restart from what was recorded."""

from __future__ import annotations

import pickle
from typing import Any

from actors import messages as m
from pegasus.run import Started, TaskStopped, TaskTransitioned, report_rules
from pegasus.run.commands import Reflected
from pegasus.run.host import Abandoned, AskPool, Delivered, Handled, Report, RunHost, Start, Unsent
from pegasus.run.report_batch import ReportBatch
from pegasus.task import TaskFSM
from tests.pegasus.run.test_transition_costs import answer, run_classic

FRAME = 65536
WORDS = "word " * 300


def _burst(core: RunHost, texts: list[str]) -> tuple[list[Report], list[Abandoned]]:
    """Runs of ``texts`` started together and stepped in turns, another message always waiting (so what is held
    waits for the count or the bytes) until the last; every ``Report`` and ``Abandoned``, in order."""
    pending: list[Any] = [Start(f"t{n}", TaskFSM.create("classic", text, task_id=f"t{n}").snapshot(), 1, 10,
                                Started(), "supervisor", "llm", "tool", lambda tool: None)
                          for n, text in enumerate(texts)]
    reports, abandoned = [], []
    while pending:
        given = core.step(pending.pop(0))
        given += core.step(Handled(more_read=bool(pending)))
        for command in given:
            if isinstance(command, Report):
                reports.append(command)
                pending.append(Delivered(more_read=True))
            elif isinstance(command, AskPool):
                pending.append(answer(command))
            elif isinstance(command, Abandoned):
                abandoned.append(command)
    return reports, abandoned


def _bytes(report: Report) -> int:
    """The report's message as Thespian pickles it (its sender's address aside)."""
    return len(pickle.dumps(m.TaskReports(report.reports), pickle.HIGHEST_PROTOCOL))


def test_a_burst_of_large_reports_goes_in_messages_each_within_the_frame_and_loses_none() -> None:
    """Twenty classic tasks of ~1.5 KB inputs: ~160 reports, 48 a batch by count (~100 KB, refused unsent before)."""
    core = RunHost(pid=7)
    core.frames(FRAME)
    reports, abandoned = _burst(core, [f"echo {n} {WORDS}" for n in range(20)])
    assert not abandoned
    assert max(_bytes(report) for report in reports) <= FRAME // 2
    sent = [item for report in reports for item in report.reports]
    assert sum(isinstance(item, TaskStopped) for item in sent) == 20
    for n in range(20):  # each task's reports all there, in order, ending with its end
        own = [item for item in sent if item.task_id == f"t{n}"]
        assert isinstance(own[-1], TaskStopped) and own[-1].state == "completed"
        assert all(isinstance(item, TaskTransitioned) for item in own[:-1])


def test_a_run_whose_one_report_cannot_fit_is_abandoned_saying_why_and_the_others_go_on() -> None:
    core = RunHost(pid=7)
    core.frames(FRAME)
    reports, abandoned = _burst(core, ["what is 2 + 3?", "echo " + "word " * 12000, "what is 2 + 3?"])
    assert [(gone.task_id, gone.run) for gone in abandoned] == [("t1", 1)]
    assert "max_frame_bytes" in abandoned[0].reason and "bytes" in abandoned[0].reason
    assert max(_bytes(report) for report in reports) <= FRAME
    ends = [item.task_id for report in reports for item in report.reports if isinstance(item, TaskStopped)]
    assert sorted(ends) == ["t0", "t2"]


def test_reports_refused_all_the_same_abandon_their_runs_held_or_ended_but_not_a_newer_run() -> None:
    core = RunHost(pid=7)
    ended = [item for command in run_classic(core, "t0") if isinstance(command, Report) for item in command.reports]
    task = TaskFSM.create("classic", "what is 2 + 3?", task_id="t1").snapshot()
    core.step(Start("t1", task, 1, 10, Started(), "supervisor", "llm", "tool", lambda tool: None))
    core.step(Start("t2", task.model_copy(update={"task_id": "t2"}), 3, 10, Started(), "supervisor", "llm", "tool",
                    lambda tool: None))
    lost = (*ended, TaskTransitioned("t1", 1, "a", "b", "E", "now"), TaskTransitioned("t2", 2, "a", "b", "E", "now"))
    out = core.step(Unsent(lost, "its reports could not be sent: a TaskReports message is 99999 bytes"))
    gone = [(command.task_id, command.run, command.reason) for command in out if isinstance(command, Abandoned)]
    assert [(task_id, run) for task_id, run, _ in gone] == [("t0", 1), ("t1", 1)]  # t2 runs its run 3 here
    assert all("could not be sent: a TaskReports message is 99999 bytes" in reason for _, _, reason in gone)
    assert set(core.runs) == {"t2"}


def test_a_refused_batch_drops_the_later_reports_of_its_runs_still_held_so_none_lands_after_a_gap() -> None:
    """Its send's failure is told at once (``Unsent``, before its ``Delivered``): a run's later transitions held
    meanwhile would otherwise reach the supervisor before its ``Abandoned``, on a chain missing the refused delta."""
    core = RunHost(pid=7)
    task = TaskFSM.create("classic", "what is 2 + 3?", task_id="t0").snapshot()
    out = core.step(Start("t0", task, 1, 10, Started(), "supervisor", "llm", "tool", lambda tool: None))
    out += core.step(Handled(more_read=False))
    refused = next(command for command in out if isinstance(command, Report))
    asks = [command for command in out if isinstance(command, AskPool)]
    while not any(isinstance(item, TaskTransitioned) for item in core.batch.held):  # t0 goes on; a message waits
        step = core.step(answer(asks.pop(0))) + core.step(Handled(more_read=True))
        asks += [command for command in step if isinstance(command, AskPool)]
    out = core.step(Unsent(refused.reports, "its reports could not be sent: too large"))
    out += core.step(Delivered(more_read=False))
    assert [type(command).__name__ for command in out] == ["Abandoned"]
    assert not core.batch.held and "t0" not in core.runs


def test_the_estimates_are_never_below_what_pickle_makes_of_a_classic_tasks_reports() -> None:
    for text in ("what is 2 + 3?", "echo " + "wörd " * 3000, "what is 2 + 3? " + "x" * 20000):
        sent = [item for command in run_classic(RunHost(pid=7), "t1", text) if isinstance(command, Report)
                for item in command.reports]
        for item, size in zip(sent, report_rules.sizes(sent), strict=True):
            assert size >= len(pickle.dumps(item, pickle.HIGHEST_PROTOCOL)), (type(item).__name__, text[:10])
    failed = TaskTransitioned("t1", 1, "acting", "acting", "TOOL_CALL_FAILED", "now",  # a long error, 3 bytes a char
                              {"stage": "act", "ok": False, "error": "錯" * 7500, "done_before": {"text": "é" * 900}})
    assert report_rules.sizes([failed])[0] >= len(pickle.dumps(failed, pickle.HIGHEST_PROTOCOL))


def test_a_reflections_answer_too_large_for_a_frame_is_reported_failed_saying_why() -> None:
    answer_ = Reflected("t1", True, {"lesson": "x" * 70000})
    fitted, size = report_rules.fitted(answer_, FRAME - 8192)
    assert not fitted.ok and fitted.payload == {} and "max_frame_bytes" in (fitted.error or "")
    assert size < 2048 and report_rules.fitted(Reflected("t1", True, {"lesson": "short"}), FRAME)[0].ok


def test_the_policy_sends_what_is_held_before_a_report_would_pass_the_bytes_and_one_over_them_alone() -> None:
    batch = ReportBatch(max_bytes=100)
    assert batch.room_for(60) == () and batch.add(["a"], size=60) == ()
    assert batch.room_for(50) == ("a",) and batch.add(["b"], size=50) == ()  # together 110: "a" went first
    assert batch.room_for(40) == () and batch.add(["c"], size=40) == ()
    assert batch.room_for(150) == ("b", "c") and batch.add(["d"], size=150) == ("d",)  # alone, at once
    assert batch.held == [] and batch.held_bytes == 0
