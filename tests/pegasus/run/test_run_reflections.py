"""A done run's post-task reflection handed out by its task actor (issue 33): the host core without an actor
system, on the offline processors.  The done report says who hands it out; at most ``limit`` are out, the
others wait in order; the answer is a report in the next batch; a replaced pool is asked again."""

from __future__ import annotations

from typing import Any

from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.config import Settings
from pegasus.run import Started, TaskStopped
from pegasus.run.commands import Reflected
from pegasus.run.host import AskPool, Closing, HostCommand, PoolReplaced, Report, RunHost, Start
from pegasus.run.reflections import WAIT_LIMIT, HeldReflections, limit_for
from pegasus.task import TaskFSM
from tests.pegasus.run.test_task_host import LLM, SUP, TOOL, answer, host, of, settled, start

REFLECT = "post_reflect"
KEPT = {"post_reflection": {"facts": [], "assessment": "ok"}}


def reports(commands: list[HostCommand]) -> list[Any]:
    return [report for sent in of(Report, commands) for report in sent.reports]


def reflections(commands: list[HostCommand]) -> list[AskPool]:
    return [ask for ask in of(AskPool, commands) if ask.stage.stage == REFLECT]


def finish(core: RunHost, task_id: str, limit: int = 1) -> list[HostCommand]:
    """Run a classic task to its end on ``core``, its stages answered by the offline processors."""
    processors = offline_processors(timer=lambda: 0.0)
    task = TaskFSM.create("classic", "what is 2 + 3?", task_id=task_id).snapshot()
    out = settled(core, Start(task_id, task, 1, 5, Started(), SUP, LLM, TOOL, lambda tool: None, reflections=limit))
    asks = [ask for ask in of(AskPool, out) if ask.stage.stage != REFLECT]
    while asks:
        [ask] = asks
        stage = ask.stage
        outcome = run_stage(processors, stage.stage, stage.context, machine=stage.machine, step_index=stage.step_index)
        more = settled(core, answer(ask, event_type=str(outcome.event_type), payload=outcome.payload))
        out += more
        asks = [ask for ask in of(AskPool, more) if ask.stage.stage != REFLECT]
    return out


def test_a_done_run_s_reflection_goes_from_its_task_actor_and_its_answer_is_its_next_report() -> None:
    core = host()
    out = finish(core, "a")
    [stopped] = [r for r in reports(out) if isinstance(r, TaskStopped)]
    assert (stopped.state, stopped.reflecting) == ("completed", True)  # the supervisor does not hand it out
    [ask] = reflections(out)
    assert (ask.to, ask.journal_to, ask.stage.machine) == (LLM, None, "classic")
    assert ask.stage.context is stopped.snapshot.context  # the done run's context, as the supervisor had it
    assert ask.stage.token > max(a.stage.token for a in of(AskPool, out) if a is not ask)  # a token of its own
    answered = settled(core, answer(ask, payload=KEPT, event_type=None))
    assert reports(answered) == [Reflected("a", True, KEPT, None, "")]
    assert core.runs == {} and core.reflections.out == {}


def test_at_most_limit_reflections_are_out_and_the_next_goes_when_one_is_answered() -> None:
    core = host()
    first = reflections(finish(core, "a"))
    second = finish(core, "b")
    assert [r.reflecting for r in reports(second) if isinstance(r, TaskStopped)] == [True]  # it waits here
    assert reflections(second) == []
    failed = settled(core, answer(first[0], ok=False, payload={}, error="died", error_kind="worker_died"))
    assert reports(failed) == [Reflected("a", False, {}, "died", "worker_died")]  # the supervisor decides
    [next_one] = reflections(failed)
    assert next_one.stage.task_id == "b"


def test_an_answer_while_other_runs_are_held_waits_for_their_next_report() -> None:
    core = host()
    [ask] = reflections(finish(core, "a"))
    [perceive] = of(AskPool, settled(core, start("b")))  # a run held here: it will report again soon
    assert reports(settled(core, answer(ask, payload=KEPT, event_type=None))) == []
    [sent] = of(Report, settled(core, answer(perceive)))
    assert [type(r).__name__ for r in sent.reports] == ["Reflected", "TaskTransitioned"]  # one message


def test_a_stale_answer_reports_nothing_and_a_replaced_pool_is_asked_again() -> None:
    core = host()
    [ask] = reflections(finish(core, "a"))
    stale = settled(core, answer(ask, token=ask.stage.token - 1, payload=KEPT))
    assert reports(stale) == [] and "a" in core.reflections.out
    again = reflections(core.step(PoolReplaced("llm", "llm-2", LLM, SUP)))
    assert [(a.to, a.stage) for a in again] == [("llm-2", ask.stage)]  # token and all
    assert reports(core.step(Closing())) == [] and core.reflections.out == {}


def test_with_no_limit_the_supervisor_hands_it_out() -> None:
    out = finish(host(), "a", limit=0)
    assert [r.reflecting for r in reports(out) if isinstance(r, TaskStopped)] == [False]
    assert reflections(out) == []


def test_only_a_completed_run_is_reflected_here_and_at_most_wait_limit_wait() -> None:
    done = TaskFSM.create("classic", "x", task_id="t").snapshot()
    held = HeldReflections(limit=1)
    assert held.take(TaskStopped("t", 1, "failed", done), 1) is None
    assert held.take(TaskStopped("t", 1, "acting", done, children=()), 1) is None
    assert held.take(TaskStopped("t", 1, "completed", done, children=(object(),)), 1) is None  # type: ignore[arg-type]
    for n in range(WAIT_LIMIT):
        assert held.take(TaskStopped(f"t{n}", 1, "completed", done), n + 1) is not None
    assert held.take(TaskStopped("late", 1, "completed", done), 999) is None  # the supervisor's, then
    assert [stage.task_id for stage in held.release()] == ["t0"] and held.release() == []


def test_a_task_actor_reflects_when_the_reflector_is_on_and_a_completed_run_is_its_task_s_done() -> None:
    settings = Settings()
    assert limit_for(settings) == settings.pools.llm_workers
    assert limit_for(settings.with_overrides({"memory": {"reflector": False}})) == 0
    gated = settings.with_overrides({"verification": {"gates": [{"name": "ok", "command": ["true"]}]}})
    assert limit_for(gated) == 0  # done only once its gates pass: the supervisor hands it out then


def test_a_reflection_asks_on_its_stages_tier_and_a_run_stage_on_its_tasks() -> None:
    """A task's tier picks the model of its stages; its post-task reflection runs on the reflector's own
    (no tier in its request), as when the supervisor sent it."""
    task = TaskFSM.create("classic", "what is 2 + 3?", task_id="t-tier").snapshot()
    context = task.context.model_copy(update={"tier": "small"})
    stage = HeldReflections(limit=1).take(TaskStopped("t-tier", 1, "completed", task.model_copy(
        update={"context": context})), token=9)
    assert stage is not None and stage.tier is None
    assert stage.__class__(LLM, "t-tier", 1, 2, "think", "classic", context).tier == "small"


def test_a_reflection_asks_with_its_tasks_priority() -> None:
    task = TaskFSM.create("classic", "what is 2 + 3?", task_id="t-p", priority=1).snapshot()
    stage = HeldReflections(limit=1).take(TaskStopped("t-p", 1, "completed", task), token=9)
    assert stage is not None and stage.priority == 1
