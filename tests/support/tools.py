"""Test tools, loaded as a plugin (``[tools] plugins = ["tests.support.tools:register"]``).

``append_key`` is effectful: it appends its idempotency key to a file, then holds
the worker for ``hold_s`` seconds (so a test can kill a process after the effect
and before the result is recorded).  A key that appears twice in the file is a
repeated effect: exactly what the tool-effect journal must prevent.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from pegasus.tools.registry import Tool, ToolContext, ToolRegistry


class AppendArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    hold_s: float = Field(0.0, ge=0, le=30)


def _append_key(args: AppendArgs, ctx: ToolContext) -> str:
    line = f"{ctx.idempotency_key or 'no-key'}\n"
    with open(args.path, "a", encoding="utf-8") as handle:
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
    time.sleep(args.hold_s)
    return f"appended {ctx.idempotency_key}"


class BigTextArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tag: str
    chars: int = Field(1000, ge=0, le=1_000_000)


def _big_text(args: BigTextArgs, ctx: ToolContext) -> str:
    return f"{args.tag}: " + "x" * args.chars


def register(registry: ToolRegistry) -> None:
    registry.register(Tool(name="append_key", description="append the idempotency key to a file (test tool)",
                           args_model=AppendArgs, effect="effectful", timeout_s=30.0, func=_append_key))
    registry.register(Tool(name="big_text", description="a long text: the tag and chars x's (test tool)",
                           args_model=BigTextArgs, effect="pure", timeout_s=30.0, func=_big_text))


def keys_in(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").split() if path.exists() else []


def append_key_request(path: Path, hold_s: float) -> str:
    """The offline request that runs append_key once."""
    return f"call append_key {json.dumps({'path': str(path), 'hold_s': hold_s})}"


def busy_tool_worker(client: Any) -> dict[str, Any]:
    """The one busy tool worker of ``client``'s system (its stats entry)."""
    busy = [w for w in client.stats()["pools"]["tool"]["workers"] if w["busy"]]
    assert len(busy) == 1, busy
    return busy[0]
