"""A memory request's answer over one ``MemoryStore``: the supervisor's for a running system, and
``LocalMemory``'s on the store file when none runs (so both answer alike)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pegasus.memory import service
from pegasus.memory.store import MemoryStore
from pegasus.requests import memory as r

# Each memory request and its answer: one row each, looked up by the request's class.
ANSWERS: dict[type[Any], Callable[[MemoryStore, Any], Any]] = {
    r.MemoryList: lambda store, q: service.list_memory(store, q.prefix, q.episodes),
    r.MemorySearch: lambda store, q: service.search(store, q.text, q.k, q.kinds, q.query_vector),
    r.MemoryShow: lambda store, q: service.show(store, q.item_id),
    r.MemoryWrite: lambda store, q: service.write(store, q.path, q.content, q.vector),
    r.MemoryForget: lambda store, q: service.forget(store, q.item_id),
    r.MemoryExport: lambda store, q: service.export_page(store, q.after_episode, q.limit),
    r.MemoryImport: lambda store, q: service.import_page(store, q.facts, q.episodes),
}


def answer_memory(store: MemoryStore, request: Any) -> Any:
    """The Reply data of ``request`` (a ``pegasus.requests.memory`` request) over ``store``."""
    answer = ANSWERS.get(type(request))
    if answer is None:
        raise ValueError(f"not a memory request: {type(request).__name__}")
    return answer(store, request)
