"""Test tools that hold their worker until a file exists: a stage exactly as slow as a test needs.

``hold_until`` is pure; ``mark_until`` is pure too, but first appends its tag to a file (a test sees
the step start, and how often it ran); ``append_key_until`` is effectful: it appends its idempotency
key to a file (as tests/support/tools.py's ``append_key``), then holds until the release file exists.

A plugin of its own (``[tools] plugins = ["tests.support.hold:register"]``), so the tool list
other tests' prompts carry stays as it is (tests/integration/test_llm_tiers.py sizes a window on it).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from pegasus.tools.registry import Tool, ToolContext, ToolRegistry

PLUGIN = "tests.support.hold:register"


class HoldArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    timeout_s: float = Field(20.0, ge=0, le=30)


def _hold_until(args: HoldArgs, ctx: ToolContext) -> str:
    deadline = time.monotonic() + args.timeout_s
    while not os.path.exists(args.path) and time.monotonic() < deadline:
        time.sleep(0.02)
    return f"released by {args.path}" if os.path.exists(args.path) else f"not released after {args.timeout_s:g}s"


class AppendUntilArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    release: str
    timeout_s: float = Field(30.0, ge=0, le=30)


def _append_key_until(args: AppendUntilArgs, ctx: ToolContext) -> str:
    with open(args.path, "a", encoding="utf-8") as handle:
        handle.write(f"{ctx.idempotency_key or 'no-key'}\n")
        handle.flush()
        os.fsync(handle.fileno())
    _hold_until(HoldArgs(path=args.release, timeout_s=args.timeout_s), ctx)
    return f"appended {ctx.idempotency_key}"


class MarkUntilArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    tag: str
    release: str


def _mark_until(args: MarkUntilArgs, ctx: ToolContext) -> str:
    with open(args.path, "a", encoding="utf-8") as handle:
        handle.write(f"{args.tag}\n")
    _hold_until(HoldArgs(path=args.release), ctx)
    return f"marked {args.tag}"


def register(registry: ToolRegistry) -> None:
    registry.register(Tool(name="hold_until", description="hold the worker until a file exists (test tool)",
                           args_model=HoldArgs, effect="pure", timeout_s=30.0, func=_hold_until))
    registry.register(Tool(name="mark_until", description="append a tag, hold until a file exists (test tool)",
                           args_model=MarkUntilArgs, effect="pure", timeout_s=30.0, func=_mark_until))
    registry.register(Tool(name="append_key_until", description="append the key, hold until a file exists (test tool)",
                           args_model=AppendUntilArgs, effect="effectful", timeout_s=40.0, func=_append_key_until))


def append_key_until_request(path: Path, release: Path) -> str:
    """The offline request whose one effectful step appends its key to ``path``, then holds until ``release``."""
    return f"call append_key_until {json.dumps({'path': str(path), 'release': str(release)})}"


def mark_twice_request(first: Path, second: Path, tag: str, release: Path) -> str:
    """The offline request of two pure steps: each appends ``tag`` (to ``first``, then to ``second``), the first
    then holds until ``release`` exists (the second finds it there)."""
    return " and then ".join(f"call mark_until {json.dumps({'path': str(path), 'tag': tag, 'release': str(release)})}"
                             for path in (first, second))


def hold_request(path: Path) -> str:
    """The offline request whose one tool step holds its worker until ``path`` exists."""
    return f"call hold_until {json.dumps({'path': str(path)})}"
