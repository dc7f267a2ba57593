"""The memory tools: listed with honest effect classes in every registry (pegasus tools shows them as built in),
run only against the supervisor's store, and a bad call is a clear tool error, never a crash."""

from __future__ import annotations

from pathlib import Path

import pytest

from pegasus.config import Settings
from pegasus.memory import MemoryStore
from pegasus.tools.memory import register
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


def test_a_search_step_fuses_the_query_vector_it_was_given_and_says_when_it_has_none(tmp_path: Path) -> None:
    """Issue 29: memory.search in a task searched by full text only; with embeddings configured the supervisor
    embeds the step's query first and the search fuses it, or says why it could not."""
    from pegasus.config import MemorySettings
    from pegasus.memory.embeddings import pack
    from pegasus.tools.memory import search_query
    from pegasus.task.models import Plan, PlanStep, TaskContext

    store = MemoryStore(Store(tmp_path / "pegasus.db"), MemorySettings(embeddings_model="e5"))
    store.write_fact("garage/parking", "The automobile is in bay 4.", vector=pack([1.0, 0.0]))
    store.write_fact("ops/key", "The key is in the vault.", vector=pack([0.0, 1.0]))
    question = {"query": "where did I leave my car?", "k": 1}  # no word shared with the fact
    assert register(ToolRegistry(), store).call("memory.search", question) == []
    fused = register(ToolRegistry(), store, query_vector=[0.9, 0.1]).call("memory.search", question)
    assert [item["id"] for item in fused] == ["fact:garage/parking@1"]
    said = register(ToolRegistry(), store, note="embeddings: unreachable; searched by full text alone").call(
        "memory.search", question)
    assert said == {"items": [], "warning": "embeddings: unreachable; searched by full text alone"}

    def context(tool: str, args: object) -> TaskContext:
        step = PlanStep(index=0, description="d", action_type="tool_call", action_params={"tool": tool, "args": args})
        return TaskContext(input_text="x", plan=Plan(goal="g", steps=[step], reasoning=""))

    assert search_query(context("memory.search", question), 0) == "where did I leave my car?"
    assert search_query(context("memory.search", question), 1) is None  # another step
    assert search_query(context("memory.read", {"id": "x"}), 0) is None
    assert search_query(context("memory.search", {"query": "?!"}), 0) is None  # nothing to search: no vector asked
    assert search_query(context("memory.search", {"query": 3}), 0) is None  # the tool refuses it itself
