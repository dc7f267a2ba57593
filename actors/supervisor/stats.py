"""``stats``: the supervisor's figures with each pool's, never waiting for a pool more than ``STATS_WAIT_S``
(one that has not answered is shown unresponsive).  A ``stats`` that comes while the pools are being asked
waits for that ask's answers instead of asking again (a dashboard, ``/metrics`` and ``watch`` polling at
once): each pool's figures still come after the request did, and one ask costs the supervisor six messages."""

from __future__ import annotations

import dataclasses
from typing import Any

from thespian.actors import ActorAddress

from actors import messages as m
from actors.wire.frames import rejected_count
from actors.supervisor.children import pools_view
from actors.supervisor.context import Context
from actors.supervisor.replies import DEFERRED
from actors.supervisor.schedules import quarantined_view
from actors.supervisor.store import store_status, task_counts
from actors.supervisor.vectors import embeddings_view
from pegasus.views import members_view, usage_view
from pegasus.store import StoreError

STATS_WAIT_S = 2.0  # stats answer without a pool that has not answered by then


def stats(ctx: Context, request: m.Stats, sender: ActorAddress) -> Any:
    asking = ctx.pending_stats.get(ctx.asked)
    if asking is not None and not asking[1]:  # the pools asked, none has answered yet: their answers serve this too
        asking[0].append((sender, request.request_id))
        ctx.stats_asks["shared"] += 1
        return DEFERRED
    ctx.asked += 1
    ctx.stats_asks["asked"] += 1
    ctx.pending_stats[ctx.asked] = ([(sender, request.request_id)], {})
    for place in ctx.pools.places():  # a home host answers for each of its pools
        ctx.send(place, m.PoolStatsRequest(ctx.asked))
    _ask_mcp_host(ctx)
    ctx.wake(STATS_WAIT_S, m.StatsDue(ctx.asked))  # a stopped pool must not hold it
    return DEFERRED


def pool_stats(ctx: Context, stats: m.PoolStats, sender: ActorAddress) -> None:
    pending = ctx.pending_stats.get(stats.ask_id)
    if pending is None or ctx.admission is None:
        return
    # Every figure the pool sent (the message's fields but its ask id and name): one list of them, PoolStats'.
    pending[1][stats.name] = {f.name: getattr(stats, f.name) for f in dataclasses.fields(stats)
                              if f.name not in ("ask_id", "name")}
    if len(pending[1]) == len(ctx.pools.address):
        _answer(ctx, stats.ask_id)


def _ask_mcp_host(ctx: Context) -> None:
    """Subscribe (again) to the machine's MCP host: it answers with its listing at once and after each change
    (a host replaced after a crash forgets its subscribers).  Only with machine-scope servers configured."""
    settings = ctx.settings
    if settings is None or ctx.find_mcp_host is None or ctx.exiting \
            or not any(server.scope == "machine" for server in settings.mcp.servers):
        return
    ctx.send(ctx.find_mcp_host(), m.McpSubscribe(settings))


def mcp_listing(ctx: Context, listing: m.McpListing, sender: ActorAddress) -> None:
    """The MCP host's servers: up (ready) or not, and the calls each failed (the next stats answer shows them)."""
    ctx.mcp = {name: {"phase": view.phase, "up": view.phase == "ready", "error": view.error,
                      "tool_errors": listing.errors.get(name, 0)} for name, view in listing.views.items()}


def stats_due(ctx: Context, due: m.StatsDue) -> None:
    if due.ask_id in ctx.pending_stats:
        _answer(ctx, due.ask_id)


def _answer(ctx: Context, ask_id: int) -> None:
    """The stats request answered with the pools that answered (the others shown unresponsive)."""
    waiting, parts = ctx.pending_stats.pop(ask_id)
    admission = ctx.admission
    if admission is None:
        for client, request_id in waiting:
            ctx.send(client, m.Reply(request_id, False, error="the supervisor is not configured",
                                     error_type="SystemNotRunning"))
        return
    data = {
        "queue_length": admission.queue_length(), "active": len(admission.running),
        "max_active_tasks": admission.settings.runtime.max_active_tasks,
        "tasks": task_counts(ctx), "pools": pools_view(ctx, parts), "subscribers": len(ctx.subscribers),
        "task_actors": ctx.task_actors.view(), "reports": dict(ctx.task_actors.reports), "store": store_status(ctx),
        "rejected_frames": rejected_count(admission.settings.state_dir()),
        "supervisor_pid": ctx.pid, "usage": _usage(ctx), "quarantined": quarantined_view(ctx),
        "members": members_view(parts), "embeddings": embeddings_view(ctx),
        "facts": _store_facts(ctx.store), "mcp": ctx.mcp, "stats_asks": dict(ctx.stats_asks),
        "reflections": ctx.post.view() if ctx.post is not None else None}
    for client, request_id in waiting:
        ctx.send(client, m.Reply(request_id, True, data=data))


def _usage(ctx: Context) -> dict[str, Any] | None:
    """Every task's model usage and cost so far; None when the store cannot be read."""
    try:
        return usage_view(ctx.store.usage_totals()) if ctx.store is not None else None
    except StoreError:
        return None


def _store_facts(store: Any) -> dict[str, Any] | None:
    """The store's counts for ``/metrics`` (``Store.metric_facts``); None without a store or when it cannot be read."""
    try:
        return store.metric_facts() if store is not None else None
    except StoreError:
        return None
