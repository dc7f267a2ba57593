"""Checks of the database file: when it is opened, and before each write.

At open, a file that is not SQLite, fails ``PRAGMA quick_check``, belongs to
another program or to a newer Pegasus is refused, naming the file and the
check.  While open, the file's identity (device and inode) is compared with
what the path holds now: a database deleted or replaced under a running system
would otherwise take writes nobody sees again (finished tasks "unknown" after a restart, with no
warning).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from pegasus.store.errors import StoreCorrupt, StoreDamaged, StoreError, StoreReplaced, StoreUnavailable

SQLITE_HEADER = b"SQLite format 3\x00"


def check_header(path: Path) -> None:
    """A file that exists and is not empty must start with SQLite's header (an empty one becomes a database)."""
    try:
        with open(path, "rb") as file:
            head = file.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StoreError(f"cannot read store {path}: {exc.strerror}") from None
    if head and head != SQLITE_HEADER:
        raise StoreDamaged(path, "file header", f"not an SQLite database (it starts with {head!r})")


def verify_header(fd: int, path: Path) -> None:
    """StoreCorrupt when the open database (``fd``, the file SQLite has open) lost its header while in use:
    truncated, or written over.

    SQLite would go on from its page cache and its WAL, and its next checkpoint
    would write pages into the damaged file: the damage is found here, before a
    write, not after more is lost.  One read of 16 bytes per write transaction.
    """
    try:
        head = os.pread(fd, len(SQLITE_HEADER), 0)
    except OSError as exc:
        raise StoreUnavailable(path, f"cannot read store {path}: {exc.strerror}") from None
    if head != SQLITE_HEADER:
        raise StoreCorrupt(path, f"truncated to {os.fstat(fd).st_size} bytes" if len(head) < len(SQLITE_HEADER)
                           else f"its header was overwritten (it starts with {head[:8]!r})")


def check_contents(db: sqlite3.Connection, path: Path, known_version: int) -> int:
    """``PRAGMA quick_check``, then the schema version; answers the version.

    A database of version 0 that holds tables is another program's: Pegasus
    does not add its tables to it.
    """
    try:
        problems = [row[0] for row in db.execute("PRAGMA quick_check(5)").fetchall()]
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        tables = sorted(row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"))
    except sqlite3.DatabaseError as exc:
        raise StoreDamaged(path, "PRAGMA quick_check", str(exc)) from None
    if problems != ["ok"]:
        raise StoreDamaged(path, "PRAGMA quick_check", "; ".join(" ".join(p.split()) for p in problems))
    if version > known_version:
        raise StoreDamaged(path, "schema version", f"version {version}; this Pegasus knows {known_version} "
                                                    "(written by a newer Pegasus?)")
    if version == 0 and tables:
        raise StoreDamaged(path, "schema", f"an SQLite database of another program (tables {', '.join(tables)})")
    return version


def check_tables(db: sqlite3.Connection, path: Path, required: set[str]) -> None:
    """Every table the schema version promises is there."""
    present = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    missing = sorted(required - present)
    if missing:
        raise StoreDamaged(path, "schema", f"table(s) {', '.join(missing)} missing")


@dataclass(frozen=True)
class FileIdentity:
    """Which file a path named when it was opened (device and inode)."""

    device: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> FileIdentity:
        info = os.stat(path)
        return cls(info.st_dev, info.st_ino)

    def verify(self, path: Path) -> None:
        """StoreReplaced when ``path`` no longer names this file (deleted, or another file there)."""
        try:
            now = FileIdentity.of(path)
        except FileNotFoundError:
            raise StoreReplaced(path, deleted=True) from None
        if now != self:
            raise StoreReplaced(path, deleted=False)
