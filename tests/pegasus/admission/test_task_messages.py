"""Messages to a task (issue 20), without an actor system: the task-run core takes them at its next
transition (suspend, then re-think), and Admission decides by lifecycle state where one goes."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from pegasus.admission import Admission, MessageRun, StartRun
from pegasus.admission.messages import taken_through
from pegasus.config import Settings
from pegasus.run import Answered, MessagesSent, Command, RunSnapshot, SendStage, TaskRun, TaskStopped, TaskTransitioned
from pegasus.task import InvalidStateTransition, Plan, PlanStep, TaskFSM
from pegasus.task.names import CognitiveState as S, StageName
from tests.pegasus.conftest import FixedClock, Ids, start_run
from tests.pegasus.admission.test_admission import finish, starts
from tests.pegasus.run.test_task_run import acting, answer, of, step_done


def begin(task: TaskFSM, inbox: tuple[tuple[int, str], ...] = (), **kwargs: Any) -> tuple[TaskRun, list[Command]]:
    state = RunSnapshot(task.snapshot(), 1, 5, "1.0", {}, 0, inbox=inbox)
    run, commands = start_run(state, effect_of={"echo": "pure"}.get, clock=FixedClock(), ids=Ids(), **kwargs)
    assert run is not None
    return run, commands


def moves(commands: list[Command]) -> list[tuple[str, str, str]]:
    return [(r.from_state, r.to_state, r.event) for r in of(TaskTransitioned, commands)]


def two_steps(machine: str = "classic") -> TaskFSM:
    task = acting("echo", machine)
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="a", action_params={"tool": "echo"}),
                                 PlanStep(index=1, description="b", action_params={"tool": "echo"})])
    task.context.plan = plan
    return task


# -- the task-run core -----------------------------------------------------------------------------


@pytest.mark.parametrize(("machine", "rethink", "stage"), [("classic", S.THINKING, StageName.THINK),
                                                           ("reason_act", S.REASONING, StageName.REASON)])
def test_a_message_waits_for_the_stage_in_flight_then_the_task_suspends_and_rethinks(
        machine: str, rethink: str, stage: str) -> None:
    run, commands = begin(two_steps(machine))
    [send] = of(SendStage, commands)
    assert run.step(MessagesSent("t1", ((1, "only papers from 2024"),)))[0].event == "message_waiting"
    assert run.step(MessagesSent("t9", ((2, "not this task"),))) == []
    assert not run.stopped and run.snapshot().inbox == ((1, "only papers from 2024"),)  # nothing cut short
    commands = run.step(Answered(answer(send, "TOOL_CALL_COMPLETED", step_done(0, "echo"))))
    assert moves(commands) == [(S.ACTING, S.ACTING, "TOOL_CALL_COMPLETED"),
                               (S.ACTING, S.SUSPENDED, "TASK_SUSPENDED"),
                               (S.SUSPENDED, rethink, "MESSAGE_RECEIVED")]
    [send] = of(SendStage, commands)
    assert send.stage == stage and send.context.messages[-1] == {"role": "user", "content": "only papers from 2024"}
    assert send.context.messages_taken == 1 and run.snapshot().inbox == ()
    kinds = [r.checkpoint[0] for r in of(TaskTransitioned, commands)[1:]]
    assert kinds == ["full", "delta"]  # the message is in a checkpoint with its transition


def test_a_run_restarted_from_a_checkpoint_never_takes_a_message_twice() -> None:
    task = two_steps()
    task.transition("TASK_SUSPENDED", reason="a message arrived")
    task.transition("MESSAGE_RECEIVED", messages=["one"], through=1)
    assert task.context.messages_taken == 1
    run, commands = begin(task, inbox=((1, "one"), (2, "two")))
    assert moves(commands) == [(S.THINKING, S.SUSPENDED, "TASK_SUSPENDED"),
                               (S.SUSPENDED, S.THINKING, "MESSAGE_RECEIVED")]
    assert [m["content"] for m in of(SendStage, commands)[0].context.messages] == ["one", "two"]


def test_a_task_that_suspends_for_information_takes_a_waiting_message_at_once() -> None:
    task = TaskFSM.create("classic", "x", task_id="t1")
    task.transition("TASK_CREATED")
    task.transition("PERCEIVE_DONE")
    run, commands = begin(task)
    [send] = of(SendStage, commands)
    run.step(MessagesSent("t1", ((1, "README.md"),)))
    commands = run.step(Answered(answer(send, "NEED_MORE_INFO", {"question": "which file?"})))
    assert moves(commands) == [(S.THINKING, S.SUSPENDED, "NEED_MORE_INFO"),
                               (S.SUSPENDED, S.THINKING, "MESSAGE_RECEIVED")]
    assert not of(TaskStopped, commands)


def test_a_message_that_arrives_as_the_task_completes_is_not_taken() -> None:
    task = TaskFSM.create("reason_act", "x", task_id="t1")
    task.transition("TASK_CREATED")
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="r", action_type="respond")])
    task.transition("REASON_DONE", plan=plan.model_dump(mode="json"))
    run, commands = begin(task)
    [send] = of(SendStage, commands)
    run.step(MessagesSent("t1", ((1, "late"),)))
    commands = run.step(Answered(answer(send, "STEP_COMPLETED", {"result": {"step_index": 0, "action_type": "respond",
                                                                         "success": True}, "final_result": "ok"})))
    assert moves(commands)[-1][1] == S.COMPLETED and of(TaskStopped, commands)[0].state == S.COMPLETED


# -- Admission -------------------------------------------------------------------------------------


def make(**overrides: Any) -> Admission:
    counter = itertools.count(1)
    settings = Settings().with_overrides(overrides) if overrides else Settings()
    return Admission(settings, clock=lambda: 0.0, id_factory=lambda: f"t{next(counter)}")


def test_a_running_task_gets_its_messages_through_its_run_and_each_start_of_it() -> None:
    admission = make()
    admission.submit("a", "classic", 5, {}, "t")
    sent, effects = admission.message("t1", "first")
    assert sent == {"number": 1, "delivery": "at its next transition"}
    assert effects == [MessageRun("t1", 1, ((1, "first"),))]
    _, effects = admission.message("t1", "second")
    assert effects == [MessageRun("t1", 1, ((1, "first"), (2, "second")))]
    assert admission.get("t1").view()["messages_waiting"] == 2
    [start] = [e for e in admission.on_run_lost("t1", 1, "died") if isinstance(e, StartRun)]
    assert start.inbox == ((1, "first"), (2, "second"))  # a restarted run takes them


def test_a_queued_task_starts_with_the_message_in_its_context() -> None:
    admission = make(runtime={"max_active_tasks": 1})
    admission.submit("a", "classic", 5, {}, "t")
    admission.submit("b", "classic", 5, {}, "t")
    sent, effects = admission.message("t2", "use the 2024 data")
    assert (sent["delivery"], effects) == ("when it starts", [])
    [start] = [e for e in finish(admission, "t1") if isinstance(e, StartRun)]
    assert start.task_id == "t2" and start.snapshot.context.messages == [{"role": "user",
                                                                          "content": "use the 2024 data"}]
    assert start.inbox == () and start.snapshot.context.messages_taken == 1


def test_a_suspended_task_is_resumed_with_the_message() -> None:
    admission = make()
    admission.submit("a", "classic", 5, {}, "t")
    finish(admission, "t1", "suspended")
    sent, effects = admission.message("t1", "README.md")
    assert sent["delivery"] == "resumed with it"
    [start] = [e for e in effects if isinstance(e, StartRun)]
    assert (start.resume_event, start.resume_payload) == ("MESSAGE_RECEIVED", {"messages": ["README.md"],
                                                                               "through": 1})


def test_a_message_to_a_task_queued_by_a_resume_joins_the_resume() -> None:
    admission = make(runtime={"max_active_tasks": 1})
    admission.submit("a", "classic", 5, {}, "t")
    finish(admission, "t1", "suspended")
    admission.submit("b", "classic", 5, {}, "t")  # takes the only slot
    admission.resume("t1", "first")
    assert admission.get("t1").state == "queued"
    assert admission.message("t1", "second")[0]["delivery"] == "when it resumes"
    assert taken_through(admission.get("t1")) == 1
    [start] = [e for e in finish(admission, "t2") if isinstance(e, StartRun)]
    assert start.resume_payload == {"messages": ["first", "second"], "through": 1}


def test_a_run_that_stops_suspended_with_messages_waiting_is_resumed_with_them() -> None:
    admission = make()
    admission.submit("a", "classic", 5, {}, "t")
    admission.message("t1", "README.md")  # crossed the run's stop
    effects = finish(admission, "t1", "suspended")
    record = admission.get("t1")
    assert record.state == "running" and starts(effects) == ["t1"] and record.inbox == []
    [start] = [e for e in effects if isinstance(e, StartRun)]
    assert start.resume_payload == {"messages": ["README.md"], "through": 1}


@pytest.mark.parametrize("end", ["completed", "failed"])
def test_a_finished_task_refuses_a_message(end: str) -> None:
    admission = make()
    admission.submit("a", "classic", 5, {}, "t")
    finish(admission, "t1", end, "exception" if end == "failed" else None)
    with pytest.raises(InvalidStateTransition, match="has finished its work"):
        admission.message("t1", "too late")


def test_a_task_suspended_by_request_with_messages_waiting_stays_suspended_with_them_in_its_context() -> None:
    """Regression: resuming it at once would override the request, and leave the suspend unanswered."""
    admission = make()
    admission.submit("a", "classic", 5, {}, "t")
    admission.message("t1", "later")
    admission.suspend("t1", "hold")
    record = admission.get("t1")
    fsm = TaskFSM.restore(record.snapshot)
    fsm.transition("TASK_CREATED")
    fsm.transition("TASK_SUSPENDED", reason="hold")
    admission.on_transition("t1", record.run, "perceiving", "suspended", "TASK_SUSPENDED", "now", None)
    effects = admission.on_stopped("t1", record.run, fsm.state, fsm.snapshot(), None)
    record = admission.get("t1")
    assert record.state == "blocked" and starts(effects) == []
    assert record.snapshot.context.messages == [{"role": "user", "content": "later"}]
    assert taken_through(record) == 1 and record.inbox == []


def test_a_parent_waiting_for_its_sub_tasks_gets_the_message_in_its_context() -> None:
    admission = make()
    admission.submit("a", "classic", 5, {}, "t")
    finish(admission, "t1", "suspended")
    record = admission.get("t1")
    record.snapshot = record.snapshot.model_copy(update={"state": "acting"})  # as a parent blocked on its children
    sent, effects = admission.message("t1", "also the 2023 papers")
    assert (sent["delivery"], effects) == ("when its sub-tasks have ended", [])
    assert record.snapshot.context.messages[-1] == {"role": "user", "content": "also the 2023 papers"}


# -- the caps (issue 28: 3,000 messages of 2 KB were taken, 6 MB stored) -----------------------------------


@pytest.mark.parametrize("store", ["null", "sqlite"])
def test_a_task_takes_messages_up_to_its_caps_and_a_refused_one_changes_nothing(store: str, tmp_path: Any) -> None:
    from pegasus.errors import MessageLimitReached
    from pegasus.store import Store

    counter = itertools.count(1)
    settings = Settings().with_overrides({"runtime": {"task_messages_max": 3, "task_messages_max_bytes": 1024}})
    port = Store(tmp_path / "p.db") if store == "sqlite" else None
    admission = Admission(settings, clock=lambda: 0.0, id_factory=lambda: f"t{next(counter)}", store=port)
    admission.submit("a", "classic", 5, {}, "t")
    admission.submit("b", "classic", 5, {}, "t")
    for n in range(3):
        admission.message("t1", f"message {n}")
    inbox = admission.get("t1").inbox
    with pytest.raises(MessageLimitReached, match=r"has 3 messages: \[runtime\] task_messages_max is 3") as refused:
        admission.message("t1", "one more")
    assert (refused.value.cap, refused.value.limit) == ("task_messages_max", 3)
    assert admission.store.message_totals("t1") == (3, 27) and admission.get("t1").inbox == inbox
    admission.message("t2", "x" * 1000)  # another task has its own caps
    with pytest.raises(MessageLimitReached, match=r"would be 1025 bytes together: \[runtime\] task_messages_max_bytes"):
        admission.message("t2", "x" * 25)
    assert admission.store.message_totals("t2") == (1, 1000)
    if port is not None:
        assert [n for n, _ in port.messages_after("t1", 0)] == [1, 2, 3]  # nothing refused was stored
