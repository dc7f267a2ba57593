"""Pages a stage worker shares with its pool (copy-on-write after Thespian's fork).

``before_forking`` (the pool) loads what its workers will use -- the tool plugins, and for an llm
pool on a model endpoint the SDK and its TLS context -- and freezes it; ``after_fork`` (the worker)
freezes what it inherited, so neither a late import nor a collection copies the shared pages.
Figures and method: docs/memory.md.
"""

from __future__ import annotations

import gc
import importlib
import json
from typing import Any

from pegasus import logs
from pegasus.config import Settings
from pegasus.llm import shared
from pegasus.task.names import PoolName


def after_fork() -> None:
    """Move everything this process inherited to the collector's permanent generation."""
    gc.freeze()


def before_forking(settings: Settings, pool: str) -> None:
    """Load what this pool's workers will load, then freeze it (see the module docstring).  Never raises:
    a worker imports what is missing itself, as it would without this."""
    try:
        for entry in settings.tools.plugins:
            importlib.import_module(entry.partition(":")[0])
        if pool == PoolName.LLM and settings.llm.provider == "openai":
            _load_model_sdk(settings)
    except Exception as exc:  # noqa: BLE001 - an optimisation: the worker reports the real error itself
        logs.get("pool", pool=pool).info("preload_skipped", error=f"{type(exc).__name__}: {exc}")
    gc.freeze()  # not collected first: the holes a collection leaves are what the workers' allocations fill


def _load_model_sdk(settings: Settings) -> None:
    """Import the SDK and make one plain and one streamed call through it, answered in memory (no
    request leaves the process, no key is read): its HTTP stack, chat resources and response types
    load only on a client's first calls, and so do caches of the SDK's (its validators)."""
    import openai  # noqa: PLC0415 - the point: loaded here, once, for every worker

    http: Any = shared.http_library()
    shared.http_client().close()  # the TLS context every client of a worker uses, and the HTTP stack's transport
    sdk: Any = openai.OpenAI(api_key="preload", base_url=settings.llm.base_url or None, max_retries=0,
                             http_client=openai.DefaultHttpxClient(transport=http.MockTransport(_answer(http))))
    try:
        ask = {"model": "preload", "messages": [{"role": "user", "content": "hi"}]}
        sdk.chat.completions.create(**ask)
        for _ in sdk.chat.completions.create(**ask, stream=True, stream_options={"include_usage": True}):
            pass
    finally:
        sdk.close()


def _answer(http: Any) -> Any:
    """The in-memory endpoint of ``_load_model_sdk``: a completion, or its chunks when asked to stream."""
    usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
    head = {"id": "preload", "created": 0, "model": "preload"}
    message = {"role": "assistant", "content": "ok"}

    def answer(request: Any) -> Any:
        if not json.loads(request.content).get("stream"):
            return http.Response(200, json={**head, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": message, "finish_reason": "stop"}]})
        chunk = {**head, "object": "chat.completion.chunk"}
        events = [{**chunk, "choices": [{"index": 0, "delta": message, "finish_reason": None}]},
                  {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                  {**chunk, "choices": [], "usage": usage}]
        body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
        return http.Response(200, content=body.encode(), headers={"content-type": "text/event-stream"})

    return answer
