"""The store's errors, and how a failure of SQLite becomes one of them.

Every error names the database file.  ``StoreUnavailable`` and its kinds say
the store cannot take writes now (the disk is full, the file was deleted,
replaced or damaged under the running system, an I/O error): whoever writes must stop applying changes until a
write works again.  ``StoreDamaged`` is found when the file is opened and names
the check that failed.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from pegasus.errors import PegasusError


class StoreError(PegasusError):
    """The store cannot be opened or used (names the file and the reason)."""


class StaleStateError(StoreError):
    """Compare-and-set lost: the task is no longer in the state the writer expected."""

    def __init__(self, task_id: str, expected: str, actual: str | None) -> None:
        self.task_id, self.expected, self.actual = task_id, expected, actual
        super().__init__(f"task {task_id}: expected state {expected!r}, store has {actual!r}")


class StoreDamaged(StoreError):
    """The file is not a Pegasus database, or fails a check (``check`` names it)."""

    def __init__(self, path: Path, check: str, problem: str) -> None:
        self.path, self.check = path, check
        super().__init__(f"store {path} failed the check {check}: {problem}")


class StoreUnavailable(StoreError):
    """The store cannot be written now; nothing more may be applied until it can."""

    def __init__(self, path: Path, message: str) -> None:
        self.path = path
        super().__init__(message)


class DiskFull(StoreUnavailable):
    """No space left where the database lives."""

    def __init__(self, path: Path, detail: str = "") -> None:
        super().__init__(path, f"disk full: {path.parent}" + (f" ({path.name}: {detail})" if detail else ""))


class StoreReplaced(StoreUnavailable):
    """The open database file was deleted or replaced by another file while in use.

    Writes would go to a file nobody will open again, so none are made.  The
    open connection still reads the old file: a backup saves what it holds.
    """

    def __init__(self, path: Path, deleted: bool) -> None:
        what = "was deleted" if deleted else "was replaced by another file"
        self.action = ("save what the system still holds with `pegasus backup PATH`, then stop it, "
                       f"put the database back at {path} and start it again")
        super().__init__(path, f"store {path} {what} while the system ran: no work is accepted. "
                               f"{self.action[0].upper()}{self.action[1:]}")


class StoreCorrupt(StoreUnavailable):
    """The open database is damaged (truncated, overwritten, its tables gone): it cannot resume by itself."""

    def __init__(self, path: Path, detail: str) -> None:
        self.action = ("restore a backup (`pegasus backup` made it): `pegasus stop`; `pegasus restore BACKUP` "
                       f"(it keeps the damaged {path.name} aside); `pegasus start`")
        super().__init__(path, f"store {path} is damaged ({detail}): it cannot resume by itself; "
                               f"no work is accepted. To go on, {self.action}")


# SQLite's primary result codes that mean "the file cannot be used now", not "this statement is wrong".
_UNAVAILABLE = {sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_PROTOCOL}
_DAMAGED = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}


def classify(exc: sqlite3.Error, path: Path) -> StoreError:
    """The store error an SQLite failure on ``path`` is (the caller raises it)."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    if primary == sqlite3.SQLITE_FULL or "database or disk is full" in str(exc):
        return DiskFull(path, str(exc))
    if primary in _DAMAGED:
        return StoreCorrupt(path, str(exc))
    if "no such table" in str(exc):  # an open store's tables gone: the file was emptied or overwritten
        return StoreCorrupt(path, f"its schema is gone: {exc}")
    if primary in _UNAVAILABLE:
        return StoreUnavailable(path, f"store {path} cannot be written: {exc}")
    return StoreError(f"store {path}: {exc}")
