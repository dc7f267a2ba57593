"""The memory tools plans and models call: ``memory.search|read|write|append|list``.

Search, read and list are pure; write and append are idempotent (the same content, or the same
append key, changes nothing twice).  They run where the store is: a step calling one goes to
``PoolName.MEMORY``, the supervisor (``actors/supervisor/memory.py``), so no worker or member opens
the database.  With embeddings configured, ``memory.search`` fuses full text and vectors as recall
does, the query embedded first (``search_query``; ``actors/supervisor/vectors.py``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pegasus.memory.errors import MemoryStoreError
from pegasus.memory.query import words
from pegasus.memory.store import MemoryStore
from pegasus.tools.registry import Tool, ToolContext, ToolExecutionError, ToolRegistry

PREFIX = "memory."
SEARCH, READ, WRITE, APPEND, LIST = (PREFIX + name for name in ("search", "read", "write", "append", "list"))
MEMORY_TOOLS = (SEARCH, READ, WRITE, APPEND, LIST)
TIMEOUT_S = 10.0  # one SQLite statement or a few: milliseconds


def is_memory_tool(tool: object) -> bool:
    return isinstance(tool, str) and tool.startswith(PREFIX)


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArgs(_Args):
    query: str = Field(description="what to look for, in plain words")
    k: int = Field(5, ge=1, le=50, description="how many memories at most")


class ReadArgs(_Args):
    id: str = Field(description="a fact path (ops/deploy-key), fact:<path>@<version>, or episode:<n>")


class WriteArgs(_Args):
    path: str = Field(description="the fact's path: lower case a-z 0-9 / _ . -, e.g. ops/deploy-key")
    content: str = Field(min_length=1, description="the whole fact (replaces the current version)")


class AppendArgs(_Args):
    path: str = Field(description="the fact's path")
    text: str = Field(min_length=1, description="a line added at the end of the fact")


class ListArgs(_Args):
    prefix: str = Field("", description="only paths starting with this")


def memory_tools(store: MemoryStore | None, query_vector: list[float] | None = None,
                 note: str | None = None) -> list[Tool]:
    """The five tools, run against ``store``; with None (every process but the supervisor) they are listed
    and classified, and calling one says where it runs.  ``query_vector``: the step's search query embedded
    (fused with full text); ``note``: why it has none although embeddings are configured (the search then says
    so: ``{"items": [...], "warning": note}``, never a silent full-text answer)."""

    def search(s: MemoryStore, a: SearchArgs, _: ToolContext) -> Any:
        items = [item.as_dict() for item in s.search(a.query, a.k, query_vector=query_vector)]
        return items if note is None else {"items": items, "warning": note}

    def bound(name: str, run: Any) -> Any:
        def call(args: Any, ctx: ToolContext) -> Any:
            if store is None:
                raise ToolExecutionError(name, f"{name} runs in the supervisor (PoolName.MEMORY), not here")
            try:
                return run(store, args, ctx)
            except MemoryStoreError as exc:
                raise ToolExecutionError(name, f"{name}: {exc}") from None
        return call

    return [
        Tool(SEARCH, "Search long-term memory (facts and past episodes) for what is relevant; best first.",
             SearchArgs, "pure", TIMEOUT_S,
             bound(SEARCH, search)),
        Tool(READ, "Read one memory: a fact by path (or fact:<path>@<version>) or episode:<n>.", ReadArgs, "pure",
             TIMEOUT_S, bound(READ, lambda s, a, _: s.get(a.id).as_dict())),
        Tool(WRITE, "Write a fact to long-term memory (a new version of its path; the same content again changes "
                    "nothing).", WriteArgs, "idempotent", TIMEOUT_S,
             bound(WRITE, lambda s, a, ctx: s.write_fact(a.path, a.content, task_id=_task(ctx)).as_dict())),
        Tool(APPEND, "Add a line to a fact in long-term memory (created when absent).", AppendArgs, "idempotent",
             TIMEOUT_S, bound(APPEND, lambda s, a, ctx: s.append_fact(a.path, a.text, key=ctx.idempotency_key,
                                                                        task_id=_task(ctx)).as_dict())),
        Tool(LIST, "List the facts in long-term memory (path, version, size).", ListArgs, "pure", TIMEOUT_S,
             bound(LIST, lambda s, a, _: [{"path": f.path, "version": f.version, "bytes": len(f.content.encode()),
                                     "id": f.id} for f in s.list_facts(a.prefix)])),
    ]


def _task(ctx: ToolContext) -> str | None:
    """The task of a step, from its idempotency key (``<task>/a<n>/i<n>/s<n>``)."""
    return ctx.idempotency_key.split("/", 1)[0] if ctx.idempotency_key else None


def register(registry: ToolRegistry, store: MemoryStore | None = None, query_vector: list[float] | None = None,
             note: str | None = None) -> ToolRegistry:
    for tool in memory_tools(store, query_vector, note):
        registry.register(tool)
    return registry


def search_query(context: Any, step_index: int | None) -> str | None:
    """The query of a plan's ``memory.search`` step (what the supervisor has embedded first), None for any other
    step or a query with nothing to search (the tool itself then answers, or refuses the arguments)."""
    plan = getattr(context, "plan", None)
    step = next((s for s in plan.steps if s.index == step_index), None) if plan is not None else None
    if step is None or step.action_type != "tool_call" or step.action_params.get("tool") != SEARCH:
        return None
    args = step.action_params.get("args")
    query = args.get("query") if isinstance(args, dict) else None
    return query if isinstance(query, str) and words(query) else None
