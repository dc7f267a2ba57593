"""Streamed chat completions: chunks accumulated into the same ``Completion``, text handed on as it comes.

It owns asking with ``stream=True``, assembling content, tool calls, finish reason and usage from
the chunks, handing text to the calling thread's listener (which may close the stream: a canceled
stage) and knowing a 400 that refuses streaming.  Only a thread inside ``listening(sink)`` streams.
It must not build the request, retry, or talk to actors.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pegasus.llm import usage
from pegasus.llm.client import Completion, LLMError, ToolCall, usage_of
from pegasus.llm.listen import listening as listening  # noqa: F401 - where a sink is opened
from pegasus.llm.loops import LoopWatch

FLUSH_S = 0.05  # a piece of text waits at most this long for more (see TextBuffer)
FLUSH_CHARS = 512  # ... or until this much has gathered


class StreamCanceled(LLMError):
    """The stream was closed before its end (the stage was canceled or overran its deadline)."""


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class StreamAccumulator:
    """Chunks in (``add``), one Completion out (``completion``): what the non-streaming reply would say."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.content: list[str] = []
        self.calls: dict[int, _Call] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, int] = {}
        self.chunks = 0

    def add(self, chunk: Any) -> str:
        """Take one chunk; the text it adds to the content ("" if none)."""
        self.chunks += 1
        self.model = str(getattr(chunk, "model", None) or self.model)
        usage = getattr(chunk, "usage", None)
        if usage is not None:  # the final chunk (include_usage); some servers send it on every chunk
            self.usage = usage_of(usage)
        text = ""
        for choice in getattr(chunk, "choices", None) or []:
            if getattr(choice, "index", 0) != 0:
                continue  # n > 1 is never asked for
            delta = choice.delta
            if delta is not None:
                text += delta.content or ""
                for piece in delta.tool_calls or []:
                    call = self.calls.setdefault(int(piece.index or 0), _Call())
                    call.id = piece.id or call.id
                    function = piece.function
                    if function is not None:
                        call.name = call.name or function.name or ""  # whole, in the call's first piece
                        call.arguments.append(function.arguments or "")
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        if text:
            self.content.append(text)
        return text

    def completion(self) -> Completion:
        if not self.chunks:
            raise LLMError("the stream ended before its first chunk")
        calls = tuple(ToolCall(id=call.id or f"call_{index}", name=call.name,
                               arguments="".join(call.arguments) or "{}")
                      for index, call in sorted(self.calls.items()) if call.name)
        content = "".join(self.content) if self.content or not calls else None
        return Completion(content=content, tool_calls=calls, usage=self.usage, model=self.model,
                          finish_reason=self.finish_reason)


class DeltaSink:
    """Where one stage's streamed text goes (``on_text``), and the handle that stops its stream.

    ``close()`` may come from another thread (the worker's, on a cancel): it marks
    the sink closed and closes the HTTP response, which ends the read the stream
    thread is blocked in; the stream then raises StreamCanceled.
    """

    def __init__(self, on_text: Callable[[str], None]) -> None:
        self.on_text = on_text
        self.closed = threading.Event()
        self.calls = 0  # streamed calls begun (the current one's number)
        self._response: Any = None
        self._lock = threading.Lock()

    def attach(self, response: Any) -> None:
        with self._lock:
            self._response = response
        if self.closed.is_set():
            _close(response)

    def complete(self, sdk: Any, request: Mapping[str, Any], model: str, loop_repeats: int = 0) -> Completion:
        return complete_streaming(sdk, request, self, model, loop_repeats)

    def refused(self, exc: BaseException) -> bool:
        return refuses_stream(exc)

    def close(self) -> None:
        self.closed.set()
        with self._lock:
            response = self._response
        if response is not None:
            _close(response)


def _close(stream: Any) -> None:  # the stage was stopped: never reused
    """Close the SDK stream and shut its socket down: ``close`` alone does not wake a read
    blocked in another thread (a socket closed under a reader stays blocked on Linux)."""
    try:
        network = stream.response.extensions.get("network_stream")
        sock = network.get_extra_info("socket") if network is not None else None
        if sock is not None:
            import socket  # noqa: PLC0415

            sock.shutdown(socket.SHUT_RDWR)
    except Exception:  # noqa: BLE001 - already closed, or another transport: close() below still runs
        pass
    try:
        stream.close()
    except Exception:  # noqa: BLE001
        pass


