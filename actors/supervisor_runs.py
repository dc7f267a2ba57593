"""The supervisor's side of its tasks' runs: reports of task actors, workers' effectful steps, verification
gates, task actors that die -- and the store it writes them to, while that store takes no writes.

A mixin of ``actors.supervisor.Supervisor`` (one actor, split by conversation as
its messages are: actors/messages/task_run.py and stage_work.py); it reads and
writes the supervisor's own fields.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from actors import messages as m
from actors.request_handler import request_handler
from pegasus.admission import Admission, StopRun
from pegasus.files import write_private
from pegasus.store import StoreError, StoreUnavailable, health
from pegasus.store.sqlite import TERMINAL
from pegasus.task import LifecycleState, PoolName, StageName

UNSAVED = "pegasus.db.unsaved-tasks.json"  # the unfinished tasks as memory had them when the store was found damaged


class RunsAndStore:
    """Handlers of the supervisor for task runs and for the store (see the module docstring)."""

    # Fields and methods of the supervisor these handlers use.
    admission: Any
    store: Any
    store_health: Any
    settings: Any
    pools: dict[str, Any]
    task_actors: Any
    pending_suspend: dict[str, list[tuple[Any, str]]]
    log: Any

    # Annotations only: a method here would shadow the actor's own (send, wakeupAfter) in the MRO.
    send: Callable[[Any, Any], None]
    wakeupAfter: Callable[..., None]  # noqa: N815 - Thespian's name
    _carry_out: Callable[[list[Any]], None]
    _restore: Callable[[], None]
    _answer_suspends: Callable[[str], None]
    _notify: Callable[[Any], None]
    _on_post_reflection: Callable[[Any], None]
    _on_query_vector: Callable[[Any], None]  # actors.supervisor_vectors
    _on_row_vectors: Callable[[Any], None]  # likewise
    _answered_by_pool: Callable[..., None]

    # -- reports from task actors and the tool pool ----------------------------------------------
    def receiveMsg_TaskReports(self, batch: m.TaskReports, sender: Any) -> None:
        """A task actor's reports, in order; their store writes share one commit."""
        if self.store is None or self.admission is None:
            return
        if self.task_actors.address_of(batch.task_id) != sender:
            return  # not the actor of the task's run (one stopped when the store failed, say)
        self.task_actors.report(sender, batch.cpu_s)
        with self.store.group():
            for report in batch.reports:
                if isinstance(report, m.TaskTransitioned):
                    self._on_transitioned(report)
                elif isinstance(report, m.TaskStopped):
                    self._on_stopped(report)

    def receiveMsg_TextDelta(self, delta: m.TextDelta, sender: Any) -> None:
        """Streamed text of a task's stage, from its task actor: to the task's subscribers, never stored."""
        if self.task_actors.address_of(delta.task_id, delta.run) == sender:
            self._notify(delta)

    def receiveMsg_StepStarting(self, step: m.StepStarting, sender: Any) -> None:
        """A worker is about to run an effectful step: commit its ``started`` row, then answer go.

        Refused when the task's run is over (canceled, suspended, replaced after a
        crash) or the key already has a row (it started before: never run twice).
        The commit comes before the answer, so a step never runs unjournalled.
        """
        if self.store is None or self.admission is None:
            return
        record = self.admission.records.get(step.task_id)
        if record is None or record.run != step.run or record.state != LifecycleState.RUNNING:
            self.send(sender, m.StepGo(step.key, step.job, False, reason="the task's run is over"))
            return
        try:
            existing = self.store.journal_start(step.key, step.task_id, step.run, step.step_index, step.tool,
                                                "effectful")
        except Exception as exc:  # noqa: BLE001 - not journalled, so not run: the task sees a failed step
            self.log.error("journal_write_failed", task_id=step.task_id, key=step.key, error=str(exc))
            self.send(sender, m.StepGo(step.key, step.job, False, reason=f"the journal could not be written: {exc}"))
            return
        if existing is not None:
            self.send(sender, m.StepGo(step.key, step.job, False, reason=f"already {existing['status']}",
                                       existing=existing))
        else:
            self.send(sender, m.StepGo(step.key, step.job, True))

    # The reports below come only inside a TaskReports, configured supervisor checked.
    def _on_transitioned(self, report: m.TaskTransitioned) -> None:
        assert self.admission is not None and self.store is not None
        record = self.admission.records.get(report.task_id)
        if record is None or record.run != report.run:
            return  # a run that was canceled or replaced
        record.actor_pid = report.pid
        self.store.cognitive_transition(report.task_id, report.run, record.machine, report.from_state,
                                        report.to_state, report.event, report.stage, report.checkpoint,
                                        report.journal_finish)
        self._carry_out(self.admission.on_transition(report.task_id, report.run, report.from_state,
                                                     report.to_state, report.event, report.timestamp, report.stage))

    def _on_stopped(self, report: m.TaskStopped) -> None:
        assert self.admission is not None
        self.task_actors.release(report.task_id, report.run)  # before the next run is placed
        self._carry_out(self.admission.on_stopped(report.task_id, report.run, report.state, report.snapshot,
                                                  report.exit_reason, report.children))
        self._answer_suspends(report.task_id)

    def receiveMsg_StageResult(self, result: m.StageResult, sender: Any) -> None:
        if self.admission is None:
            return
        self._answered_by_pool(result.task_id, result.stage, result.token)  # nothing to send again to a new pool
        if result.stage == StageName.POST_REFLECT:
            self._on_post_reflection(result)
            return
        if result.stage in (StageName.EMBED_QUERY, StageName.EMBED_ROWS):  # actors.supervisor_vectors
            (self._on_query_vector if result.stage == StageName.EMBED_QUERY else self._on_row_vectors)(result)
            return
        if result.stage != StageName.GATE:
            return
        detail = {**result.payload, "error": result.error, "worker": result.worker}
        self._carry_out(self.admission.on_gate(result.task_id, result.token, result.ok, detail))

    def receiveMsg_TaskAbandoned(self, abandoned: m.TaskAbandoned, sender: Any) -> None:
        """A task actor let a run go (see the message): restarted from its checkpoint, as after a crash."""
        if self.admission is None or self.task_actors.address_of(abandoned.task_id, abandoned.run) != sender:
            return
        self.task_actors.release(abandoned.task_id, abandoned.run)
        self.log.warning("task_run_abandoned", task_id=abandoned.task_id, run=abandoned.run, reason=abandoned.reason)
        self._carry_out(self.admission.on_run_lost(abandoned.task_id, abandoned.run,
                                                   f"the task actor let the run go: {abandoned.reason}"))
        self._answer_suspends(abandoned.task_id)

    # -- the store: backups, and a store that takes no writes ------------------------------------
    @request_handler
    def receiveMsg_Backup(self, request: m.Backup, sender: Any) -> Any:
        assert self.store is not None
        try:
            report = self.store.backup(request.path, overwrite=request.overwrite)
        except StoreUnavailable as exc:  # the backup's disk, not the store's: the system goes on
            raise StoreError(f"cannot write the backup {request.path}: {exc}") from None
        self.log.info("backup_written", path=report["path"], tasks=report["tasks"], seconds=report["seconds"])
        return report

    @request_handler
    def receiveMsg_StoreStatus(self, request: m.StoreStatus, sender: Any) -> Any:
        return self._store_status()

    def _store_failed(self, error: StoreUnavailable) -> None:
        """A write (or read) failed for want of a store: what ``pegasus.store.health`` decides, carried out."""
        self._carry_out_health(self.store_health.failed(error, time.monotonic()))

    def _carry_out_health(self, commands: list[health.Command]) -> None:
        for command in commands:
            if isinstance(command, health.Report):
                getattr(self.log, command.level)(command.event, **command.fields)
            elif isinstance(command, health.HaltWork):
                self._halt_work()
            elif isinstance(command, health.SaveTasks):
                self._save_unfinished()
            elif isinstance(command, health.ProbeAfter):
                self.wakeupAfter(timedelta(seconds=command.seconds), payload=m.StoreProbe())
            elif isinstance(command, health.TruncateWal) and self.store is not None:
                self._truncate_wal(command.probing)
            elif isinstance(command, health.TryWrite) and self.store is not None:
                self._try_write()
            elif isinstance(command, health.CheckFile) and self.store is not None:
                damage = self.store.damage()
                if damage is not None:
                    self._store_failed(damage)

    def _truncate_wal(self, probing: bool) -> None:
        assert self.store is not None
        failure: StoreUnavailable | None = None
        freed = 0
        try:
            freed = self.store.truncate_wal()
        except StoreUnavailable as exc:  # not folded in whole yet (no room to): the next probe tries again
            failure = exc
        except StoreError as exc:
            self.log.warning("store_wal_kept", error=str(exc))
        else:
            if freed:
                self.log.warning("store_wal_truncated", bytes_freed=freed)
        if probing:
            self._carry_out_health(self.store_health.wal_folded(failure, time.monotonic(), freed))

    def _halt_work(self) -> None:
        """Memory may now be ahead of the store, so it is dropped: every run is stopped and Admission
        re-reads the store (which answers reads meanwhile); one that cannot be read leaves it as it was."""
        error = self.store_health.error
        verifying = [r.task_id for r in self.admission.records.values() if r.state == LifecycleState.VERIFYING] \
            if self.admission is not None else []
        self._carry_out([StopRun(task_id, 0) for task_id in self.task_actors.running()])
        for task_id in verifying:  # its gate's answer would belong to a record that is gone
            self.send(self.pools[PoolName.TOOL], m.CancelTask(task_id))
        for task_id in list(self.pending_suspend):
            for client, request_id in self.pending_suspend.pop(task_id):
                self.send(client, m.Reply(request_id, False, error=f"task {task_id} was not suspended: {error}",
                                          error_type=type(error).__name__))
        assert self.settings is not None
        try:
            self.admission = Admission(self.settings, store=self.store)
        except StoreError as exc:
            self.log.error("store_unreadable", error=str(exc))

    def _save_unfinished(self) -> None:
        """The unfinished tasks as memory has them, to ``UNSAVED`` beside a damaged store: what it may have
        lost of them, for the operator to compare with the backup restored (and submit again)."""
        if self.admission is None or self.store is None:
            return
        tasks = [{"task_id": r.task_id, "lifecycle_state": r.state, "state": r.snapshot.state, "machine": r.machine,
                  "priority": r.priority, "input": r.snapshot.context.input_text,
                  "metadata": dict(r.lifecycle.metadata)}
                 for r in self.admission.records.values() if r.state not in TERMINAL]
        target = self.store.path.with_name(UNSAVED)
        try:
            write_private(target, json.dumps({"store": str(self.store.path), "tasks": tasks}, indent=1).encode())
        except OSError as exc:
            self.log.error("store_tasks_not_saved", tasks=len(tasks), error=str(exc))
            return
        self.log.error("store_tasks_saved", tasks=len(tasks), path=str(target))

    def _probe_store(self) -> None:
        self._carry_out_health(self.store_health.probe())

    def _try_write(self) -> None:
        assert self.store is not None
        try:
            self.store.probe()
            self._restore()
        except StoreUnavailable as exc:
            self._carry_out_health(self.store_health.probe_failed(exc, time.monotonic()))
        except Exception as exc:  # noqa: BLE001 - whatever it was, try again later (never stay stopped)
            self.log.exception("store_restore_failed")
            failure = StoreUnavailable(self.store.path, f"restoring from store {self.store.path} failed: {exc}")
            self._carry_out_health(self.store_health.probe_failed(failure, time.monotonic()))

    def _task_counts(self) -> dict[str, int]:
        """Tasks per lifecycle state: the store's, or what memory holds while the store cannot be read."""
        assert self.admission is not None
        try:
            return self.admission.counts()
        except StoreError:
            return dict(Counter(record.state for record in self.admission.records.values()))

    def _store_status(self) -> dict[str, Any]:
        assert self.store is not None
        return self.store_health.status(str(self.store.path))
