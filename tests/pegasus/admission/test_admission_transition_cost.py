"""A lifecycle transition in Admission draws no uuid4 (issue 33: the supervisor makes seven of them a task, and the
uuid4 was 60% of building each one's Event): a lifecycle event's id is never stored."""

from __future__ import annotations

import itertools
import uuid

from pegasus.admission import Admission, TransitionNotice
from pegasus.config import Settings
from pegasus.task import TaskFSM


def test_a_task_through_its_lifecycle_draws_no_uuid(monkeypatch) -> None:
    counter = itertools.count(1)
    admission = Admission(Settings(), clock=lambda: 100.0, id_factory=lambda: f"t{next(counter)}")
    drawn: list[int] = []
    real_uuid4 = uuid.uuid4
    monkeypatch.setattr(uuid, "uuid4", lambda: drawn.append(1) or real_uuid4())
    _, effects = admission.submit("what is 1 + 1?", "classic", 5, {}, "test")
    assert drawn == []
    fsm = TaskFSM.restore(admission.get("t1").snapshot)
    for event, payload in (("TASK_CREATED", {}), ("PERCEIVE_DONE", {}), ("THINK_DONE", {}), ("PLAN_DONE", {}),
                           ("ACT_DONE", {}), ("REFLECT_DONE", {"verdict": "complete", "final_result": "2"})):
        fsm.transition(event, **payload)
    drawn.clear()  # the task's own machine (its task actor's) is not counted here
    effects += admission.on_stopped("t1", admission.get("t1").run, fsm.state, fsm.snapshot(), None)
    lifecycle = [e.to_state for e in effects if isinstance(e, TransitionNotice) and e.machine == "lifecycle"]
    assert lifecycle == ["draft", "approved", "queued", "running", "verifying", "verified", "done"]
    assert drawn == []
