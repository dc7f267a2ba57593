"""Messages between Pegasus's actors: what they carry over the wire."""

from __future__ import annotations

import dataclasses
import pickle

from actors import messages as m
from pegasus.config import Gate
from pegasus.task.models import Plan, PlanStep, TaskContext


def _context() -> TaskContext:
    plan = Plan(goal="g", steps=[PlanStep(index=0, description="echo", action_params={"tool": "echo"})])
    return TaskContext(input_text="echo hi", plan=plan)


def test_a_forwarded_stage_request_keeps_its_context_as_the_requesters_bytes() -> None:
    """A pool unpickles a request and pickles it into a Work: the context is neither decoded nor encoded there."""
    context = _context()
    request = m.StageRequest("t", 3, "act", "classic", context, 0)
    assert request.context is context  # in the requester's process, the object itself

    in_pool = pickle.loads(pickle.dumps(request))
    carried = in_pool.__dict__["_context"]
    assert isinstance(carried, bytes)  # not decoded by the pool
    to_worker = pickle.dumps(m.Work(7, in_pool, None))
    assert bytes(carried) in to_worker  # the requester's pickle, passed on as it came

    in_worker = pickle.loads(to_worker).request
    assert in_worker.context == context and in_worker.context is not context
    assert isinstance(in_worker.__dict__["_context"], TaskContext)  # decoded once, where it was read
    assert (in_worker.task_id, in_worker.token, in_worker.stage, in_worker.step_index) == ("t", 3, "act", 0)
    assert in_worker == request


def test_a_stage_request_stays_a_frozen_dataclass() -> None:
    request = m.StageRequest("t", 1, "gate", gate=Gate(name="lint", command=["true"]))
    assert request.context is None and pickle.loads(pickle.dumps(request)).context is None
    try:
        request.context = _context()  # type: ignore[misc]
    except dataclasses.FrozenInstanceError:
        pass
    else:
        raise AssertionError("a StageRequest must stay frozen")
    moved = dataclasses.replace(pickle.loads(pickle.dumps(m.StageRequest("t", 1, "act", "classic", _context()))),
                                token=2)
    assert moved.token == 2 and moved.context == _context()
    assert "context" in {f.name for f in dataclasses.fields(m.StageRequest)}
