"""Who listens to this thread's model calls: the hook ``ChatClient`` asks before it calls.

A module of its own so that the client needs nothing of ``pegasus.llm.stream`` (which
builds on the client): the worker opens ``listening(sink)`` around a stage, and the
client hands each call to the sink, which streams it (``DeltaSink.complete``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from pegasus.config import Settings


def streams(settings: Settings) -> bool:
    """Whether llm stages stream: ``[llm] stream`` with a model provider, on a base whose actors can
    watch a pipe beside their mailbox (multiprocTCPBase; simpleSystemBase runs every actor in one thread)."""
    llm = settings.llm
    return llm.stream and llm.provider == "openai" and settings.system.base == "multiprocTCPBase"


class Listener(Protocol):
    def complete(self, sdk: Any, request: Mapping[str, Any], model: str, loop_repeats: int = 0) -> Any:
        """The call made streamed, its text handed on; the Completion it adds up to (stopped where it
        loops: ``loop_repeats``, pegasus.llm.loops)."""

    def refused(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the endpoint refusing to stream (asked again without, from then on)."""


_LISTENER: ContextVar[Listener | None] = ContextVar("pegasus_llm_listener", default=None)


@contextmanager
def listening(listener: Listener) -> Iterator[Listener]:
    """Stream the model calls this thread makes inside the block to ``listener``."""
    token = _LISTENER.set(listener)
    try:
        yield listener
    finally:
        _LISTENER.reset(token)


def current() -> Listener | None:
    return _LISTENER.get()
