"""Each memory request has an answer of its own, found by its class (no chain of tests over the requests), and
the supervisor and LocalMemory answer through it alike.  A real store file; no actor system."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from pegasus.config import MemorySettings
from pegasus.memory import MemoryStore
from pegasus.memory.answers import ANSWERS, answer_memory
from pegasus.requests import Get, Request
from pegasus.requests import memory as declared
from pegasus.store import Store


def test_every_memory_request_declared_has_one_answer_and_nothing_else_has_one() -> None:
    requests = {cls for _, cls in inspect.getmembers(declared, inspect.isclass)
                if issubclass(cls, Request) and cls is not Request and cls.__module__ == declared.__name__}
    assert set(ANSWERS) == requests


def test_a_request_is_answered_by_its_row_and_another_is_refused_by_its_class(tmp_path: Path) -> None:
    store = MemoryStore(Store(tmp_path / "pegasus.db"), MemorySettings())
    written = answer_memory(store, declared.MemoryWrite(path="ops/deploy-key", content="in the vault"))
    listed = answer_memory(store, declared.MemoryList())
    assert [fact["path"] for fact in listed["facts"]] == ["ops/deploy-key"] and written["path"] == "ops/deploy-key"
    with pytest.raises(ValueError, match="not a memory request: Get"):
        answer_memory(store, Get(task_id="t"))
