"""The CPU-bound benchmark tool, loaded as a plugin (``[tools] plugins = ["benchmarks.tools:register"]``).

``burn`` does a fixed amount of pure-Python work (``rounds`` iterations of an
integer hash loop) and returns a checksum.  The asyncio baseline calls the same
``burn_cpu`` function inline, so both runtimes do identical work per step.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from pegasus.tools.registry import Tool, ToolContext, ToolRegistry

MAX_ROUNDS = 50_000_000


def burn_cpu(rounds: int) -> int:
    """Pure-Python CPU work, linear in ``rounds``; the result depends on every round."""
    acc = 0
    for i in range(rounds):
        acc = (acc * 31 + i) & 0xFFFFFFFF
    return acc


class BurnArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rounds: int = Field(ge=0, le=MAX_ROUNDS)


def _burn(args: BurnArgs, ctx: ToolContext) -> int:
    return burn_cpu(args.rounds)


def register(registry: ToolRegistry) -> None:
    registry.register(Tool(name="burn", description="fixed pure-Python CPU work (benchmark tool)",
                           args_model=BurnArgs, effect="pure", timeout_s=120.0, func=_burn))
