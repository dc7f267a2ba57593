"""Sends several messages in one handler, so they reach the target back to back.

On simpleSystemBase a client's tell() runs each message to completion; a pool's
queue only fills when requests arrive together, as they do from busy actors.
Replies to the burst are forwarded to whoever asked for it.
"""

from __future__ import annotations

from typing import Any

from thespian.actors import ActorTypeDispatcher


class Burst(ActorTypeDispatcher):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.requester: Any = None

    def receiveMsg_tuple(self, message: tuple[Any, list[Any]], sender: Any) -> None:
        target, burst = message
        self.requester = sender
        for each in burst:
            self.send(target, each)

    def receiveUnrecognizedMessage(self, message: Any, sender: Any) -> None:
        if self.requester is not None:
            self.send(self.requester, message)
