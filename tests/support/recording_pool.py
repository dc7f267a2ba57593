"""A stand-in pool for task-actor tests: it records StageRequests and answers none.

The test reads what was requested (``"requests"``) and answers as it likes, so it
can send stale and current results to a task actor in any order.
"""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorTypeDispatcher

from actors.messages import StageRequest


class RecordingPool(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requests: list[StageRequest] = []

    def receiveMsg_StageRequest(self, request: StageRequest, sender: Any) -> None:
        self.requests.append(request)

    def receiveMsg_str(self, message: str, sender: Any) -> None:
        if message == "requests":
            self.send(sender, list(self.requests))
