"""A task's models pickled (a context crosses a process with every stage: the task actor's pickle, the worker's
unpickle): as each model's class name, fields and fields set, the same model back, never pydantic's state dict."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from pegasus.run.host import AskPool, RunHost
from pegasus.task import TaskContext, TaskFSM, models
from pegasus.task.models import ActionResult, Plan, PlanStep, Recall, TaskSnapshot
from tests.pegasus.run.test_transition_costs import run_classic


def _walk(value: Any) -> list[Any]:
    """``value`` and every model, dict and list inside it."""
    inner = value.__dict__.values() if isinstance(value, BaseModel) else \
        value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return [value, *(found for item in inner for found in _walk(item))]


def test_a_context_at_its_last_stage_pickles_without_pydantics_state_and_comes_back_the_same() -> None:
    """pydantic's pickle of a model is a dict of four entries (its fields, the fields set, extra, private) and its
    class found by module and name: a classic task's context at its reflect stage took ~18 us to pickle and ~21 to
    unpickle, four times its fields alone."""
    asks = [command for command in run_classic(RunHost(pid=7), "t1") if isinstance(command, AskPool)]
    context = asks[-1].stage.context
    assert {type(model) for model in _walk(context)} >= {TaskContext, Plan, PlanStep, ActionResult, Recall}
    data = pickle.dumps(context, protocol=pickle.HIGHEST_PROTOCOL)
    assert b"__pydantic_fields_set__" not in data and b"__pydantic_extra__" not in data
    back = pickle.loads(data)
    assert back == context and back.model_dump(mode="json") == context.model_dump(mode="json")
    for before, after in zip(_walk(context), _walk(back), strict=True):
        assert type(after) is type(before)
        if isinstance(before, BaseModel):
            assert after.model_fields_set == before.model_fields_set
    back.iteration = 2  # still validated on assignment
    with pytest.raises(ValidationError):
        back.iteration = "two"  # type: ignore[assignment]


def test_a_snapshot_pickles_with_its_history_and_times() -> None:
    fsm = TaskFSM.create("classic", "what is 2 + 3?", task_id="t1")
    snapshot = fsm.snapshot()
    back = pickle.loads(pickle.dumps(snapshot, protocol=pickle.HIGHEST_PROTOCOL))
    assert isinstance(back, TaskSnapshot) and back == snapshot and back.created_at == snapshot.created_at
    assert TaskFSM.restore(back).state == fsm.state


def test_a_second_model_of_a_taken_name_is_refused_not_made_the_one_pickles_come_back_as() -> None:
    """A pickle names its model by class name alone: a later model of the same name (a test's, a plugin's) would
    have turned every real one unpickled into it."""
    with pytest.raises(TypeError, match="Plan exists already"):
        type("Plan", (models._Model,), {"__annotations__": {"other": int}, "other": 0})
    assert type(pickle.loads(pickle.dumps(Plan(goal="g")))) is Plan

