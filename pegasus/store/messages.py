"""Messages sent to a task (``pegasus message``): the store's half, a mixin of ``Store``.

Each is written, numbered per task, before the request is answered, and kept: those not yet in a
running task's checkpointed context are given to its run again after a restart; one that cannot be
read back is quarantined (``pegasus.store.quarantine``).  What a message does is Admission's.
"""

from __future__ import annotations

from typing import Any

from pegasus.store.quarantine import MAX_REASON, sift
from pegasus.store.checkpoint import rebuild
from pegasus.store.database import now_iso


class TaskMessages:
    """The ``task_messages`` table; mixed into ``Store`` (its ``transaction`` and ``_query``)."""

    transaction: Any
    _query: Any
    checkpoints: Any

    def add_message(self, task_id: str, text: str) -> int:
        """Write a message for the task; its number (1, 2, ... per task)."""
        with self.transaction() as db:
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM task_messages WHERE task_id = ? AND "
                                "typeof(seq) = 'integer'", (task_id,)).fetchone()  # a bad row numbers nothing
            db.execute("INSERT INTO task_messages (task_id, seq, text, created_at) VALUES (?, ?, ?, ?)",
                       (task_id, seq, text, now_iso()))
        return int(seq)

    def conversation(self, task_id: str) -> list[dict[str, Any]]:
        """The task's conversation (``TaskContext.messages``) as its last checkpoint holds it
        ([] when it cannot be read: a view never fails for it)."""
        try:
            return list(rebuild(task_id, self.checkpoints(task_id)).context.messages)
        except Exception:  # noqa: BLE001 - a checkpoint that will not rebuild: its task is quarantined, not its view
            return []

    def message_totals(self, task_id: str) -> tuple[int, int]:
        """How many messages the task was sent, and their UTF-8 bytes together."""
        rows = self._query("SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM task_messages "
                           "WHERE task_id = ?", (task_id,))
        count, size = rows[0]
        return int(count), int(size)

    def messages_after(self, task_id: str, seq: int, max_bytes: int | None = None) -> list[tuple[int, str]]:
        """The task's messages numbered above ``seq``, (number, text), in order.  A row that cannot be one
        (``message_of`` says why) is quarantined: marked with its error, left out now and at every later read."""
        rows = self._query("SELECT seq, typeof(text), CAST(text AS BLOB) FROM task_messages WHERE task_id = ? AND"
                           " seq > ? AND quarantined IS NULL ORDER BY seq", (task_id, seq))
        return list(sift(rows, lambda row: message_of(row, max_bytes),
                         lambda row, error: self.quarantine_message(task_id, row[0], error)))

    def quarantine_message(self, task_id: str, seq: Any, error: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE task_messages SET quarantined = ? WHERE task_id = ? AND seq IS ?",
                       (error[:MAX_REASON], task_id, seq))

    def quarantined_messages(self, task_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        """The quarantined messages (of one task, or of all), oldest first: task, number, error."""
        where, params = ("AND task_id = ?", (task_id,)) if task_id is not None else ("", ())
        rows = self._query(f"SELECT task_id, CAST(seq AS TEXT), quarantined FROM task_messages WHERE quarantined "
                           f"IS NOT NULL {where} ORDER BY rowid LIMIT ?", (*params, limit))
        return [{"task_id": str(t), "number": str(number), "error": str(error)} for t, number, error in rows]


def message_of(row: tuple[Any, ...], max_bytes: int | None) -> tuple[int, str]:
    """(number, text) of a ``task_messages`` row (seq, typeof(text), text as bytes); ValueError when it is not
    one this version could have written: a number that is not a positive integer, text that is not UTF-8 text,
    empty, or over ``[runtime] max_input_bytes``."""
    number, kind, raw = row
    if not isinstance(number, int) or isinstance(number, bool) or number < 1:
        raise ValueError(f"message number {number!r} is not a positive integer")
    if kind != "text" or not isinstance(raw, bytes):
        raise ValueError(f"message {number} is stored as {kind}, not text")
    text = raw.decode("utf-8")  # UnicodeDecodeError (a ValueError) names the bad byte
    if not text.strip():
        raise ValueError(f"message {number} is empty")
    if max_bytes is not None and len(raw) > max_bytes:
        raise ValueError(f"message {number} is {len(raw)} bytes, over [runtime] max_input_bytes = {max_bytes}")
    return number, text
