"""The database file under the store: opened checked (``integrity``), migrated (``schema``), and written in
transactions that never stay open (``transaction``, ``group``).  ``Store`` builds its tables on it."""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from pegasus.files import PRIVATE_FILE, open_private, private_dir
from pegasus.store import backup as backups, integrity, search
from pegasus.store.errors import StoreCorrupt, StoreDamaged, StoreError, StoreUnavailable, classify
from pegasus.store.pending import PendingWrites
from pegasus.store.schema import MIGRATIONS, SCHEMA_VERSION, TABLES


TIGHT_WAL_PAGES = 64  # the WAL's checkpoint threshold once its disk was found full (SQLite's default: 1000)


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


class Database:
    """A connection to the database file: opened checked, migrated, with transactions that never stay open.

    Opening checks the file (``integrity``) and names the file and the check
    that failed.  Every failed write is rolled back whole and raised as a
    ``StoreError`` naming the file; ``StoreUnavailable`` (disk full, the file
    deleted or replaced) means no write can be made now.
    """

    def __init__(self, path: Path | str, *, timeout_s: float = 10.0) -> None:
        self.path = Path(path)
        self._depth = 0  # open group() / savepoint nesting
        self.pending = PendingWrites()  # a task's transition rows, written just before their commit
        self.identity: integrity.FileIdentity | None = None  # the file opened (set once it is checked)
        self._header_fd: int | None = None
        try:
            private_dir(self.path.parent)
        except OSError as exc:
            raise StoreError(f"cannot create {self.path.parent}: {exc.strerror}") from None
        integrity.check_header(self.path)
        try:
            # Created 0600 before SQLite opens it: SQLite gives its -wal and -shm the database's mode.
            os.close(open_private(self.path, os.O_RDWR))
            self.db = sqlite3.connect(self.path, timeout=timeout_s, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open store {self.path}: {exc}") from None
        except OSError as exc:
            raise StoreError(f"cannot open store {self.path}: {exc.strerror or exc}") from None
        try:
            version = integrity.check_contents(self.db, self.path, SCHEMA_VERSION)
            self.db.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a committed transaction survives a crash of any
            # process; only a power loss may drop the last few (documented).
            self.db.execute("PRAGMA synchronous=NORMAL")
            self.db.execute("PRAGMA foreign_keys=ON")
            search.register(self.db)  # the functions its migration reads packed columns with
            self._migrate(version)
            integrity.check_tables(self.db, self.path, TABLES)
            self.identity = integrity.FileIdentity.of(self.path)
            self._header_fd = os.open(self.path, os.O_RDONLY)  # the file opened, read before each write
            for companion in (f"{self.path}-wal", f"{self.path}-shm"):  # left wide by an older Pegasus
                if os.path.exists(companion):
                    os.chmod(companion, PRIVATE_FILE)
        except sqlite3.Error as exc:
            self.db.close()
            raise StoreError(f"cannot open store {self.path}: {classify(exc, self.path)}") from None
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()
        if self._header_fd is not None:
            os.close(self._header_fd)
            self._header_fd = None

    # -- schema ----------------------------------------------------------------------------
    def _migrate(self, version: int) -> None:
        for target in range(version, SCHEMA_VERSION):
            with self.transaction():
                for statement in MIGRATIONS[target]:
                    self.db.execute(statement)
                self.db.execute(f"PRAGMA user_version = {target + 1}")

    def schema_version(self) -> int:
        return int(self.db.execute("PRAGMA user_version").fetchone()[0])

    # -- transactions ------------------------------------------------------------------------
    def _begin(self) -> None:
        """BEGIN IMMEDIATE on the file this store opened (StoreReplaced if the path names another now,
        StoreCorrupt if that file lost its header)."""
        if self.identity is not None:
            self.identity.verify(self.path)
        if self._header_fd is not None:
            integrity.verify_header(self._header_fd, self.path)
        try:
            self.db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise classify(exc, self.path) from None

    def _end(self, commit: bool) -> None:
        """COMMIT what waits and what was written (or ROLLBACK); a failed one is rolled back: no
        transaction stays open."""
        try:
            if self.db.in_transaction:
                if commit:
                    self.flush()
                self.db.execute("COMMIT" if commit else "ROLLBACK")
        except sqlite3.Error as exc:
            self._rollback()
            raise classify(exc, self.path) from None
        except BaseException:  # whatever stopped the flush: the transaction still ends
            self._rollback()
            raise
        finally:
            self.pending.reset()

    def _rollback(self) -> None:
        with suppress(sqlite3.Error):  # nothing more to do if even that fails
            if self.db.in_transaction:
                self.db.execute("ROLLBACK")

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error): one writer at a time.

        Inside ``group()`` it is a savepoint instead: still all-or-nothing on its
        own, committed with the group.  What waits (``pending``) is written first.
        """
        if self._depth:
            self._flush_classified()
            self.pending.lifecycle.clear()  # a write of its own may move a task: compared in the file again
            savepoint = f"write{self._depth}"
            self._depth += 1
            self.db.execute(f"SAVEPOINT {savepoint}")
            try:
                yield self.db
            except sqlite3.Error as exc:
                self._undo(savepoint)
                raise classify(exc, self.path) from None
            except BaseException:
                self._undo(savepoint)
                raise
            finally:
                self._depth -= 1
                if self.db.in_transaction:
                    self.db.execute(f"RELEASE {savepoint}")
            return
        self._begin()
        try:
            yield self.db
        except sqlite3.Error as exc:
            self._end(commit=False)
            raise classify(exc, self.path) from None
        except BaseException:
            self._end(commit=False)
            raise
        self._end(commit=True)

    @contextmanager
    def apart(self) -> Iterator[sqlite3.Connection]:
        """``transaction`` for writes to tables the waiting rows never go to (memory's), and to those only
        through ``pending``: in a group, the rows waiting before it keep waiting (not written mid-group, the
        lifecycle states known in it kept) and its own wait after them; it fails alone, as a savepoint."""
        if not self._depth:
            with self.transaction() as db:
                yield db
            return
        waiting, self.pending = self.pending, PendingWrites()
        try:
            with self.transaction() as db:  # flushes nothing: nothing waits in its own rows yet
                yield db
                own, self.pending = self.pending, waiting
        except BaseException:
            self.pending = waiting  # its own rows gone with its savepoint
            raise
        waiting.extend(own)

    def _undo(self, savepoint: str) -> None:
        self.pending.reset()  # what the failed write left waiting goes with it (nothing waited before it)
        if self.db.in_transaction:  # SQLite may have rolled the whole transaction back itself (disk full)
            self.db.execute(f"ROLLBACK TO {savepoint}")

    @contextmanager
    def deferred(self) -> Iterator[PendingWrites]:
        """A write whose rows wait in ``pending`` (``pegasus.store.pending``): in a group, for its commit,
        with no savepoint (the write makes at most one statement now, atomic on its own, and adds its rows
        only once nothing can fail); else in a transaction of its own."""
        if self._depth:
            try:
                yield self.pending
            except sqlite3.Error as exc:  # its one statement failed, alone (a full disk: StoreUnavailable)
                raise classify(exc, self.path) from None
            return
        with self.transaction():
            yield self.pending

    def flush(self) -> None:
        """Write what waits in ``pending`` (inside the open transaction)."""
        if self.pending:
            self.pending.flush(self.db)

    def _flush_classified(self) -> None:
        """``flush`` before another statement of the open group; a failure raised as the store's error (one
        that leaves the store writable loses the rows that waited, as a failed write loses its own)."""
        try:
            self.flush()
        except sqlite3.Error as exc:
            raise classify(exc, self.path) from None

    @contextmanager
    def group(self) -> Iterator[None]:
        """Several writes, one commit.

        Each write inside stays atomic on its own (a failed one is rolled back alone) and what succeeded is
        committed when the block ends, even if it raises: what separate transactions would leave, for one
        WAL append instead of one per write.  Durable only when the block ends: nothing that promises
        durability (a journal entry's answer) may be sent inside it.  When the store becomes unavailable
        (``StoreUnavailable``) the whole group is rolled back: the writer re-reads the store anyway.
        """
        if self._depth:
            yield
            return
        self.hold()
        commit = True
        try:
            yield
        except StoreUnavailable:
            commit = False
            raise
        finally:
            self.release(commit)

    def hold(self) -> None:
        """``group()`` opened for longer than a block: every write until ``release`` shares its commit
        (the supervisor's reports of one mailbox drain).  The same rules: nothing that promises
        durability may be sent before ``release`` commits."""
        if self._depth:
            raise StoreError(f"store {self.path}: a group is already open")
        self._begin()
        self._depth = 1

    def release(self, commit: bool = True) -> None:
        """End what ``hold`` opened: COMMIT (ROLLBACK when not ``commit``); nothing open: nothing to do."""
        if self._depth:
            self._depth = 0
            self._end(commit)

    @property
    def holding(self) -> bool:
        """Whether a group is open (its writes are not committed yet)."""
        return self._depth > 0

    def probe(self) -> None:
        """One small write: StoreUnavailable while the store still cannot take writes."""
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO meta (name, value) VALUES ('probe', ?)", (now_iso(),))

    def truncate_wal(self) -> int:
        """Checkpoint the WAL into the database and truncate it: its space back to the disk (a full one).
        Answers the bytes the WAL gave back; StoreError when it could not be folded in whole.

        From then on the WAL is kept small (``TIGHT_WAL_PAGES``): left at SQLite's 1000 pages before a
        checkpoint, it takes back whatever was freed on a small disk."""
        wal = Path(f"{self.path}-wal")
        before = wal.stat().st_size if wal.exists() else 0
        try:
            self.db.execute(f"PRAGMA wal_autocheckpoint = {TIGHT_WAL_PAGES}")
            self.db.execute(f"PRAGMA journal_size_limit = {TIGHT_WAL_PAGES * 4096}")
            busy, _, _ = self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.Error as exc:
            raise classify(exc, self.path) from None
        if busy:
            raise StoreError(f"store {self.path}: the WAL could not be checkpointed (busy)")
        return before - (wal.stat().st_size if wal.exists() else 0)

    def damage(self) -> StoreCorrupt | None:
        """What is wrong with the open file, if it is damaged: our tables, then SQLite's ``quick_check``."""
        try:
            integrity.check_tables(self.db, self.path, TABLES)
            problems = [row[0] for row in self.db.execute("PRAGMA quick_check(5)").fetchall()]
        except StoreDamaged as exc:
            return StoreCorrupt(self.path, str(exc).rsplit(": ", 1)[-1])
        except sqlite3.Error as exc:  # an I/O error is not damage: only what SQLite calls corrupt is
            found = classify(exc, self.path)
            return found if isinstance(found, StoreCorrupt) else None
        if problems != ["ok"]:
            return StoreCorrupt(self.path, "PRAGMA quick_check: " + "; ".join(" ".join(p.split()) for p in problems))
        return None

    def backup(self, target: Path | str, *, overwrite: bool = False) -> dict[str, Any]:
        """A consistent copy of the database at ``target`` (``pegasus.store.backup``)."""
        return backups.backup(self.db, self.path, target, overwrite=overwrite)

    def _query(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        self._flush_classified()  # a read inside an open group sees its writes
        for attempt in range(3):
            try:
                return self.db.execute(sql, params).fetchall()
            except sqlite3.Error as exc:  # locked by a writer: wait briefly
                if "locked" not in str(exc) or attempt == 2:
                    raise classify(exc, self.path) from None
                time.sleep(0.05)
        return []
