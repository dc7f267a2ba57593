"""The supervisor's side of embedding vectors: the query vector of a recall and of a task's
``memory.search`` step, and the background job giving memory rows theirs.

The supervisor never calls the endpoint: the llm pool embeds (EMBED_QUERY; EMBED_ROWS at the lowest
priority).  A recall or a search waits for its vector at most ``2 x embeddings_timeout_s`` (+ a
margin), then goes by full text alone and says why.  A search's pool requests carry negative tokens
(a recall's are its run's), so an answer finds its own.  Policy: ``pegasus.memory.vectors``' ``Backfill.step``
and ``Breaker.step``; this module carries their commands out (the store's reads and writes, the pool's requests).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from thespian.actors import ActorAddress

from actors import messages as m
from actors.supervisor import memory
from actors.supervisor.context import Context, FullTextOnly, Vectors
from pegasus import logs
from pegasus.memory.embeddings import configured, unpack
from pegasus.tools.memory import search_query
from pegasus.memory import vectors as v
from pegasus.memory.vectors import BACKFILL_TASK, missing, missing_count, store_vectors
from pegasus.task.events import utc_now
from pegasus.task.names import PoolName, StageName

STAGE_MARGIN_S = 5.0  # the pool's deadline past the call's own timeout: the worker answers first


_Waiting = tuple[Any, ActorAddress]  # (an AskRecall or a memory.search StageRequest, its sender)


@dataclass(frozen=True)
class _Way:
    """How a recall or a search goes on, with its query's vector or by full text alone."""

    finish: Callable[..., None]  # memory.recall / memory.memory_step(ctx, message, sender, query_vector=, note=)
    alone: str
    event: str
    tally: Callable[[Vectors], FullTextOnly]


_RECALL = _Way(memory.recall, "recalled by full text alone", "recall_without_vector", lambda v: v.recall)
_SEARCH = _Way(memory.memory_step, "searched by full text alone", "memory_search_without_vector", lambda v: v.search)


def _way(token: int) -> _Way:
    return _SEARCH if token < 0 else _RECALL  # a search's embed requests carry negative tokens


def _on(ctx: Context) -> bool:
    return ctx.settings is not None and configured(ctx.settings.memory)


def _model(ctx: Context) -> str:
    assert ctx.settings is not None
    return ctx.settings.memory.embeddings_model


# -- a recall's query --------------------------------------------------------------------------
def recall(ctx: Context, ask: m.AskRecall, sender: ActorAddress) -> None:
    """AskRecall: with embeddings configured, its query's vector is asked of the llm pool first."""
    if not _on(ctx) or not ask.query.strip():
        memory.recall(ctx, ask, sender)
        return
    _wait_for_vector(ctx, ask.task_id, ask.token, ask.query, (ask, sender))


def _wait_for_vector(ctx: Context, task_id: str, token: int, query: str, waiting: _Waiting) -> bool:
    """Ask the query's vector and hold ``waiting`` for it; False (gone on by full text) when it was not asked."""
    refused = _ask_vector(ctx, task_id, token, query)
    if refused is not None:
        _without_vector(ctx, token, waiting, refused)
        return False
    ctx.vectors.waits[(task_id, token)] = waiting
    return True


def _ask_vector(ctx: Context, task_id: str, token: int, query: str) -> str | None:
    """The query's vector asked of the llm pool (answered by query_vector, or recall_vector_due when late);
    or, while the breaker is open (the endpoint failed a moment ago), why it was not asked."""
    assert ctx.settings is not None
    [asked, *_] = logs.emitted(ctx.log, ctx.vectors.breaker.step(v.Asking(time.monotonic()))) or [v.Ask()]
    if isinstance(asked, v.NotAsked):
        return asked.why
    timeout = ctx.settings.memory.embeddings_timeout_s
    ctx.wake(_patience_s(ctx), m.RecallVectorDue(task_id, token))
    ctx.to_pool(PoolName.LLM, m.StageRequest(task_id, token, StageName.EMBED_QUERY, texts=(query,),
                                             timeout_s=timeout + STAGE_MARGIN_S))
    return None


def _patience_s(ctx: Context) -> float:
    """How long a recall or a search waits for its query's vector."""
    assert ctx.settings is not None
    return 2 * ctx.settings.memory.embeddings_timeout_s + STAGE_MARGIN_S


def _late(ctx: Context) -> str:
    return f"embeddings: no vector within {_patience_s(ctx):g}s (the llm pool busy, or the endpoint hung)"


def _endpoint_answered(ctx: Context, result: m.StageResult) -> None:
    """Every embed stage's answer opens or closes the breaker."""
    assert ctx.settings is not None
    backfill = ctx.vectors.backfill
    wait = backfill.next_delay() if backfill is not None else ctx.settings.memory.embeddings_backfill_s
    # error_kind "exception": the endpoint's failure (not a pool's queue_full, a dead worker)
    logs.emitted(ctx.log, ctx.vectors.breaker.step(v.EmbedAnswered(
        result.ok, result.error_kind == "exception", result.error, time.monotonic(), wait)))


def query_vector(ctx: Context, result: m.StageResult) -> None:
    _endpoint_answered(ctx, result)
    waiting = ctx.vectors.waits.pop((result.task_id, result.token), None)
    if waiting is None:
        return  # answered already, by full text alone
    vectors = result.payload.get("vectors") if result.ok else None
    if vectors:
        _way(result.token).finish(ctx, *waiting, query_vector=unpack(vectors[0]))
    else:
        _without_vector(ctx, result.token, waiting, f"embeddings: {result.error or 'no vector'}")


