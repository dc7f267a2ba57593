"""The memory requests: clients and the supervisor (or ``LocalMemory`` on the store file), each answered by a Reply.

A memory step of a task (a ``memory.*`` tool) is not here: it is a StageRequest
to ``PoolName.MEMORY``, which is the supervisor, answered by a StageResult.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from pegasus.requests.base import Request, View
from pegasus.metadata import INT64_MAX, check_metadata

MAX_DIMENSIONS = 65536  # floats in an embedding vector (finite: the Request refuses inf and nan)
MAX_IMPORT_ITEMS = 10_000  # facts or episodes on one page of an import


class MemoryList(Request[View]):
    prefix: str = ""
    episodes: int = Field(20, ge=0, le=1000)


class MemorySearch(Request[View]):
    text: str = Field(max_length=65536)
    k: int = Field(5, ge=1, le=100)
    kinds: list[str] = Field(default_factory=list)  # fact, episode, archive; empty: facts and episodes
    query_vector: list[float] | None = Field(None, max_length=MAX_DIMENSIONS)  # computed by the client


class MemoryShow(Request[View]):
    item_id: str = Field(min_length=1)


class MemoryWrite(Request[View]):
    path: str
    content: str
    vector: list[float] | None = Field(None, max_length=MAX_DIMENSIONS)


class MemoryForget(Request[View]):
    item_id: str = Field(min_length=1)


class MemoryExport(Request[View]):
    """A page of the memory, as values (the client writes the files)."""

    after_episode: int = Field(0, ge=0, le=INT64_MAX)
    limit: int = Field(500, ge=1, le=5000)


class MemoryImport(Request[View]):
    """A page of parsed memory files, merged in one commit (the client reads and checks the files)."""

    facts: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_IMPORT_ITEMS)
    episodes: list[dict[str, Any]] = Field(default_factory=list, max_length=MAX_IMPORT_ITEMS)

    @field_validator("facts", "episodes")
    @classmethod
    def _storable(cls, items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Values the store can keep: JSON types, integers (a version, an id) within SQLite's."""
        for index, item in enumerate(items):
            check_metadata(item, max_bytes=1 << 30, name=f"item {index}")
        return items


