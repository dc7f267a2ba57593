"""The task actor's host core without an actor system: held runs, unanswered requests, pool addresses,
stale answers, replaced pools, abandoned runs, and a step that never raises."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings, strategies as st

from pegasus.run import Answered, SendStage, Started, Streamed, SuspendAsked, TaskStopped
from pegasus.run.host import (
    Abandoned, AskPool, CarryingFailed, Closing, Delivered, Drop, Handled, HostCommand, LogLine, Messages,
    PoolReplaced, Report, RunHost, Start, Tell,
)
from pegasus.streaming import TextDelta
from pegasus.task import TaskFSM
from tests.pegasus.conftest import FixedClock, Ids

SUP, LLM, TOOL = "supervisor", "llm-1", "tool-1"


def host(debug: bool = False) -> RunHost:
    return RunHost(pid=7, clock=FixedClock(), ids=Ids(), debug=debug)


def start(task_id: str, run: int = 1, *, llm: str = LLM, snapshot: Any = "new") -> Start:
    task = TaskFSM.create("classic", "echo hi", task_id=task_id).snapshot() if snapshot == "new" else snapshot
    return Start(task_id, task, run, 5, Started(), SUP, llm, TOOL, lambda tool: None)


def answer(ask: AskPool, **fields: Any) -> Answered:
    stage = ask.stage
    return Answered(SimpleNamespace(**{"task_id": stage.task_id, "token": stage.token, "stage": stage.stage,
                                       "ok": True, "event_type": "PERCEIVE_DONE", "payload": {"perception": {}},
                                       "error": None, "error_kind": "", "worker": {}, **fields}))


def settled(core: RunHost, event: Any) -> list[HostCommand]:
    """``event`` stepped as a message alone in the mailbox: then Handled, and each Report delivered."""
    out = core.step(event)
    more = core.step(Handled())
    while more:
        out += more
        more = [c for report in of(Report, more) for c in core.step(Delivered())]
    return out


def of(kind: type, commands: list[HostCommand]) -> list[Any]:
    return [command for command in commands if isinstance(command, kind)]


def events(commands: list[HostCommand]) -> list[str]:
    return [line.line.event for line in of(LogLine, commands)]


def test_a_started_run_asks_its_pool_first_then_logs_then_reports_once_to_its_supervisor() -> None:
    core = host(debug=True)  # the transitions' lines are made
    out = settled(core, start("a"))
    assert isinstance(out[0], AskPool) and (out[0].to, out[0].stage.stage, out[0].journal_to) == (LLM, "perceive",
                                                                                                   None)
    assert isinstance(out[-1], Report) and out[-1].to == SUP and len(out[-1].reports) == 1
    assert set(map(type, out[1:-1])) == {LogLine}
    assert all(line.run == ("a", "classic", 1) for line in of(LogLine, out))  # the run's lines name it
    assert set(core.runs) == {"a"} and core.asked["a"] is out[0]


def test_runs_held_together_never_share_a_token_and_each_answer_activates_its_own() -> None:
    core = host()
    asks = {task: of(AskPool, settled(core, start(task)))[0] for task in ("a", "b", "c")}
    assert len({ask.stage.token for ask in asks.values()}) == 3
    out = settled(core, answer(asks["b"]))
    [report] = of(Report, out)
    assert [(r.task_id, r.from_state, r.to_state) for r in report.reports] == [("b", "perceiving", "thinking")]
    [think] = of(AskPool, out)
    assert think.stage.stage == "think" and core.asked["b"] is think and core.asked["a"] is asks["a"]


def test_a_new_run_starts_past_every_token_the_host_issued_so_an_earlier_runs_answer_is_stale() -> None:
    core = host()
    first = of(AskPool, core.step(start("a", run=1)))[0]
    again = of(AskPool, core.step(start("a", run=2)))[0]  # the supervisor started the task again
    assert again.stage.token > first.stage.token
    out = core.step(answer(first))
    assert events(out) == ["stale_result_dropped"] and not of(Report, out)
    assert core.asked["a"] is again


def test_a_dropped_run_is_forgotten_and_its_answer_activates_nothing() -> None:
    core = host()
    ask = of(AskPool, core.step(start("a", run=3)))[0]
    assert core.step(Drop("a", 2)) == [] and "a" in core.runs  # another run's drop: kept
    assert core.step(Drop("a", 3)) == [] and "a" not in core.runs and "a" not in core.asked
    assert events(core.step(answer(ask))) == ["stale_result_dropped"]
    assert core.step(SuspendAsked("a", "why")) == [] and core.step(Messages("a", 3, ((1, "hi"),))) == []


def test_streamed_text_goes_to_the_supervisor_without_activating_the_run_and_stale_text_goes_nowhere() -> None:
    core = host()
    ask = of(AskPool, settled(core, start("a")))[0]
    held = core.runs["a"]
    [tell] = core.step(Streamed(TextDelta("a", ask.stage.token, "perceive", 1, "he")))
    assert isinstance(tell, Tell) and tell.to == SUP and tell.what.run == 1 and core.runs["a"] is held
    assert core.step(Streamed(TextDelta("a", ask.stage.token - 1, "perceive", 1, "he"))) == []


def test_a_replaced_pool_is_asked_again_what_the_dead_one_never_answered() -> None:
    core = host()
    asks = [of(AskPool, core.step(start(task)))[0] for task in ("a", "b")]
    core.step(answer(asks[1]))  # b answered: its next request is the think stage
    assert core.step(PoolReplaced("llm", "llm-2", LLM, "stranger")) == []  # only the supervisor is heard
    out = core.step(PoolReplaced("llm", "llm-2", LLM, SUP))
    again = of(AskPool, out)
    assert {(ask.to, ask.stage.task_id) for ask in again} == {("llm-2", "a"), ("llm-2", "b")}
    assert next(a for a in again if a.stage.task_id == "a").stage == asks[0].stage  # token and all
    assert events(out) == ["pool_replaced"]
    # A StartTask the supervisor sent before the replacement still names the dead pool: the new one is used.
    assert of(AskPool, core.step(start("c", llm=LLM)))[0].to == "llm-2"


def test_a_run_that_cannot_start_is_reported_abandoned_and_forgotten_while_the_others_go_on() -> None:
    core = host()
    core.step(start("a"))
    out = core.step(start("t4", snapshot=None))
    [abandoned] = of(Abandoned, out)
    assert (abandoned.to, abandoned.task_id, abandoned.run) == (SUP, "t4", 1) and "cannot start" in abandoned.reason
    assert "t4" not in core.runs and "a" in core.runs


def test_a_send_that_raised_abandons_the_run_it_was_carrying_out_and_only_that_one() -> None:
    core = host()
    core.step(start("a"))
    core.step(start("b", run=4))
    assert of(Abandoned, core.step(CarryingFailed("PicklingError: no"))) == [Abandoned(SUP, "b", 4, "PicklingError: no")]
    assert set(core.runs) == {"a"} and set(core.asked) == {"a"}
    assert core.step(CarryingFailed("again")) == []  # the step before activated nothing


def test_a_run_that_stops_is_forgotten() -> None:
    core = host()
    ask = of(AskPool, core.step(start("a")))[0]
    core.step(SuspendAsked("a", "later"))  # suspends at once: the stage in flight is stale now
    assert "a" not in core.runs and "a" not in core.asked
    assert events(core.step(answer(ask))) == ["stale_result_dropped"]


def test_a_stopped_runs_report_is_the_last_thing_it_sends() -> None:
    core = host()
    settled(core, start("a"))
    out = settled(core, SuspendAsked("a", "later"))
    assert isinstance(out[-1], Report) and isinstance(out[-1].reports[-1], TaskStopped)


ANSWERS = st.builds(lambda task, token, ok: SimpleNamespace(
    task_id=task, token=token, stage="perceive", ok=ok, event_type="PERCEIVE_DONE" if ok else None,
    payload={"perception": {}}, error=None if ok else "boom", error_kind="" if ok else "timeout", worker={}),
    st.sampled_from("ab"), st.integers(0, 8), st.booleans())
INPUTS = st.one_of(
    st.builds(lambda task, run: start(task, run), st.sampled_from("ab"), st.integers(1, 3)),
    st.builds(Answered, ANSWERS),
    st.builds(lambda task, token: Streamed(TextDelta(task, token, "perceive", 1, "x")), st.sampled_from("ab"),
              st.integers(0, 8)),
    st.builds(SuspendAsked, st.sampled_from("ab"), st.just("r")),
    st.builds(Messages, st.sampled_from("ab"), st.integers(1, 3), st.just(((1, "hi"),))),
    st.builds(Drop, st.sampled_from("ab"), st.integers(1, 3)),
    st.builds(PoolReplaced, st.just("llm"), st.sampled_from(["llm-2", "llm-3"]), st.just(LLM),
              st.sampled_from([SUP, "x"])),
    st.builds(CarryingFailed, st.just("boom")),
    st.just(Closing()),
    st.just(Answered(None)),  # type: ignore[arg-type] - garbage in: still no exception
)


@settings(max_examples=150, deadline=None)
@given(st.lists(INPUTS, max_size=25))
def test_any_sequence_of_inputs_never_raises_and_every_unanswered_request_belongs_to_a_held_run(
        inputs: list[Any]) -> None:
    core = host()
    for event in inputs:
        out = core.step(event)
        assert set(core.asked) <= set(core.runs)
        for ask in of(AskPool, out):  # a stage request goes out only for a run held here, with its current token
            held = core.runs.get(ask.stage.task_id)
            assert held is None or ask.stage.token == held.token or isinstance(event, PoolReplaced)
    assert all(isinstance(ask.stage, SendStage) for ask in core.asked.values())
