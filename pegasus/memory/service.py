"""The memory operations of the command line and the client, as JSON-able answers over one ``MemoryStore``.

The supervisor runs them for a running system (``actors/supervisor/memory.py``)
and the command line runs them on the store file itself when no system runs,
so both answer alike.  Export and import travel as values (``markdown.Dump``
pieces), a page at a time: the files are written and read by the client, never
by the supervisor, and no request outgrows ``[runtime] max_message_bytes``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from pegasus.memory.embeddings import pack
from pegasus.memory.errors import MemoryStoreError
from pegasus.memory.markdown import Dump
from pegasus.memory.store import MemoryStore
from pegasus.memory.transfer import import_dump
from pegasus.memory.vectors import has_vector
from pegasus.memory.values import KINDS, Episode, Fact, Kind

EXPORT_PAGE = 500  # episodes per export page


def list_memory(store: MemoryStore, prefix: str = "", episodes: int = 20) -> dict[str, Any]:
    """Every fact (current version, without its content) and the newest episodes' titles."""
    return {"facts": [{"id": f.id, "path": f.path, "version": f.version, "bytes": len(f.content.encode()),
                       "updated_at": f.created_at} for f in store.list_facts(prefix)],
            "episodes": [{"id": e.id, "title": e.title, "task_id": e.task_id, "created_at": e.created_at}
                         for e in store.episodes(episodes)],
            "stats": store.stats()}


def search(store: MemoryStore, text: str, k: int, kinds: list[str] | None = None,
           query_vector: list[float] | None = None) -> dict[str, Any]:
    unknown = sorted(set(kinds or ()) - set(KINDS))
    if unknown:
        raise ValueError(f"unknown memory kind(s) {', '.join(unknown)}; the kinds are {', '.join(KINDS)}")
    chosen: tuple[Kind, ...] = tuple(k_ for k_ in KINDS if k_ in kinds) if kinds else ("fact", "episode")
    items = store.search(text, k, kinds=chosen, query_vector=query_vector)
    return {"query": text, "items": [item.as_dict() for item in items]}


def show(store: MemoryStore, item_id: str) -> dict[str, Any]:
    found = store.get(item_id)
    view = found.as_dict()
    if isinstance(found, Fact):
        view["versions"] = [f.version for f in store.fact_history(found.path)]
    return view


def write(store: MemoryStore, path: str, content: str, vector: list[float] | None = None) -> dict[str, Any]:
    before = store.list_facts(path)
    fact = store.write_fact(path, content, vector=pack(vector) if vector else None)
    unchanged = any(f.path == path and f.version == fact.version for f in before)
    return {**fact.as_dict(), "unchanged": unchanged, "has_vector": has_vector(store.database.db, "fact", path,
                                                                             store.settings.embeddings_model)}


def forget(store: MemoryStore, item_id: str) -> dict[str, Any]:
    return {"forgotten": store.forget(item_id)}


def export_page(store: MemoryStore, after_episode: int = 0, limit: int = EXPORT_PAGE) -> dict[str, Any]:
    """Facts (on the first page) and up to ``limit`` episodes with ids past ``after_episode``, oldest first."""
    rows = store.database.db.execute(
        "SELECT episode_id, task_id, title, summary, details, lesson, created_at FROM memory_episodes "
        "WHERE episode_id > ? ORDER BY episode_id LIMIT ?", (after_episode, limit)).fetchall()
    facts = [asdict(f) for f in store.list_facts()] if after_episode == 0 else []
    return {"facts": facts, "episodes": [asdict(Episode(*row)) for row in rows], "more": len(rows) == limit}


def import_page(store: MemoryStore, facts: list[dict[str, Any]], episodes: list[dict[str, Any]]) -> dict[str, int]:
    try:
        dump = Dump([Fact(**f) for f in facts], [Episode(**e) for e in episodes])
    except TypeError as exc:  # a page not made by markdown.read_dir: say so, never an internal error
        raise MemoryStoreError(f"malformed import page: {exc}") from None
    return import_dump(store, dump)
