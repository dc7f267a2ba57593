"""What ``context`` answers (pegasus.views): the parts of a task's context a person reads, long texts cut."""

from __future__ import annotations

from datetime import UTC, datetime

from pegasus.views import MAX_TEXT, context_view
from pegasus.task.models import ActionResult, Plan, PlanStep, TaskContext, TaskSnapshot


def _snapshot(context: TaskContext) -> TaskSnapshot:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    return TaskSnapshot(machine="classic", task_id="t1", state="reflecting", context=context, created_at=now,
                        updated_at=now)


def test_plan_results_and_reflections_are_shown_and_long_outputs_cut() -> None:
    """A step's huge output is cut to MAX_TEXT characters saying how many were left out; the input is not repeated."""
    context = TaskContext(input_text="do it", plan=Plan(goal="g", steps=[PlanStep(index=0, description="echo")]),
                          actions_done=[ActionResult(step_index=0, tool="echo", success=True, output="x" * (MAX_TEXT + 10))])
    view = context_view("t1", _snapshot(context))
    assert view["state"] == "reflecting"
    assert view["context"]["plan"]["steps"][0]["description"] == "echo"
    output = view["context"]["actions_done"][0]["output"]
    assert output.startswith("x" * MAX_TEXT) and output.endswith("[10 more characters]")
    assert "input_text" not in view["context"] and "reflections" in view["context"]


def test_a_task_without_a_checkpoint_has_an_empty_context() -> None:
    assert context_view("t1", None) == {"task_id": "t1", "state": None, "context": {}}
