"""Views of a system's statistics, assembled from what its parts report (pure: no actors, no I/O)."""

from __future__ import annotations

from typing import Any


def members_view(pools: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every convention member the pools know, with its workers per pool (for the stats reply).

    ``pools`` maps a pool name to its stats part (``members`` as in PoolStats).
    """
    merged: dict[str, dict[str, Any]] = {}
    for name, part in pools.items():
        for member in part.get("members", []):
            row = merged.setdefault(member["name"], {
                "name": member["name"], "address": member["address"], "local": member["local"],
                "capabilities": member["capabilities"], "joined": member["joined"], "workers": {}})
            row["workers"][name] = member["workers"]
    return sorted(merged.values(), key=lambda row: (not row["local"], row["name"]))
