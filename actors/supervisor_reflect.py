"""The supervisor's side of memory in a task's life (issue 19): recall before a think / reason stage, and
the post-task reflector after done.  The store is here: convention members and task actors never open it.

A mixin of ``actors.supervisor.Supervisor`` (its fields, its store).  Recall:
a task actor's AskRecall is answered at once with the identity and the k most
relevant facts and episodes (``pegasus.memory``; FTS5, well under a
millisecond).  Reflection: when a task becomes done (its ``done`` already
written, in the same commit as its first hand-out's row), its full context is
archived and its reflection handed to the llm pool at the lowest priority;
``pegasus.admission.reflections`` decides, ``pegasus.store.reflections`` keeps
the durable rows.
"""

from __future__ import annotations

from collections.abc import Callable
import os
from typing import Any

from actors import messages as m
from pegasus.admission import TransitionNotice
from pegasus.admission.reflections import Again, Dispatch, GiveUp, Keep, PostReflections
from pegasus.memory import MemoryStore, load_identity
from pegasus.memory.identity import IDENTITY_FILE
from pegasus.memory.errors import MemoryStoreError
from pegasus.quarantine import reason
from pegasus.store import StoreUnavailable, reflections
from pegasus.store.checkpoint import rebuild
from pegasus.task import LifecycleState, MachineName, PoolName, StageName, TaskSnapshot
from pegasus.task.models import PostTaskReflection

RECALL_KEYS = ("id", "kind", "title", "text", "score")
RECALL_TEXT_CHARS = 2000  # of one recalled memory in a task's context (checkpointed with it): k of them at most


