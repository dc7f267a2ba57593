"""The memory tools: listed with honest effect classes in every registry (pegasus tools shows them as built in),
run only against the supervisor's store, and a bad call is a clear tool error, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from pegasus.config import Settings
from pegasus.memory import MemoryStore
from pegasus.memory.tools import register
from pegasus.store import Store
from pegasus.tools.catalogue import catalogue
from pegasus.tools.registry import ToolContext, ToolExecutionError, ToolRegistry


def test_every_registry_lists_them_with_their_effect_classes() -> None:
    listed = {t["name"]: (t["effect"], t["source"]) for t in catalogue(Settings())["tools"]
              if t["name"].startswith("memory.")}
    assert listed == {"memory.search": ("pure", "builtin"), "memory.read": ("pure", "builtin"),
                      "memory.list": ("pure", "builtin"), "memory.write": ("idempotent", "builtin"),
                      "memory.append": ("idempotent", "builtin")}


def test_outside_the_supervisor_a_call_says_where_memory_tools_run() -> None:
    with pytest.raises(ToolExecutionError, match="runs in the supervisor"):
        register(ToolRegistry()).call("memory.read", {"id": "ops/key"})


def test_against_a_store_they_write_read_search_and_refuse_clearly(tmp_path: Path) -> None:
    tools = register(ToolRegistry(), MemoryStore(Store(tmp_path / "pegasus.db")))
    key = ToolContext(idempotency_key="t1/a1.0/i0/s0")
    written = tools.call("memory.write", {"path": "ops/key", "content": "in the vault"}, key)
    assert (written["id"], written["task_id"]) == ("fact:ops/key@1", "t1")
    assert tools.call("memory.write", {"path": "ops/key", "content": "in the vault"}, key)["version"] == 1
    assert tools.call("memory.read", {"id": "ops/key"})["content"] == "in the vault"
    assert [i["id"] for i in tools.call("memory.search", {"query": "where is the key?"})] == ["fact:ops/key@1"]
    assert tools.call("memory.list", {})[0]["path"] == "ops/key"
    with pytest.raises(ToolExecutionError, match="memory.write: fact path '../x'"):
        tools.call("memory.write", {"path": "../x", "content": "y"})
    with pytest.raises(ToolExecutionError, match="no memory 'episode:9'"):
        tools.call("memory.read", {"id": "episode:9"})
