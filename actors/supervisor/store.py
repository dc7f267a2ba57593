"""The supervisor's store: restored from at a start, backed up, and what ``pegasus.store.health`` decides
carried out while it takes no writes (stop every run, probe, fold the WAL in, restore when it comes back)."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from actors import messages as m
from actors.supervisor import memory, vectors
from actors.supervisor.commands import carry_out
from actors.supervisor.context import Context, Rows
from pegasus import logs
from pegasus.admission import Admission, Refused, StopRun
from pegasus.admission.inputs import Restore
from pegasus.files import write_private
from pegasus.store import StoreError, StoreUnavailable, health
from pegasus.store.sqlite import TERMINAL
from pegasus.task import LifecycleState, PoolName

UNSAVED = "pegasus.db.unsaved-tasks.json"  # the unfinished tasks as memory had them when the store was found damaged


def restore(ctx: Context) -> None:
    """Admission as the store has it, as at a start: the unfinished tasks restored, their runs
    started once the writes that restoring makes are committed."""
    assert ctx.settings is not None and ctx.store is not None
    admission = Admission(ctx.settings, store=ctx.store)
    with ctx.store.group():
        commands = admission.step(Restore())
    refused = next((c.error for c in commands if isinstance(c, Refused)), None)
    if refused is not None:
        raise refused
    ctx.admission = admission
    step(ctx, health.Recovered(time.monotonic()))
    carry_out(ctx, commands)
    memory.reflections_restored(ctx)
    vectors.restored(ctx)  # the background job giving memory rows their vectors


def store_failed(ctx: Context, error: StoreUnavailable) -> None:
    """A write (or read) failed for want of a store."""
    step(ctx, health.Failed(error, time.monotonic()))


def step(ctx: Context, event: health.Input) -> None:
    for command in ctx.store_health.step(event):
        HEALTH[type(command)](ctx, command)


def _report(ctx: Context, command: health.Report) -> None:
    logs.emit(ctx.log, command.level, command.event, **command.fields)


def _probe_after(ctx: Context, command: health.ProbeAfter) -> None:
    ctx.wake(command.seconds, m.StoreProbe())


def _truncate_wal(ctx: Context, command: health.TruncateWal) -> None:
    if ctx.store is None:
        return
    failure: StoreUnavailable | None = None
    freed = 0
    try:
        freed = ctx.store.truncate_wal()
    except StoreUnavailable as exc:  # not folded in whole yet (no room to): the next probe tries again
        failure = exc
    except StoreError as exc:
        ctx.log.warning("store_wal_kept", error=str(exc))
    else:
        if freed:
            ctx.log.warning("store_wal_truncated", bytes_freed=freed)
    if command.probing:
        step(ctx, health.WalFolded(failure, time.monotonic(), freed))


def _try_write(ctx: Context, command: health.TryWrite) -> None:
    if ctx.store is None:
        return
    try:
        ctx.store.probe()
        restore(ctx)
    except StoreUnavailable as exc:
        step(ctx, health.ProbeFailed(exc, time.monotonic()))
    except Exception as exc:  # noqa: BLE001 - whatever it was, try again later (never stay stopped)
        ctx.log.exception("store_restore_failed")
        failure = StoreUnavailable(ctx.store.path, f"restoring from store {ctx.store.path} failed: {exc}")
        step(ctx, health.ProbeFailed(failure, time.monotonic()))


def _check_file(ctx: Context, command: health.CheckFile) -> None:
    damage = ctx.store.damage() if ctx.store is not None else None
    if damage is not None:
        store_failed(ctx, damage)


def _halt_work(ctx: Context, command: health.HaltWork) -> None:
    """Memory may now be ahead of the store, so it is dropped: every run is stopped and Admission
    re-reads the store (which answers reads meanwhile); one that cannot be read leaves it as it was."""
    error = ctx.store_health.error
    verifying = [r.task_id for r in ctx.admission.records.values() if r.state == LifecycleState.VERIFYING] \
        if ctx.admission is not None else []
    carry_out(ctx, [StopRun(task_id, 0) for task_id in ctx.task_actors.running()])
    ctx.run_started.clear()  # those runs end unsaid (no span): Admission starts them again from the store
    for task_id in verifying:  # its gate's answer would belong to a record that is gone
        ctx.send(ctx.pools.address[PoolName.TOOL], m.CancelTask(task_id))
    for task_id in list(ctx.pending_suspend):
        for client, request_id in ctx.pending_suspend.pop(task_id):
            ctx.send(client, m.Reply(request_id, False, error=f"task {task_id} was not suspended: {error}",
                                     error_type=type(error).__name__))
    assert ctx.settings is not None
    try:
        ctx.admission = Admission(ctx.settings, store=ctx.store)
    except StoreError as exc:
        ctx.log.error("store_unreadable", error=str(exc))


def _save_unfinished(ctx: Context, command: health.SaveTasks) -> None:
    """The unfinished tasks as memory has them, to ``UNSAVED`` beside a damaged store: what it may have
    lost of them, for the operator to compare with the backup restored (and submit again)."""
    if ctx.admission is None or ctx.store is None:
        return
    tasks = [{"task_id": r.task_id, "lifecycle_state": r.state, "state": r.snapshot.state, "machine": r.machine,
              "priority": r.priority, "input": r.snapshot.context.input_text,
              "metadata": dict(r.lifecycle.metadata)}
             for r in ctx.admission.records.values() if r.state not in TERMINAL]
    target = ctx.store.path.with_name(UNSAVED)
    try:
        write_private(target, json.dumps({"store": str(ctx.store.path), "tasks": tasks}, indent=1).encode())
    except OSError as exc:
        ctx.log.error("store_tasks_not_saved", tasks=len(tasks), error=str(exc))
        return
    ctx.log.error("store_tasks_saved", tasks=len(tasks), path=str(target))


HEALTH: dict[type, Callable[[Context, Any], None]] = {
    health.Report: _report, health.HaltWork: _halt_work, health.SaveTasks: _save_unfinished,
    health.ProbeAfter: _probe_after, health.TruncateWal: _truncate_wal, health.TryWrite: _try_write,
    health.CheckFile: _check_file,
}


# -- requests and views -----------------------------------------------------------------------------
def backup(ctx: Context, request: m.Backup) -> Any:
    _, store, _ = ctx.configured
    try:
        report = store.backup(request.path, overwrite=request.overwrite)
    except StoreUnavailable as exc:  # the backup's disk, not the store's: the system goes on
        raise StoreError(f"cannot write the backup {request.path}: {exc}") from None
    ctx.log.info("backup_written", path=report["path"], tasks=report["tasks"], seconds=report["seconds"])
    return report


def store_status(ctx: Context, request: m.StoreStatus | None = None) -> dict[str, Any]:
    assert ctx.store is not None
    return ctx.store_health.status(str(ctx.store.path))


def task_counts(ctx: Context) -> dict[str, int]:
    """Tasks per lifecycle state: the store's, or what memory holds while the store cannot be read."""
    assert ctx.admission is not None
    try:
        return ctx.admission.counts()
    except StoreError:
        return dict(Counter(record.state for record in ctx.admission.records.values()))


REQUESTS: Rows = {m.Backup: backup, m.StoreStatus: store_status}