class RecallAndReflect:
    """Handlers of the supervisor for memory (see the module docstring)."""

    store: Any
    settings: Any
    pools: dict[str, Any]
    log: Any
    send: Callable[[Any, Any], None]
    _to_pool: Callable[[str, Any], None]  # a stage request kept until answered (actors.supervisor_children)
    _memory: Callable[[], MemoryStore]  # the memory over the store (actors.supervisor_memory)
    _archive_task: Callable[..., None]  # (task_id, snapshot): the done task's context archived (same module)
    _recall_waits_for_vector: Callable[[Any, Any], bool]  # actors.supervisor_vectors
    _vectors_restored: Callable[[], None]  # likewise
    _identity_cache: tuple[Any, str] | None = None  # (what it was read from, the text)

    # -- recall ----------------------------------------------------------------------------------
    def receiveMsg_AskRecall(self, ask: m.AskRecall, sender: Any) -> None:
        """Identity and memories for a stage waiting on them; a store that cannot answer sends none
        (the stage runs without: a task never waits on memory).  With an embeddings endpoint the query's
        vector is asked of the llm pool first (actors.supervisor_vectors), then ``_recall`` answers."""
        if not self._recall_waits_for_vector(ask, sender):
            self._recall(ask, sender)

    def _recall(self, ask: m.AskRecall, sender: Any, query_vector: list[float] | None = None,
                note: str | None = None) -> None:
        """Answer ``ask``: full text, fused with ``query_vector`` when there is one; ``note``: why there is none."""
        identity, error = "", note
        items: tuple[dict[str, Any], ...] = ()
        try:
            identity = self._current_identity()
            found = self._memory().search(ask.query, ask.k, kinds=("fact", "episode"), query_vector=query_vector)
            items = tuple({**{key: getattr(item, key) for key in RECALL_KEYS}, "text": item.text[:RECALL_TEXT_CHARS]}
                          for item in found)
        except Exception as exc:  # noqa: BLE001 - recorded in the task's context, logged here
            error = f"{type(exc).__name__}: {exc}"
            self.log.warning("recall_failed", task_id=ask.task_id, error=error)
        self.send(sender, m.Recalled(ask.task_id, ask.token, identity, items, error))

    def _current_identity(self) -> str:
        """The identity text, read again only when identity.md changed (it is asked for before every think /
        reason stage); MemoryStoreError when the file cannot be used."""
        path = self.settings.state_dir() / IDENTITY_FILE
        try:
            info = os.lstat(path)
            found: tuple[int, ...] | None = (info.st_ino, info.st_mtime_ns, info.st_size, info.st_mode, info.st_uid)
        except FileNotFoundError:
            found = None
        signature = (found, self.settings.agent)  # the file, or [agent] when there is none
        cached = self._identity_cache
        if cached is None or cached[0] != signature:
            cached = self._identity_cache = (signature, load_identity(self.settings).text)
        return cached[1]

    def _identity(self) -> str:
        """The identity text ('' when it cannot be read: a run never fails for it)."""
        try:
            return self._current_identity()
        except Exception as exc:  # noqa: BLE001 - an unreadable identity.md: logged, the task runs without
            self.log.warning("identity_unreadable", error=f"{type(exc).__name__}: {exc}")
            return ""

    # -- the post-task reflector -----------------------------------------------------------------
    @property
    def _post(self) -> PostReflections:
        post = getattr(self, "_post_reflections", None)
        if post is None:
            post = self._post_reflections = PostReflections(limit=max(1, self.settings.pools.llm_workers))
        return post

    def _after_notice(self, notice: TransitionNotice) -> None:
        """Called for every transition the supervisor carries out: a task just done is archived and reflected."""
        if notice.machine == MachineName.LIFECYCLE and notice.to_state == LifecycleState.DONE:
            try:
                self._task_done(notice.task_id)
            except StoreUnavailable:
                raise  # the supervisor stops every run and restores: the reflection is pending then
            except Exception:  # noqa: BLE001 - the task is done whatever its reflection does
                self.log.exception("reflection_not_started", task_id=notice.task_id)

    def _task_done(self, task_id: str) -> None:
        try:
            snapshot = rebuild(task_id, self.store.checkpoints(task_id))
        except Exception as exc:  # noqa: BLE001 - quarantined: nothing to archive or reflect on, the task is done
            reflections.finished(self.store, task_id, reflections.FAILED, error=reason(exc))
            return
        try:
            self._archive_task(task_id, snapshot)
        except MemoryStoreError as exc:  # the archive is a copy: the task is done all the same
            self.log.warning("archive_failed", task_id=task_id, error=str(exc))
        if not self.settings.memory.reflector:
            reflections.finished(self.store, task_id, reflections.SKIPPED, error="[memory] reflector is off")
            return
        self._hand_out(self._post.want(task_id), snapshot)

    def _reflections_restored(self) -> None:
        """After a (re)start: the done tasks whose reflection never committed go again (and the background
        job giving memory rows their vectors starts)."""
        self._vectors_restored()
        if self.store is None or self.settings is None or not self.settings.memory.reflector:
            return
        for task_id, _ in reflections.pending(self.store):
            self._hand_out(self._post.want(task_id))

    def _hand_out(self, task_ids: list[str], known: TaskSnapshot | None = None) -> None:
        """Hand these reflections to the llm pool (each counted first); one given up lets the next go."""
        for task_id in task_ids:
            decision = self._post.handed_out(task_id, reflections.started(self.store, task_id))
            if isinstance(decision, GiveUp):
                self._reflection_failed(task_id, decision.error)
                self._hand_out(self._post.release())
                continue
            assert isinstance(decision, Dispatch)
            try:
                snapshot = known if known is not None and known.task_id == task_id else \
                    rebuild(task_id, self.store.checkpoints(task_id))
            except Exception as exc:  # noqa: BLE001 - quarantined: this reflection fails, the others go
                self._post.dropped(task_id)
                self._reflection_failed(task_id, reason(exc))
                self._hand_out(self._post.release())
                continue
            self._to_pool(PoolName.LLM, m.StageRequest(task_id, decision.token, StageName.POST_REFLECT,
                                                       snapshot.machine, snapshot.context))

    def _on_post_reflection(self, result: m.StageResult) -> None:
        decision = self._post.answered(result.task_id, result.token, result.ok, result.payload, result.error,
                                       result.error_kind)
        if decision is None:
            return  # a late answer of an earlier hand-out
        if isinstance(decision, Again):
            self._post.again(decision.task_id)
        elif isinstance(decision, GiveUp):
            self._reflection_failed(decision.task_id, decision.error)
        elif isinstance(decision, Keep):
            self._keep(decision.task_id, decision.reflection)
        self._hand_out(self._post.release())

    def _keep(self, task_id: str, reflection: PostTaskReflection) -> None:
        """The reflection, its facts and its episode, and the done-marker: one transaction."""
        data = reflection.model_dump(mode="json")
        try:
            written = reflections.finished(self.store, task_id, reflections.COMPLETE, reflection=data,
                                           write=lambda: self._remember(task_id, reflection))
        except MemoryStoreError as exc:  # a cap, a bad path: nothing of it written, the failure recorded
            self._reflection_failed(task_id, f"the reflection's memories were refused: {exc}", data)
            return
        self.log.info("reflection_complete", task_id=task_id, memories=written)

    def _remember(self, task_id: str, reflection: PostTaskReflection) -> list[str]:
        memory = self._memory()
        ids = [memory.write_fact(fact.path, fact.content, task_id=task_id).id for fact in reflection.facts]
        if reflection.episode is not None:
            episode = reflection.episode
            ids.append(memory.add_episode(task_id, episode.title, episode.summary, episode.details,
                                          episode.lesson).id)
        return ids

    def _reflection_failed(self, task_id: str, error: str, data: dict[str, Any] | None = None) -> None:
        self.log.warning("reflection_failed", task_id=task_id, error=error)
        reflections.finished(self.store, task_id, reflections.FAILED, reflection=data, error=error)
