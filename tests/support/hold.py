"""A test tool that holds its worker until a file exists: a stage exactly as slow as a test needs.

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


def register(registry: ToolRegistry) -> None:
    registry.register(Tool(name="hold_until", description="hold the worker until a file exists (test tool)",
                           args_model=HoldArgs, effect="pure", timeout_s=30.0, func=_hold_until))


def hold_request(path: Path) -> str:
    """The offline request whose one tool step holds its worker until ``path`` exists."""
    return f"call hold_until {json.dumps({'path': str(path)})}"