def recall_vector_due(ctx: Context, due: m.RecallVectorDue) -> None:
    waiting = ctx.vectors.waits.pop((due.task_id, due.token), None)
    if waiting is not None and ctx.settings is not None:
        ctx.answered_by_pool(due.task_id, StageName.EMBED_QUERY, due.token)
        _without_vector(ctx, due.token, waiting, _late(ctx))


def _without_vector(ctx: Context, token: int, waiting: _Waiting, why: str) -> None:
    way = _way(token)
    note = f"{why}; {way.alone}"
    tally = way.tally(ctx.vectors)
    tally.count += 1
    tally.error = note
    ctx.log.warning(way.event, task_id=waiting[0].task_id, error=note)
    way.finish(ctx, *waiting, note=note)


# -- a task's memory.search step --------------------------------------------------------------
def memory_step(ctx: Context, request: m.StageRequest, sender: ActorAddress) -> None:
    """A task's memory step: a ``memory.search`` with embeddings configured has its query embedded by the llm pool
    first (as a recall's: never in this mailbox), then runs fused; any other step runs at once."""
    query = search_query(request.context, request.step_index) if _on(ctx) else None
    if query is None:
        memory.memory_step(ctx, request, sender)
        return
    if _wait_for_vector(ctx, request.task_id, -(ctx.vectors.searches + 1), query, (request, sender)):
        ctx.vectors.searches += 1


# -- the background job ----------------------------------------------------------------------
def restored(ctx: Context) -> None:
    """After a (re)start: the background job's timer (once)."""
    if not _on(ctx):
        return
    assert ctx.settings is not None
    if ctx.vectors.backfill is None:
        settings = ctx.settings.memory
        ctx.vectors.backfill = v.Backfill(settings.embeddings_backfill_s, settings.embeddings_batch,
                                          settings.embeddings_timeout_s)
    _backfill(ctx, v.Restored())


def vectors_due(ctx: Context, due: m.VectorsDue) -> None:
    _backfill(ctx, v.Due(time.monotonic()))


def row_vectors(ctx: Context, result: m.StageResult) -> None:
    backfill = ctx.vectors.backfill
    if backfill is None:
        return
    vectors = result.payload.get("vectors") or []
    answered = v.BatchAnswered(result.token, result.ok, len(vectors), result.error, utc_now().isoformat())
    commands = backfill.step(answered)
    _endpoint_answered(ctx, result)  # after the back-off grew: the breaker waits as long
    _carry_out(ctx, backfill, commands, vectors)


def _backfill(ctx: Context, event: v.BackfillInput) -> None:
    backfill = ctx.vectors.backfill
    if backfill is not None:
        _carry_out(ctx, backfill, backfill.step(event), [])


def _carry_out(ctx: Context, backfill: v.Backfill, commands: list[v.BackfillCommand], vectors: list[bytes]) -> None:
    """The job's commands; ``vectors``: the answer a ``StoreVectors`` keeps."""
    while commands:
        command = commands.pop(0)
        if isinstance(command, v.Log):
            logs.emit(ctx.log, command.level, command.event, **command.fields)
        elif isinstance(command, v.WakeIn):
            ctx.wake(command.seconds, m.VectorsDue())
        elif isinstance(command, v.ReadRows) and ctx.store is not None:
            try:
                rows = missing(ctx.store.db, command.limit, _model(ctx))
            except Exception as exc:  # noqa: BLE001 - a store that cannot be read now: the next timer looks again
                ctx.log.warning("vectors_not_read", error=f"{type(exc).__name__}: {exc}")
                continue
            commands[:0] = backfill.step(v.RowsRead(tuple(rows), time.monotonic()))
        elif isinstance(command, v.SendBatch):
            ctx.to_pool(PoolName.LLM, m.StageRequest(BACKFILL_TASK, command.token, StageName.EMBED_ROWS,
                                                     texts=tuple(row.text for row in command.rows),
                                                     timeout_s=command.timeout_s + STAGE_MARGIN_S))
        elif isinstance(command, v.StoreVectors) and ctx.store is not None:
            try:
                kept = store_vectors(ctx.store, list(command.rows), vectors, _model(ctx))
            except Exception as exc:  # noqa: BLE001 - not kept (a full disk): those rows go in a later batch
                ctx.log.warning("vectors_not_kept", error=f"{type(exc).__name__}: {exc}")
                continue
            commands[:0] = backfill.step(v.Kept(kept))
        elif isinstance(command, v.BatchFailed):
            ctx.log.warning("vectors_failed", error=command.error, next_try_s=command.next_try_s)


def embeddings_view(ctx: Context) -> dict[str, Any] | None:
    """``stats``' embeddings: what the background job did and what recall lacked; None when off."""
    if not _on(ctx):
        return None
    assert ctx.settings is not None
    view: dict[str, Any] = {"model": ctx.settings.memory.embeddings_model,
                            "recall_without_vector": ctx.vectors.recall.count,
                            "last_recall_error": ctx.vectors.recall.error,
                            "search_without_vector": ctx.vectors.search.count,
                            "last_search_error": ctx.vectors.search.error}
    try:
        view["rows_without_vector"] = missing_count(ctx.store.db, _model(ctx)) if ctx.store is not None else None
    except Exception:  # noqa: BLE001 - a store that cannot be read: shown as unknown, stats still answers
        view["rows_without_vector"] = None
    if ctx.vectors.backfill is not None:
        view.update(ctx.vectors.backfill.view())
    return view
