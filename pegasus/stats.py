"""Views of a system's statistics, assembled from what its parts report (pure: no actors, no I/O)."""

from __future__ import annotations

from typing import Any

from pegasus.llm.cost import usage_sum
from pegasus.pool import contact


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
            if member.get("contact") is not None:
                row.setdefault("contacts", []).append(member["contact"])
    for row in merged.values():  # each pool pings the member's workers: one view of how well it is heard
        row["contact"] = None if row["local"] else contact.merged(row.pop("contacts", []))
    return sorted(merged.values(), key=lambda row: (not row["local"], row["name"]))


def usage_view(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The model usage of every task so far (``Store.usage_totals`` rows): the total, with its cost when
    any model had a price, and each model and tier's share; ``estimated_calls`` where the server reported
    no usage (their cost is unknown, never 0)."""
    models = []
    for row in rows:
        model = {key: value for key, value in row.items()
                 if key not in ("cost_usd", "unpriced_calls", "estimated_calls")}
        if row.get("estimated_calls"):
            model["estimated_calls"] = row["estimated_calls"]
        if row.get("cost_usd") is not None:
            model["cost_usd"] = round(float(row["cost_usd"]), 8)
            if row.get("unpriced_calls"):
                model["unpriced_calls"] = row["unpriced_calls"]
        models.append(model)
    return {**usage_sum(models), "models": models}


def supervision_view(children: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A parent's view of its children (``Supervision.view``) for stats and /healthz: each one's restarts and
    status, and the names of those that crash-loop (more deaths within a period than their spec allows)."""
    return {"supervision": children,
            "crash_looping": sorted(name for name, child in children.items() if child.get("status") == "crash_looping")}
