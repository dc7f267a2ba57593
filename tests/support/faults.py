"""Fault injection for the log-content tests, loaded as a tool plugin
(``[tools] plugins = ["tests.support.faults:register"]``).

Importing it makes chosen tasks fail where Pegasus logs errors, each with the task
text in the exception message and in a local variable: a task whose text holds
``FAIL-IN-SUBMIT`` fails inside the supervisor's submit, ``FAIL-IN-TASK`` inside
its task actor (the first transition after perceiving), ``FAIL-IN-THINK`` inside
the think stage (a stage worker).  Plugins are imported in every process that
builds the tool registry, before the task actors and workers are forked, so each
of those processes is patched.  Never load it outside tests.
"""

from __future__ import annotations

from typing import Any

from pegasus.admission import Admission
from pegasus.cognitive.offline import OfflineThinker
from pegasus.task.fsm import TaskFSM
from pegasus.tools.registry import ToolRegistry


def _failing_submit(original: Any) -> Any:
    def submit(self: Admission, text: str, *args: Any, **kwargs: Any) -> Any:
        if "FAIL-IN-SUBMIT" in text:
            held = f"held by a local: {text}"  # noqa: F841 - what a rendered frame's locals would show
            raise RuntimeError(f"injected submit failure for {text}")
        return original(self, text, *args, **kwargs)
    return submit


def _failing_transition(original: Any) -> Any:
    def transition(self: TaskFSM, event: Any, **payload: Any) -> str:
        text = self.context.input_text
        if "FAIL-IN-TASK" in text and self.state == "perceiving":
            raise RuntimeError(f"injected task actor failure for {text}")
        return original(self, event, **payload)
    return transition


def _failing_think(original: Any) -> Any:
    def run(self: OfflineThinker, context: Any) -> Any:
        text = context.input_text
        if "FAIL-IN-THINK" in text:
            raise RuntimeError(f"injected think failure for {text}")
        return original(self, context)
    return run


if not getattr(Admission.submit, "injected", False):
    for owner, name, wrap in ((Admission, "submit", _failing_submit), (TaskFSM, "transition", _failing_transition),
                              (OfflineThinker, "run", _failing_think)):
        patched = wrap(getattr(owner, name))
        patched.injected = True
        setattr(owner, name, patched)


def register(registry: ToolRegistry) -> None:
    """The plugin entry: the patches above are its whole effect; it adds no tool."""
