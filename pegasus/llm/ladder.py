"""One model call that steps down the capability ladder when the endpoint refuses a parameter.

It owns what each (base_url, model) is known to take in this process (``KNOWN``) and the loop:
send the known shape, and on a refusal take the next shape at once (a refusal is not a task
failure).  ``learned()`` gives what this process stepped down to, for the worker to report to its
pool; ``adopt(known)`` takes what the pool gathered, so a system pays for each refusal once.  It
must not decide the next shape (``pegasus.llm.capabilities`` does) or parse stage replies.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from pegasus.llm import capabilities, usage
from pegasus.llm.capabilities import Schema, Shape
from pegasus.llm.client import ChatClient, Completion, LLMBadRequest

_lock = threading.Lock()
# (base_url, model, the ladder's settings), as JSON text -> the shape it takes, for the life of the process.
KNOWN: dict[str, Shape] = {}
_LEARNED: dict[str, Shape] = {}  # stepped down to here since learned() was last asked
MAX_STEPS = 8  # more than the ladder has rungs: a server that refuses everything fails clearly
Known = tuple[tuple[str, dict[str, Any]], ...]  # (key, the shape's fields): what a pool gathers and hands on


def _key(client: ChatClient) -> str:
    config = client.config  # the settings are part of the key: a fixed rung is not overridden by what auto learnt
    return json.dumps([config.base_url, config.model, asdict(capabilities.initial(config))], sort_keys=True)


def known(client: ChatClient) -> Shape:
    key = _key(client)
    with _lock:
        shape = KNOWN.get(key)
        if shape is None:
            shape = KNOWN[key] = capabilities.initial(client.config)
    return shape


def _learn(client: ChatClient, old: Shape, new: Shape) -> None:
    key = _key(client)
    with _lock:
        KNOWN[key] = _LEARNED[key] = capabilities.lower(KNOWN.get(key, old), new)  # another thread may have too


def learned() -> Known:
    """What this process stepped down to since it was last asked (and forgets having told)."""
    with _lock:
        out = tuple((key, asdict(shape)) for key, shape in _LEARNED.items())
        _LEARNED.clear()
    return out


def forget() -> None:
    """Know nothing: a worker forked from a process that made model calls of its own (an application, a
    test) would report that process's endpoints to its pool as its own."""
    with _lock:
        KNOWN.clear()
        _LEARNED.clear()


def adopt(known: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
    """Take what other processes learnt (a shape only ever steps down: each rung the lower of the two)."""
    with _lock:
        for key, fields in known:
            shape = Shape(**fields)
            KNOWN[key] = capabilities.lower(KNOWN[key], shape) if key in KNOWN else shape


def complete(client: ChatClient, build: Callable[[Shape], list[dict[str, Any]]], *,
             tools: Sequence[Mapping[str, Any]] | None = None, tool_choice: str | None = None,
             schema: Schema | None = None, short: int = 0) -> tuple[Completion, Shape]:
    """The reply and the shape it was asked with; ``build(shape)`` gives the messages for that shape
    (the prompted tool protocol lists the tools in the prompt); ``short``: the stage's own output cap
    (capabilities.output_tokens).  LLMError when the call fails, a 400
    that no step down avoids included (its message names the setting that holds the ladder)."""
    shape = known(client)
    for _ in range(MAX_STEPS):
        body = capabilities.request(client.config, shape, build(shape), tools=tools, tool_choice=tool_choice,
                                    schema=schema, short=short)
        try:
            return _send(client, shape, body), shape
        except LLMBadRequest as exc:
            step = capabilities.step_down(client.config, shape, body.keys(), exc.detail)
            if step is None:
                raise LLMBadRequest(f"{exc} ({_held(client, shape, body.keys(), exc.detail)})", exc.detail,
                                    exc.status) from None
            _learn(client, shape, step.shape)
            usage.step(step.change)  # shown in the stage's record (its usage), once per process and model
            shape = step.shape
    raise LLMBadRequest(f"{client.endpoint} refused {MAX_STEPS} request shapes; the last: {shape.describe()}",
                        "", 400)


def _send(client: ChatClient, shape: Shape, body: dict[str, Any]) -> Completion:
    """``client.send``, streamed only while no worker saw this endpoint refuse a stream; one cut short
    (llama-cpp-python cuts a stream when another request waits; the reply is asked again whole)
    says the server decodes one request at a time (``serial``): every worker's pool learns it."""
    client.refuses_stream = client.refuses_stream or not shape.stream
    client.serial = client.serial or shape.serial
    try:
        return client.send(body)
    finally:
        if (client.refuses_stream and shape.stream) or (client.serial and not shape.serial):
            _learn(client, shape, replace(shape, stream=shape.stream and not client.refuses_stream,
                                          serial=shape.serial or client.serial))  # (each only steps down)


def _held(client: ChatClient, shape: Shape, sent: Any, detail: str) -> str:
    """Why the ladder did not step: which setting fixes the refused parameter, if one does."""
    parameter = capabilities.named(detail, sent)
    settings = client.config
    fixed = {"response_format": ("structured_output", settings.structured_output),
             "tools": ("tool_calls", settings.tool_calls),
             capabilities.MAX_TOKENS: ("token_limit_param", settings.token_limit_param),
             capabilities.MAX_COMPLETION_TOKENS: ("token_limit_param", settings.token_limit_param)}
    if parameter in fixed and fixed[parameter][1] != capabilities.AUTO:
        key, value = fixed[parameter]
        return f"llm.{key} = {value!r} is set, so Pegasus does not step down; set it to \"auto\" or another value"
    return f"sent with {shape.describe()}"
