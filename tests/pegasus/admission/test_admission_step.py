"""Admission in the one core shape: ``step(input) -> list[Command]``, never raising, clock and ids given."""

from __future__ import annotations

import pytest
from hypothesis import given, settings as hsettings, strategies as st

from pegasus.admission import MessageAccepted, Refused, RunEnded, StartRun, StopRun, Submitted, TransitionNotice, WakeAfter
from pegasus.admission import inputs as i
from pegasus.errors import PegasusError
from pegasus.idempotency import IdempotencyConflict
from pegasus.store.errors import StoreUnavailable
from pegasus.task import InvalidStateTransition, TaskNotFoundError
from pegasus.task.errors import QueueFull
from tests.pegasus.admission.test_admission import finish, make


def task(text: str = "job", key: str | None = None, priority: int = 5) -> i.Submit:
    return i.Submit(text, "classic", priority, {}, "test", key)


def test_a_submit_is_answered_submitted_then_its_lifecycle_and_its_run() -> None:
    admission, _ = make()
    out = admission.step(task())
    assert out[0] == Submitted("t1", "classic", 5, "running", existing=False)
    assert [c.to_state for c in out if isinstance(c, TransitionNotice)] == ["draft", "approved", "queued", "running"]
    assert isinstance(out[-1], StartRun) and out[-1].task_id == "t1"


def test_a_key_used_again_answers_its_task_and_changes_nothing_else(tmp_path) -> None:
    from pegasus.store import Store
    from pegasus.admission import Admission
    from pegasus.config import Settings
    admission = Admission(Settings(), id_factory=iter(["t1", "t2"]).__next__, store=Store(tmp_path / "p.db"))
    assert admission.step(task(key="k"))[0].existing is False
    assert admission.step(task(key="k")) == [Submitted("t1", "classic", 5, "running", existing=True)]
    assert isinstance(admission.step(task("other", key="k"))[0].error, IdempotencyConflict)


def test_a_batch_is_all_or_none_and_names_the_task_that_refused_it() -> None:
    admission, _ = make(runtime={"max_pending_tasks": 2, "max_active_tasks": 1})
    refused = admission.step(i.SubmitBatch((task("a"), task("b"), task("c"), task("d"))))
    assert len(refused) == 1 and isinstance(refused[0].error, QueueFull) and admission.records == {}
    out = admission.step(i.SubmitBatch((task("a"), task("b"))))
    assert [c.task_id for c in out if isinstance(c, Submitted)] == ["t1", "t2"]


@pytest.mark.parametrize("event,error", [
    (i.Approve("nope"), TaskNotFoundError), (i.Cancel("nope", "x"), TaskNotFoundError),
    (i.Suspend("t1", "x"), InvalidStateTransition), (i.Resume("t1"), InvalidStateTransition),
    (i.Retry("t1"), InvalidStateTransition), (i.Message("nope", "hi"), TaskNotFoundError),
])
def test_a_request_that_cannot_apply_is_refused_with_the_error_the_client_is_told(event, error) -> None:
    admission, _ = make(runtime={"approval_policy": "manual"})
    admission.step(task())  # t1, a draft
    out = admission.step(event)
    assert len(out) == 1 and isinstance(out[0], Refused) and isinstance(out[0].error, error)


def test_the_store_failing_is_refused_too_for_the_carrier_to_report() -> None:
    admission, _ = make()

    def full(*args, **kwargs):
        raise StoreUnavailable("/x/pegasus.db", "disk full")
    admission.store.create_task = full  # type: ignore[method-assign]
    [refused] = admission.step(task())
    assert isinstance(refused.error, StoreUnavailable) and admission.records == {}


def test_reports_retries_and_the_clock_given_at_construction() -> None:
    admission, clock = make(retry={"backoff_s": 2.0, "max_attempts": 3})
    admission.step(task())
    finish(admission, "t1", "failed")
    out = admission.step(i.Retry("t1"))
    assert WakeAfter(2.0, "t1") in out
    assert admission.step(i.Wake("t1")) == []  # not due yet: the clock says so, no sleep
    clock.now += 2.0
    assert any(isinstance(c, StartRun) for c in admission.step(i.Wake("t1")))
    run = admission.get("t1").run
    out = admission.step(i.RunLost("t1", run, "the task actor died"))
    assert isinstance(out[1], StartRun) and out[1].run == run + 1
    assert any(isinstance(c, StopRun) for c in admission.step(i.Cancel("t1", "enough")))


def test_a_message_is_answered_accepted_with_its_number() -> None:
    admission, _ = make(runtime={"approval_policy": "manual"})
    admission.step(task())
    assert admission.step(i.Message("t1", "also this")) == [MessageAccepted(1, "when it starts")]
    assert isinstance(admission.step(object())[0], Refused)  # type: ignore[arg-type] - not an input at all


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from([
    task(), task(key="k"), i.Approve("t1"), i.Cancel("t1", "x"), i.Suspend("t2", "x"), i.Resume("t1", "go"),
    i.Retry("t2"), i.Message("t1", "hi"), i.Message("t3", ""), i.Wake("t1"), i.RunLost("t1", 1, "died"),
    i.GateAnswered("t2", 1, False), i.Transitioned("t1", 1, "a", "b", "e", "now"), i.Restore(),
]), max_size=25))
def test_step_never_raises_whatever_comes_in_whatever_order(events) -> None:
    admission, _ = make(runtime={"max_active_tasks": 1, "max_pending_tasks": 3})
    for event in events:
        for command in admission.step(event):
            assert not isinstance(command, Refused) or isinstance(command.error, (PegasusError, ValueError))


def ends(out) -> list[tuple[str, int, str, str | None]]:
    return [(c.task_id, c.run, c.outcome, c.failed) for c in out if isinstance(c, RunEnded)]


def test_every_run_is_said_ended_once_however_it_ends_and_a_late_report_or_death_adds_nothing() -> None:
    admission, _ = make(runtime={"max_active_tasks": 8})
    traced = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    admission.step(i.Submit("a", "classic", 5, traced, "test", None))
    for _ in range(5):
        admission.step(task())
    [canceled] = [c for c in admission.step(i.Cancel("t1", "enough")) if isinstance(c, RunEnded)]
    assert (canceled.outcome, canceled.failed, canceled.metadata) == ("canceled", None, traced)  # its trace's parent
    assert ends(finish(admission, "t1")) == []  # the canceled run's report, arriving after
    assert ends(admission.step(i.RunLost("t1", 1, "died after"))) == []
    assert ends(finish(admission, "t2")) == [("t2", 1, "completed", None)]
    assert ends(admission.step(i.RunLost("t2", 1, "the report and the death crossed"))) == []
    assert ends(finish(admission, "t3", "failed", "exception")) == [("t3", 1, "failed", "exception")]
    assert ends(finish(admission, "t4", "suspended")) == [("t4", 1, "suspended", None)]  # waits for a person
    assert ends(admission.step(i.RunLost("t5", 1, "killed"))) == [("t5", 1, "died", "killed")]
    assert ends(finish(admission, "t5")) == [("t5", 2, "completed", None)]  # the run that went on
    assert ends(admission.step(i.RunLost("t6", 1, "let go", "abandoned"))) == [("t6", 1, "abandoned", "let go")]
    assert ends(admission.step(i.Cancel("t6", "enough"))) == [("t6", 2, "canceled", None)]
    assert ends(admission.step(i.Cancel("t4", "not waiting"))) == []  # blocked: no run to end
