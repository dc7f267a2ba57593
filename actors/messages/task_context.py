"""A client asking the supervisor for what a task knows: its context as of its last checkpoint (the plan, its
steps' results, its reflections), which the dashboard's task page shows."""

from __future__ import annotations

from pydantic import Field

from actors.messages.requests import Request


class TaskContextRequest(Request):
    task_id: str = Field(min_length=1, max_length=64)
