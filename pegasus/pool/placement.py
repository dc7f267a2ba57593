"""Where a pool's workers run: the capabilities a convention member advertises and the requirement that places a worker.

Stdlib only (actors/runtime/system.py reads these names when it builds an admin's
capabilities, and must not load the pool core to do so).
"""

from __future__ import annotations

from typing import Any

MEMBER_CAPABILITY = "pegasus.member"  # an admin's name in a convention (actors.runtime.system.member_name)
HOME_CAPABILITY = "pegasus.home"  # its state directory: where the workers placed on it log
POOL_REQUIREMENT = "pegasus.pool"  # with MEMBER_CAPABILITY: where a pool places a worker
MAX_WORKERS_PER_MEMBER = 256  # a typo in a member's capability must not fork thousands of processes


def placement(member: str, pool: str) -> dict[str, str]:
    """The targetActorRequirements that place a worker of ``pool`` on convention member ``member``."""
    return {MEMBER_CAPABILITY: member, POOL_REQUIREMENT: pool}


def advertised_workers(capabilities: dict[str, Any], pool: str) -> int:
    """How many ``pool`` workers an admin offers (capability ``pegasus.<pool>_workers``); 0 if unreadable."""
    try:
        return max(0, int(capabilities.get(f"pegasus.{pool}_workers", 0) or 0))
    except (TypeError, ValueError):
        return 0
