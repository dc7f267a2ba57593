"""The supervisor's side of embedding vectors (issue 29): a recall's query vector, and the background job
giving memory rows theirs.  The supervisor never calls the endpoint: it hands the texts to the llm pool
(stages EMBED_QUERY and EMBED_ROWS, the latter at the pool's lowest priority) and reads the answers.

A mixin of ``actors.supervisor.Supervisor``.  With ``[memory] embeddings_model`` set, a recall waits for
its query's vector at most ``2 x embeddings_timeout_s`` (+ a margin), then is answered with full text alone,
saying why (``Recalled.error``, the task's ``recall.error``).  The policy of the background job is
``pegasus.memory.vectors.Backfill``; what it shows is ``stats``' ``embeddings``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from actors import messages as m
from pegasus.memory import MemoryStore
from pegasus.memory.embeddings import configured, unpack
from pegasus.memory.vectors import BACKFILL_TASK, Backfill, Breaker, missing, missing_count, store_vectors
from pegasus.task.events import utc_now
from pegasus.task.names import PoolName, StageName

STAGE_MARGIN_S = 5.0  # the pool's deadline past the call's own timeout: the worker answers first


class Vectors:
    """Handlers of the supervisor for embedding vectors (see the module docstring)."""

    store: Any
    settings: Any
    log: Any
    send: Callable[[Any, Any], None]
    wakeupAfter: Callable[..., None]  # noqa: N815 - Thespian's name
    _to_pool: Callable[[str, Any], None]
    _answered_by_pool: Callable[..., None]
    _memory: Callable[[], MemoryStore]
    _recall: Callable[..., None]  # actors.supervisor_reflect: answer an AskRecall
    _recall_waits: dict[tuple[str, int], tuple[Any, Any]] | None = None  # (task, token) -> (ask, asker)
    _backfill: Backfill | None = None
    _vector_breaker: Breaker | None = None
    _recall_fallbacks: int = 0
    _recall_error: str | None = None

    def _embeddings_on(self) -> bool:
        return self.settings is not None and configured(self.settings.memory)

    # -- a recall's query --------------------------------------------------------------------------
    def _recall_waits_for_vector(self, ask: m.AskRecall, sender: Any) -> bool:
        """Whether ``ask`` now waits for its query's vector (embeddings configured); else answer it at once."""
        if not self._embeddings_on() or not ask.query.strip():
            return False
        breaker = self._breaker
        if not breaker.closed(time.monotonic()):  # failed a moment ago: full text at once, saying why
            self._recall_without_vector((ask, sender), f"embeddings: {breaker.error} (not asked again for "
                                        f"{breaker.open_until - time.monotonic():.0f}s)")
            return True
        if self._recall_waits is None:
            self._recall_waits = {}
        self._recall_waits[(ask.task_id, ask.token)] = (ask, sender)
        timeout = self.settings.memory.embeddings_timeout_s
        self.wakeupAfter(timedelta(seconds=2 * timeout + STAGE_MARGIN_S),
                         payload=m.RecallVectorDue(ask.task_id, ask.token))
        self._to_pool(PoolName.LLM, m.StageRequest(ask.task_id, ask.token, StageName.EMBED_QUERY, texts=(ask.query,),
                                                   timeout_s=timeout + STAGE_MARGIN_S))
        return True

    @property
    def _breaker(self) -> Breaker:
        if self._vector_breaker is None:
            self._vector_breaker = Breaker()
        return self._vector_breaker

    def _endpoint_answered(self, result: m.StageResult) -> None:
        """Every embed stage's answer opens or closes the breaker."""
        if result.ok:
            self._breaker.succeeded()
        elif result.error_kind == "exception":  # the endpoint's failure (not a pool's queue_full, a dead worker)
            wait = self._backfill.next_delay() if self._backfill is not None else \
                self.settings.memory.embeddings_backfill_s
            self._breaker.failed(time.monotonic(), wait, result.error or "failed")

    def _on_query_vector(self, result: m.StageResult) -> None:
        self._endpoint_answered(result)
        waiting = (self._recall_waits or {}).pop((result.task_id, result.token), None)
        if waiting is None:
            return  # answered already, with full text alone
        vectors = result.payload.get("vectors") if result.ok else None
        if vectors:
            self._recall(*waiting, query_vector=unpack(vectors[0]))
        else:
            self._recall_without_vector(waiting, f"embeddings: {result.error or 'no vector'}")

    def _recall_vector_due(self, due: m.RecallVectorDue) -> None:
        waiting = (self._recall_waits or {}).pop((due.task_id, due.token), None)
        if waiting is not None:
            self._answered_by_pool(due.task_id, StageName.EMBED_QUERY, due.token)
            self._recall_without_vector(waiting, "embeddings: no vector within "
                                        f"{2 * self.settings.memory.embeddings_timeout_s + STAGE_MARGIN_S:g}s "
                                        "(the llm pool busy, or the endpoint hung)")

    def _recall_without_vector(self, waiting: tuple[Any, Any], why: str) -> None:
        note = f"{why}; recalled by full text alone"
        self._recall_fallbacks += 1
        self._recall_error = note
        self.log.warning("recall_without_vector", task_id=waiting[0].task_id, error=note)
        self._recall(*waiting, note=note)

    # -- the background job ----------------------------------------------------------------------
    def _vectors_restored(self) -> None:
        """After a (re)start: the background job's timer (once)."""
        if not self._embeddings_on():
            return
        if self._backfill is None:
            memory = self.settings.memory
            self._backfill = Backfill(memory.embeddings_backfill_s, memory.embeddings_batch,
                                      memory.embeddings_timeout_s)
        self._arm_vectors(self._backfill)

    def _arm_vectors(self, backfill: Backfill) -> None:
        if backfill.arm():
            self.wakeupAfter(timedelta(seconds=backfill.next_delay()), payload=m.VectorsDue())

    def _vectors_due(self) -> None:
        backfill = self._backfill
        if backfill is None:
            return
        if backfill.due(time.monotonic()):
            self._next_batch(backfill)
        self._arm_vectors(backfill)

    def _next_batch(self, backfill: Backfill) -> None:
        if self.store is None:
            return
        try:
            rows = missing(self.store.db, backfill.batch)
        except Exception as exc:  # noqa: BLE001 - a store that cannot be read now: the next timer looks again
            self.log.warning("vectors_not_read", error=f"{type(exc).__name__}: {exc}")
            return
        token = backfill.start(rows, time.monotonic())
        if token is not None:
            self._to_pool(PoolName.LLM, m.StageRequest(
                BACKFILL_TASK, token, StageName.EMBED_ROWS, texts=tuple(row.text for row in backfill.in_flight),
                timeout_s=backfill.timeout_s + STAGE_MARGIN_S))

    def _on_row_vectors(self, result: m.StageResult) -> None:
        backfill = self._backfill
        if backfill is None:
            return
        rows, more = backfill.answered(result.token, result.ok, result.error, utc_now().isoformat())
        self._endpoint_answered(result)  # after the back-off grew: the breaker waits as long
        if not result.ok:
            self.log.warning("vectors_failed", error=result.error, next_try_s=backfill.next_delay())
        vectors = result.payload.get("vectors") or []
        if rows and len(vectors) == len(rows):
            try:
                backfill.kept(store_vectors(self.store, rows, vectors))
            except Exception as exc:  # noqa: BLE001 - not kept (a full disk): those rows go in a later batch
                self.log.warning("vectors_not_kept", error=f"{type(exc).__name__}: {exc}")
                return
            if more:
                self._next_batch(backfill)

    def _embeddings_view(self) -> dict[str, Any] | None:
        """``stats``' embeddings: what the background job did and what recall lacked; None when off."""
        if not self._embeddings_on():
            return None
        view: dict[str, Any] = {"model": self.settings.memory.embeddings_model,
                                "recall_without_vector": self._recall_fallbacks,
                                "last_recall_error": self._recall_error}
        try:
            view["rows_without_vector"] = missing_count(self.store.db) if self.store is not None else None
        except Exception:  # noqa: BLE001 - a store that cannot be read: shown as unknown, stats still answers
            view["rows_without_vector"] = None
        if self._backfill is not None:
            view.update(self._backfill.view())
        return view
