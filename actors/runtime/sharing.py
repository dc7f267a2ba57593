"""Pages a system's processes share (copy-on-write after each fork).

``preload_system`` (before the admin is forked) imports the actor tree, builds every deferred pydantic
schema and configures the log once; ``before_forking`` (a pool) loads what its workers will use (tool
plugins; for an llm pool the SDK and its TLS context); ``after_fork`` freezes what a process inherited,
so neither a late import nor a collection copies the shared pages; ``release_file_pages`` (the launcher,
once its system is up) unmaps the code only its start ran.  Figures: docs/memory.md.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import importlib
import json
import linecache
import os
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from actors.messages.supervision import GUARDIAN_CLASS
from actors.runtime import free_blocks

if TYPE_CHECKING:
    from pegasus.config import Settings

_MADV_DONTNEED = 4  # from <sys/mman.h>
_root: int | None = None  # the process that started the system (a client's, a test's): never frozen


def after_fork() -> None:
    """Move everything this process inherited to the collector's permanent generation."""
    gc.freeze()


def preload_system(*, freeze_here: bool, settings_json: str = "") -> None:
    """What a system's processes all load, loaded and built here, before they are forked (see the
    module docstring); ``freeze_here``: this process is the system's own (the launcher), not a client's,
    and with ``settings_json`` (the system's settings) its log is configured here, once for all of them."""
    global _root
    importlib.import_module(GUARDIAN_CLASS.rpartition(".")[0])  # the top actor's module imports every actor's
    for model in _models(BaseModel):
        if not model.__pydantic_complete__ and model.__module__.startswith(("pegasus.", "actors.")):
            with contextlib.suppress(Exception):  # an optimisation: a model that cannot build yet builds where used
                model.model_rebuild()
    if freeze_here and settings_json:
        from pegasus import logs  # noqa: PLC0415 - loaded above, through the actors
        from pegasus.config import Settings  # noqa: PLC0415

        settings = Settings.model_validate_json(settings_json)
        logs.configure_from(settings)
        if settings.mcp.servers:  # the MCP client stack (asyncio), which no actor module imports up front
            importlib.import_module("pegasus.tools.mcp")
        for entry in settings.tools.plugins:  # one copy, not one each in the supervisor and both pools
            with contextlib.suppress(Exception):  # an optimisation: where it is used, its import says what failed
                importlib.import_module(entry.partition(":")[0])
    if freeze_here:
        linecache.clearcache()  # Thespian's sources, read by the patches' checks (~0.6 MiB): never needed again
        gc.collect()  # the build's garbage, before its pages are shared
        free_blocks.take_free_blocks()  # and the holes it and the build left, taken: see actors/runtime/free_blocks.py
        gc.freeze()
    if _root is None:
        _root = os.getpid()
        os.register_at_fork(before=_freeze_unless_root, after_in_child=gc.freeze)


def release_file_pages() -> int:
    """Unmap this process's resident pages of read-only files that hold no private copy; the KiB released.

    The launcher's preload ran code no process of the system runs again (the import system, pydantic-core's
    schema builder): those pages of libpython and of the extension modules were mapped in the launcher alone
    (a fork copies no file page's mapping: a child maps what it runs).  The page cache keeps them, and a later
    use maps them again.  A mapping holding anonymous pages (ld.so's relocated read-only data) is left whole.
    """
    released = 0
    try:
        madvise = ctypes.CDLL(None, use_errno=True).madvise
        for start, end, resident in _read_only_file_maps():
            if madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), _MADV_DONTNEED) == 0:
                released += resident
    except (OSError, AttributeError, ValueError):  # no /proc or no madvise here: an optimisation, left out
        pass
    return released


def _read_only_file_maps() -> list[tuple[int, int, int]]:
    """(start, end, resident KiB) of each private read-only mapping of a file with no anonymous page, from smaps."""
    found, current = [], None
    with open("/proc/self/smaps", encoding="ascii", errors="replace") as smaps:
        for line in smaps:
            head = line.split()
            if "-" in head[0] and len(head) >= 5:  # a mapping's first line: range perms offset dev inode [path]
                low, _, high = head[0].partition("-")
                path = head[5] if len(head) > 5 else ""
                plain = path.startswith("/") and head[1][1] != "w" and head[1][3] == "p"
                current = [int(low, 16), int(high, 16), 0, 0] if plain else None
                if current is not None:
                    found.append(current)
            elif current is not None and head[0] in ("Rss:", "Anonymous:"):
                current[2 if head[0] == "Rss:" else 3] = int(head[1])
    return [(low, high, rss) for low, high, rss, anonymous in found if anonymous == 0 and rss > 0]


def _models(root: type[BaseModel]) -> list[type[BaseModel]]:
    found = []
    for sub in root.__subclasses__():
        found += [sub, *_models(sub)]
    return found


def _freeze_unless_root() -> None:
    if os.getpid() != _root:
        gc.freeze()


def before_forking(settings: Settings, pool: str) -> None:
    """Load what this pool's workers will load, then freeze it (see the module docstring).  Never raises:
    a worker imports what is missing itself, as it would without this."""
    # Imported here: a process that only starts or attaches to a system never needs them.
    from pegasus import logs
    from pegasus.task.names import PoolName

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

    from pegasus.llm import shared

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
