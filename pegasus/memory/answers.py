"""A memory request's answer over one ``MemoryStore``: the supervisor's for a running system, and
``LocalMemory``'s on the store file when none runs (so both answer alike)."""

from __future__ import annotations

from typing import Any

from pegasus.memory import service
from pegasus.memory.store import MemoryStore
from pegasus.requests import memory as r


def answer_memory(store: MemoryStore, request: Any) -> Any:
    """The Reply data of ``request`` (a ``pegasus.requests.memory`` request) over ``store``."""
    if isinstance(request, r.MemoryList):
        return service.list_memory(store, request.prefix, request.episodes)
    if isinstance(request, r.MemorySearch):
        return service.search(store, request.text, request.k, request.kinds, request.query_vector)
    if isinstance(request, r.MemoryShow):
        return service.show(store, request.item_id)
    if isinstance(request, r.MemoryWrite):
        return service.write(store, request.path, request.content, request.vector)
    if isinstance(request, r.MemoryForget):
        return service.forget(store, request.item_id)
    if isinstance(request, r.MemoryExport):
        return service.export_page(store, request.after_episode, request.limit)
    if isinstance(request, r.MemoryImport):
        return service.import_page(store, request.facts, request.episodes)
    raise ValueError(f"not a memory request: {type(request).__name__}")