def refuses_stream(exc: Any) -> bool:
    """A 400 whose message names streaming: the server does not stream (it is asked without, from then on)."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    text = str(error.get("message", "") if isinstance(error, dict) else exc).lower()
    if isinstance(error, dict) and str(error.get("param") or "").startswith("stream"):
        return True
    return getattr(exc, "status_code", None) == 400 and "stream" in text


def complete_streaming(sdk: Any, request: Mapping[str, Any], sink: DeltaSink, model: str,
                       loop_repeats: int = 0) -> Completion:
    """One streamed call: the Completion the chunks add up to; each piece of text goes to ``sink``.

    The SDK's own errors propagate (the caller maps them); a stream closed by the
    sink raises StreamCanceled, a connection lost mid-stream LLMError.  A reply that ends in one passage
    written ``loop_repeats`` times in a row (pegasus.llm.loops) is stopped there, as if it had run to the
    token cap (``finish_reason`` "length"): closing the stream stops the server's decoding.
    """
    if sink.closed.is_set():
        raise StreamCanceled("the stage was stopped before the model was asked")
    sink.calls += 1
    response = sdk.chat.completions.create(**request, stream=True, stream_options={"include_usage": True})
    sink.attach(response)
    accumulator = StreamAccumulator(model)
    watch = LoopWatch(loop_repeats)
    try:
        for chunk in response:
            text = accumulator.add(chunk)
            if sink.closed.is_set():
                break
            if text:
                sink.on_text(text)
                if watch.add(text):
                    accumulator.finish_reason = "length"
                    usage.degraded(f"the reply wrote one passage {loop_repeats} times in a row: stopped after "
                                   f"{sum(map(len, accumulator.content))} characters (llm.loop_repeats)")
                    break
    except Exception as exc:
        if sink.closed.is_set():
            raise StreamCanceled("the stream was closed: the stage was stopped") from None
        if _is_sdk_error(exc):
            raise
        raise LLMError(f"the stream broke after {accumulator.chunks} chunks: {type(exc).__name__}: {exc}") from None
    finally:
        response.close()  # read to its end or not, the connection is released (or dropped)
    if sink.closed.is_set():
        raise StreamCanceled("the stream was closed: the stage was stopped")
    return accumulator.completion()


def _is_sdk_error(exc: BaseException) -> bool:
    import openai  # noqa: PLC0415

    return isinstance(exc, openai.OpenAIError)


class TextBuffer:
    """Streamed text gathered for the worker to send on: one message per ``FLUSH_S`` or
    ``FLUSH_CHARS``, not one per token (a message costs CPU at both ends; 50 ms is under what a
    reader notices: docs/llm.md, "Streaming").  The first piece of each model call goes at once, and
    the text of two calls never shares a message.  Thread-safe: the stream thread adds, the
    worker's thread takes.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._pending: list[tuple[int, list[str]]] = []  # (call, pieces), oldest first
        self._chars = 0
        self._last: float | None = None  # when text was last taken
        self._call = 0  # the call whose text was taken last
        self.seq = 0  # pieces taken so far

    def add(self, text: str, call: int = 1) -> bool:
        """Keep ``text`` of model call ``call``; True when it is time to send (a call's first piece, or
        enough waited or gathered)."""
        with self._lock:
            first = call != (self._pending[-1][0] if self._pending else self._call)
            if not self._pending or self._pending[-1][0] != call:
                self._pending.append((call, []))
            self._pending[-1][1].append(text)
            self._chars += len(text)
            return (first or self._last is None or self._chars >= FLUSH_CHARS
                    or self.clock() - self._last >= FLUSH_S)

    def due_in(self) -> float | None:
        """Seconds until what is pending should go (None: nothing pending)."""
        with self._lock:
            if not self._pending:
                return None
            return 0.0 if self._last is None else max(0.0, FLUSH_S - (self.clock() - self._last))

    def take(self) -> tuple[int, int, str] | None:
        """The oldest call's gathered text: (piece number from 1, call, text); None when nothing waits."""
        with self._lock:
            if not self._pending:
                return None
            self._call, pieces = self._pending.pop(0)
            text = "".join(pieces)
            self._chars -= len(text)
            self._last = self.clock()
            self.seq += 1
            return self.seq, self._call, text
