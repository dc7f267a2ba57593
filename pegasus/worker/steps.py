"""What a worker core reads of a request's plan: the step it runs, that step's tool, and whether that
tool is a call to the machine's MCP host."""

from __future__ import annotations

from typing import Any

from pegasus.task.names import StageName
from pegasus.worker.inputs import StageAsk


def _step(request: StageAsk) -> Any:
    plan = request.context.plan if request.context is not None else None
    return next((s for s in plan.steps if s.index == request.step_index), None) if plan else None


def tool_of(request: StageAsk) -> str | None:
    """The tool the request's step names (journalled with it), None without a step."""
    step = _step(request)
    return None if step is None else str(step.action_params.get("tool"))


def machine_call(request: StageAsk, servers: frozenset[str]) -> tuple[str, str, dict[str, Any]] | None:
    """(server, tool, arguments) when the request is an act step calling a tool of a machine-scope MCP
    server (one of ``servers``); None for any other."""
    if request.stage != StageName.ACT or not servers or request.context is None:
        return None
    step = _step(request)
    if step is None or step.action_type != "tool_call":
        return None
    server, dot, tool = str(step.action_params.get("tool")).partition(".")
    arguments = step.action_params.get("args", {})
    if not dot or server not in servers or not isinstance(arguments, dict):
        return None
    return server, tool, dict(arguments)
