"""``stats`` asks the pools once for the requests that come while their answers are awaited, and never
answers with figures a pool sent before the request came (actors/supervisor/stats.py)."""

from __future__ import annotations

from pathlib import Path

from actors import messages as m
from actors.supervisor import stats
from actors.supervisor.context import Context
from actors.supervisor.store import restore
from actors.supervisor.task_actors import TaskActors
from pegasus import logs
from pegasus.config import Settings
from pegasus.store import Store


def _supervisor(tmp_path: Path) -> tuple[Context, list[tuple[object, object]]]:
    sent: list[tuple[object, object]] = []
    settings = Settings().with_overrides({"state": {"home": str(tmp_path)}})
    ctx = Context(send=lambda to, message: sent.append((to, message)), wake=lambda seconds, payload: None,
                  create=lambda kind: None, exit=lambda: None, task_actors=TaskActors(None, None, None),
                  log=logs.get("supervisor"), settings=settings, store=Store(tmp_path / "pegasus.db"))
    restore(ctx)
    ctx.pools.address.update({"llm": "llm pool", "tool": "tool pool"})
    return ctx, sent


def _answered(ctx: Context, ask_id: int, name: str, busy: int) -> None:
    stats.pool_stats(ctx, m.PoolStats(ask_id, name, 3, busy, 0, 0), f"{name} pool")


def test_stats_asked_while_the_pools_are_asked_share_their_answers(tmp_path: Path) -> None:
    ctx, sent = _supervisor(tmp_path)
    for client in ("dashboard", "metrics", "watch"):
        stats.stats(ctx, m.Stats(request_id=client), client)
    assert [(to, message.ask_id) for to, message in sent] == [("llm pool", 1), ("tool pool", 1)]  # before: 6
    _answered(ctx, 1, "llm", 2)
    _answered(ctx, 1, "tool", 1)
    replies = [(to, message) for to, message in sent if isinstance(message, m.Reply)]
    assert [(to, reply.request_id, reply.ok) for to, reply in replies] == [
        ("dashboard", "dashboard", True), ("metrics", "metrics", True), ("watch", "watch", True)]
    assert all(reply.data["pools"]["llm"]["busy"] == 2 and reply.data["pools"]["tool"]["responsive"]
               for _, reply in replies)
    assert replies[-1][1].data["stats_asks"] == {"asked": 1, "shared": 2}
    ctx.store.close()


def test_a_stats_after_a_pool_answered_asks_again(tmp_path: Path) -> None:
    ctx, sent = _supervisor(tmp_path)
    stats.stats(ctx, m.Stats(request_id="first"), "first")
    _answered(ctx, 1, "llm", 2)  # this figure came before the second request: not given to it
    stats.stats(ctx, m.Stats(request_id="second"), "second")
    assert [(to, message.ask_id) for to, message in sent if isinstance(message, m.PoolStatsRequest)] == [
        ("llm pool", 1), ("tool pool", 1), ("llm pool", 2), ("tool pool", 2)]
    stats.stats_due(ctx, m.StatsDue(1))  # the tool pool never answered the first: shown unresponsive
    _answered(ctx, 2, "llm", 0)
    _answered(ctx, 2, "tool", 1)
    replies = {to: message.data for to, message in sent if isinstance(message, m.Reply)}
    assert replies["first"]["pools"]["llm"]["busy"] == 2 and not replies["first"]["pools"]["tool"]["responsive"]
    assert replies["second"]["pools"]["llm"]["busy"] == 0 and replies["second"]["pools"]["tool"]["responsive"]
    ctx.store.close()
