"""Backups of the store with SQLite's online backup API.

The copy is one consistent snapshot, taken while the system runs (a read does
not stop the writer), written beside the target, checked with
``PRAGMA quick_check`` and renamed into place: a failed backup leaves no half
file, and an existing file is replaced only when asked and only by a complete
copy.  The copy is mode 0600, like everything in the state directory.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from pegasus.store.errors import DiskFull, StoreError, classify

PRIVATE_FILE = 0o600


def backup(source: sqlite3.Connection, source_path: Path, target: Path | str, *,
           overwrite: bool = False) -> dict[str, Any]:
    """Copy the database ``source`` (open on ``source_path``) to ``target`` (an absolute path).

    Answers path, bytes, tasks, schema_version and seconds.  StoreError when the
    target exists (and ``overwrite`` is False), is the database itself, or cannot
    be written (``DiskFull`` naming the target's directory).
    """
    started = time.monotonic()
    target = Path(target)
    if not target.is_absolute():
        raise ValueError(f"the backup path must be absolute, got {str(target)!r}")
    if target.is_dir():
        raise StoreError(f"cannot back up to {target}: it is a directory")
    if target.exists() and not overwrite:
        raise StoreError(f"{target} exists: give --force (Client.backup(..., overwrite=True)) to replace it")
    own = {source_path.resolve()} | {source_path.resolve().with_name(source_path.name + s) for s in ("-wal", "-shm")}
    if target.resolve() in own:
        raise StoreError(f"cannot back up the store onto its own file {target}")
    if not target.parent.is_dir():
        raise StoreError(f"cannot back up to {target}: directory {target.parent} does not exist")
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        os.close(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE))
        os.chmod(partial, PRIVATE_FILE)
        copy = sqlite3.connect(partial, isolation_level=None)
        try:
            source.backup(copy)  # every page in one step: one snapshot
            problems = [row[0] for row in copy.execute("PRAGMA quick_check(5)")]
            tasks = int(copy.execute("SELECT COUNT(*) FROM tasks").fetchone()[0])
            version = int(copy.execute("PRAGMA user_version").fetchone()[0])
        finally:
            copy.close()
        if problems != ["ok"]:
            raise StoreError(f"the backup failed PRAGMA quick_check: {'; '.join(problems)}")
        _fsync(partial)
        os.replace(partial, target)
        _fsync(target.parent)
    except sqlite3.Error as exc:
        raise classify(exc, target) from None
    except OSError as exc:
        if exc.errno == errno.ENOSPC:
            raise DiskFull(target, exc.strerror or "") from None
        raise StoreError(f"cannot write the backup {target}: {exc.strerror}") from None
    finally:
        for leftover in (partial, partial.with_name(partial.name + "-journal")):
            leftover.unlink(missing_ok=True)
    return {"path": str(target), "bytes": target.stat().st_size, "tasks": tasks, "schema_version": version,
            "seconds": round(time.monotonic() - started, 3)}


def backup_file(database: Path, target: Path | str, *, overwrite: bool = False) -> dict[str, Any]:
    """Back up the database file ``database`` with no system running (opened read-only)."""
    if not database.is_file():
        raise StoreError(f"no store at {database}")
    try:
        source = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open store {database}: {exc}") from None
    try:
        return backup(source, database, target, overwrite=overwrite)
    finally:
        source.close()


def restore_file(source: Path, database: Path) -> dict[str, Any]:
    """Put the backup ``source`` in place of ``database`` (no system running): the files there now
    (database, -wal, -shm) are kept aside as ``<name>.before-restore-<stamp>``, the backup copied
    and checked as ``backup`` does.  A copy that fails puts the files back."""
    if not source.is_file():
        raise StoreError(f"no backup at {source}")
    if source.resolve() == database.resolve():
        raise StoreError(f"{source} is the store itself: give a backup")
    stamp = time.strftime("%Y%m%dT%H%M%S")
    aside = [(database.with_name(database.name + suffix),
              database.with_name(f"{database.name}.before-restore-{stamp}{suffix}")) for suffix in ("", "-wal", "-shm")]
    moved = []
    for current, kept in aside:
        if current.exists():
            os.replace(current, kept)
            moved.append((current, kept))
    try:
        report = backup_file(source, database)
    except BaseException:
        for current, kept in moved:
            os.replace(kept, current)
        raise
    return {**report, "kept": [str(kept) for _, kept in moved]}


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
