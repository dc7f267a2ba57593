"""A task's trace ids (derived, W3C traceparent) and the calls a stage records (pegasus/tracing.py)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st
from pydantic import BaseModel

from pegasus import tracing
from pegasus.tools.registry import Tool, ToolNotFoundError, ToolRegistry

class _Text(BaseModel):
    text: str


PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_a_task_with_a_traceparent_is_in_its_callers_trace() -> None:
    trace = tracing.task_trace("t1", {"traceparent": PARENT})
    assert (trace.trace_id, trace.parent_span_id) == ("0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331")


@pytest.mark.parametrize("flags,sampled", [("01", True), ("00", False), ("03", True), ("02", False), ("ff", True)])
def test_the_callers_sampled_flag_is_kept_down_the_task_tree(flags: str, sampled: bool) -> None:
    metadata = {"traceparent": PARENT[:-2] + flags}
    assert tracing.task_trace("t1", metadata).sampled is sampled
    child = {"traceparent": tracing.child_traceparent("t1", 2, metadata)}
    assert tracing.task_trace("t1/child", child).sampled is sampled  # a sub-task's spans as its parent's
    grandchild = {"traceparent": tracing.child_traceparent("t1/child", 1, child)}
    assert tracing.task_trace("t1/grandchild", grandchild).sampled is sampled
    assert tracing.task_trace("t1", {}).sampled  # no caller: its own trace, recorded


@pytest.mark.parametrize("bad", [
    None, 7, "", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331",  # no flags
    "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # an all-zero trace id is invalid (W3C)
    "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # so is an all-zero span id
    "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff is forbidden
    "00-0af7651916cd43dd8448eb211c80319g-b7ad6b7169203331-01",  # not hex
])
def test_an_invalid_traceparent_is_ignored(bad: object) -> None:
    assert tracing.parse_traceparent(bad) is None
    trace = tracing.task_trace("t1", {"traceparent": bad})
    assert trace == tracing.task_trace("t1", {}) and trace.parent_span_id is None


@given(st.text(min_size=1, max_size=40), st.integers(min_value=0, max_value=10**6))
def test_ids_are_derived_from_the_task_alone_and_well_formed(task_id: str, run: int) -> None:
    trace = tracing.task_trace(task_id, None)
    assert trace == tracing.task_trace(task_id, {"other": "x"})  # the same wherever it is computed
    assert re.fullmatch(r"[0-9a-f]{32}", trace.trace_id) and set(trace.trace_id) != {"0"}
    span = tracing.run_span_id(task_id, run)
    assert re.fullmatch(r"[0-9a-f]{16}", span) and set(span) != {"0"}
    assert span != tracing.run_span_id(task_id, run + 1)


def test_calls_are_kept_only_inside_recording_with_their_times_and_errors() -> None:
    registry = ToolRegistry()
    registry.register(Tool("echo", "say it", _Text, "pure", 5.0, lambda args, ctx: args.text))
    registry.call("echo", {"text": "before"})  # outside recording: nothing kept
    with tracing.recording() as calls:
        assert registry.call("echo", {"text": "hi"}) == "hi"
        with pytest.raises(ToolNotFoundError):
            registry.call("missing", {})
    assert [(c.kind, c.name, c.error) for c in calls] == [("tool", "echo", None),
                                                         ("tool", "missing", "ToolNotFoundError")]
    assert calls[0].attributes == {"pegasus.tool.effect": "pure"}
    assert all(0 < c.started_ns <= c.ended_ns for c in calls)
