"""Messages sent to a task (``pegasus message``): the store's half, a mixin of ``Store``.

Each message is written, numbered per task, before the request is answered, and
kept for good: a running task's messages not yet in its checkpointed context
(``TaskContext.messages_taken`` says how far it got) are given to its run again
after a restart.  What a message does to the task is Admission's
(``pegasus.admission.messages``), not this module's.
"""

from __future__ import annotations

from typing import Any

from pegasus.errors import CodecError
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
            (seq,) = db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM task_messages WHERE task_id = ?",
                                (task_id,)).fetchone()
            db.execute("INSERT INTO task_messages (task_id, seq, text, created_at) VALUES (?, ?, ?, ?)",
                       (task_id, seq, text, now_iso()))
        return int(seq)

    def conversation(self, task_id: str) -> list[dict[str, Any]]:
        """The task's conversation (``TaskContext.messages``) as its last checkpoint holds it
        ([] when it cannot be read: a view never fails for it)."""
        try:
            return list(rebuild(task_id, self.checkpoints(task_id)).context.messages)
        except CodecError:
            return []

    def message_totals(self, task_id: str) -> tuple[int, int]:
        """How many messages the task was sent, and their UTF-8 bytes together."""
        rows = self._query("SELECT COUNT(*), COALESCE(SUM(LENGTH(CAST(text AS BLOB))), 0) FROM task_messages "
                           "WHERE task_id = ?", (task_id,))
        count, size = rows[0]
        return int(count), int(size)

    def messages_after(self, task_id: str, seq: int) -> list[tuple[int, str]]:
        """The task's messages numbered above ``seq``, (number, text), in order."""
        rows = self._query("SELECT seq, text FROM task_messages WHERE task_id = ? AND seq > ? ORDER BY seq",
                           (task_id, seq))
        return [(int(number), str(text)) for number, text in rows]
