"""One model call that steps down the capability ladder when the endpoint refuses a parameter.

What it owns: what each (base_url, model) is known to take in this process
(``KNOWN``; a worker learns once and every later call starts there), and the
loop: build the request for the known shape, send it, and on a 400 that names a
parameter the request carried, take the next shape at once and send again (a
refusal is not a task failure).  What it must not do: decide the next shape
(pegasus.llm.capabilities does, purely) or parse stage replies.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pegasus.llm import capabilities, usage
from pegasus.llm.capabilities import Schema, Shape
from pegasus.llm.client import ChatClient, Completion, LLMBadRequest

_lock = threading.Lock()
# (base_url, model, the ladder's settings) -> the shape it takes, for the life of the process.
KNOWN: dict[tuple[Any, ...], Shape] = {}
MAX_STEPS = 8  # more than the ladder has rungs: a server that refuses everything fails clearly


def _key(client: ChatClient) -> tuple[Any, ...]:
    config = client.config  # the settings are part of the key: a fixed rung is not overridden by what auto learnt
    return (config.base_url, config.model, capabilities.initial(config))


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
        if KNOWN.get(key, old) == old:  # another thread may have learnt the same first
            KNOWN[key] = new


def complete(client: ChatClient, build: Callable[[Shape], list[dict[str, Any]]], *,
             tools: Sequence[Mapping[str, Any]] | None = None, tool_choice: str | None = None,
             schema: Schema | None = None) -> tuple[Completion, Shape]:
    """The reply and the shape it was asked with; ``build(shape)`` gives the messages for that shape
    (the prompted tool protocol lists the tools in the prompt).  LLMError when the call fails, a 400
    that no step down avoids included (its message names the setting that holds the ladder)."""
    shape = known(client)
    for _ in range(MAX_STEPS):
        body = capabilities.request(client.config, shape, build(shape), tools=tools, tool_choice=tool_choice,
                                    schema=schema)
        try:
            return client.send(body), shape
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
