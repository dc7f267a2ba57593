"""The store's schema: its migrations, the tables they leave, and the columns Pegasus reads by name.

Each entry of MIGRATIONS migrates the schema from version i to i + 1.  Never edit
a shipped entry: append a new one.  Rows are read by naming their columns
(``TASK_COLUMNS``, ``JOURNAL_COLUMNS``), never by position: a migration that
rebuilds a table with its columns in another order reads the same.
"""

from __future__ import annotations

import re

from pegasus.store import search

MIGRATIONS: list[list[str]] = [
    [
        """CREATE TABLE tasks (
            task_id TEXT PRIMARY KEY, machine TEXT NOT NULL, lifecycle_state TEXT NOT NULL,
            cognitive_state TEXT NOT NULL, priority INTEGER NOT NULL, seq INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 1, runs INTEGER NOT NULL DEFAULT 0,
            gate_failures INTEGER NOT NULL DEFAULT 0, exit_reason TEXT, error TEXT,
            input TEXT NOT NULL, source TEXT NOT NULL, metadata BLOB, result BLOB,
            pending_resume BLOB, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)""",
        "CREATE INDEX tasks_by_state ON tasks (lifecycle_state)",
        """CREATE TABLE checkpoints (
            id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, run INTEGER NOT NULL,
            kind TEXT NOT NULL CHECK (kind IN ('full', 'delta')), state TEXT NOT NULL,
            data BLOB NOT NULL, created_at TEXT NOT NULL)""",
        "CREATE INDEX checkpoints_by_task ON checkpoints (task_id, id)",
        """CREATE TABLE transitions (
            id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL, machine TEXT NOT NULL,
            run INTEGER NOT NULL, from_state TEXT NOT NULL, to_state TEXT NOT NULL, event TEXT NOT NULL,
            detail BLOB, created_at TEXT NOT NULL)""",
        "CREATE INDEX transitions_by_task ON transitions (task_id, id)",
        """CREATE TABLE audit (
            audit_id TEXT PRIMARY KEY, task_id TEXT NOT NULL, level TEXT NOT NULL,
            event_type TEXT NOT NULL, payload TEXT NOT NULL, created_at TEXT NOT NULL)""",
        "CREATE INDEX audit_by_task ON audit (task_id, created_at)",
        """CREATE TABLE journal (
            key TEXT PRIMARY KEY, task_id TEXT NOT NULL, run INTEGER NOT NULL, step_index INTEGER NOT NULL,
            tool TEXT, effect TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('started', 'finished')),
            result BLOB, started_at TEXT NOT NULL, finished_at TEXT)""",
        "CREATE INDEX journal_by_task ON journal (task_id)",
    ],
    [
        # Idempotency keys (pegasus.idempotency): the task a key's first request created, for good.
        """CREATE TABLE idempotency (
            scope TEXT NOT NULL, key TEXT NOT NULL, task_id TEXT NOT NULL, fingerprint TEXT NOT NULL,
            created_at TEXT NOT NULL, PRIMARY KEY (scope, key))""",
        # Small facts about the store itself (the supervisor's write probe after a failed write).
        "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    ],
    [  # 3: a journal status for a step that started and whose outcome is unknown
        """CREATE TABLE journal_v2 (
            key TEXT PRIMARY KEY, task_id TEXT NOT NULL, run INTEGER NOT NULL, step_index INTEGER NOT NULL,
            tool TEXT, effect TEXT NOT NULL,
            status TEXT NOT NULL CHECK (status IN ('started', 'finished', 'interrupted')),
            result BLOB, started_at TEXT NOT NULL, finished_at TEXT)""",
        "INSERT INTO journal_v2 SELECT * FROM journal",
        "DROP TABLE journal",
        "ALTER TABLE journal_v2 RENAME TO journal",
        "CREATE INDEX journal_by_task ON journal (task_id)",
    ],
    [  # 4: the model usage and cost of every task so far, per model and tier (``pegasus stats``)
        """CREATE TABLE usage_totals (
            model TEXT NOT NULL, tier TEXT NOT NULL, calls INTEGER NOT NULL, prompt_tokens INTEGER NOT NULL,
            cached_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, total_tokens INTEGER NOT NULL,
            cost_usd REAL, unpriced_calls INTEGER NOT NULL, PRIMARY KEY (model, tier))""",
    ],
    [  # schedules and webhooks (pegasus.triggers.schedules, pegasus.triggers.webhooks; pegasus/store/triggers.py)
        """CREATE TABLE schedules (
            name TEXT PRIMARY KEY, id TEXT NOT NULL, spec TEXT NOT NULL, paused INTEGER NOT NULL,
            cursor REAL NOT NULL, buffered REAL, fired INTEGER NOT NULL, skipped INTEGER NOT NULL,
            last_task TEXT, created_at TEXT NOT NULL)""",
        # The secret stays here, in the store's 0600 file: an HMAC is checked with the secret itself.
        """CREATE TABLE webhooks (
            name TEXT PRIMARY KEY, template TEXT NOT NULL, secret BLOB NOT NULL, secret_file TEXT,
            created_at TEXT NOT NULL)""",
    ],
    [  # the HTTP gateway's bearer tokens (pegasus.store.tokens), only their SHA-256 kept
        """CREATE TABLE api_tokens (
            name TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, scope TEXT NOT NULL,
            created_at TEXT NOT NULL, revoked_at TEXT)""",
    ],
    [  # the task tree: each sub-task's parent, its depth, and the parent's plan step it answers
        """CREATE TABLE subtasks (
            child_id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, depth INTEGER NOT NULL,
            step_key TEXT NOT NULL UNIQUE, step_index INTEGER NOT NULL, created_at TEXT NOT NULL)""",
        "CREATE INDEX subtasks_by_parent ON subtasks (parent_id)",
    ],
    [  # memory: versioned facts, episodes, the archive of done tasks, one FTS5 index over them
        # content NULL: a forgotten path's tombstone (keeps its versions from being reused); current: the latest.
        """CREATE TABLE memory_facts (
            path TEXT NOT NULL, version INTEGER NOT NULL, content TEXT, bytes INTEGER NOT NULL,
            current INTEGER NOT NULL, task_id TEXT, created_at TEXT NOT NULL, fts_rowid INTEGER, vector BLOB,
            PRIMARY KEY (path, version))""",
        "CREATE INDEX memory_facts_current ON memory_facts (current, path)",
        "CREATE TABLE memory_append_keys (key TEXT PRIMARY KEY, path TEXT NOT NULL, version INTEGER NOT NULL)",
        """CREATE TABLE memory_episodes (
            episode_id INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT UNIQUE, title TEXT NOT NULL,
            summary TEXT NOT NULL, details TEXT NOT NULL, lesson TEXT NOT NULL, created_at TEXT NOT NULL,
            fts_rowid INTEGER, vector BLOB)""",
        """CREATE TABLE memory_archive (
            seq INTEGER PRIMARY KEY AUTOINCREMENT, task_id TEXT NOT NULL UNIQUE, input TEXT NOT NULL,
            result BLOB, context BLOB NOT NULL, created_at TEXT NOT NULL, fts_rowid INTEGER)""",
        # Full text (FTS5, BM25): facts and episodes in one index, archived tasks in their own; each with its
        # terms' document counts (fts5vocab), read to leave out words too common to rank by.
        """CREATE VIRTUAL TABLE memory_fts USING fts5(
            title, body, kind UNINDEXED, ref UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')""",
        "CREATE VIRTUAL TABLE memory_fts_terms USING fts5vocab(memory_fts, 'row')",
        """CREATE VIRTUAL TABLE memory_archive_fts USING fts5(
            title, body, kind UNINDEXED, ref UNINDEXED, tokenize = 'unicode61 remove_diacritics 2')""",
        "CREATE VIRTUAL TABLE memory_archive_terms USING fts5vocab(memory_archive_fts, 'row')",
    ],
    [  # the post-task reflector's durable marker, one row per done task (pegasus/store/reflections.py)
        """CREATE TABLE post_reflections (
            task_id TEXT PRIMARY KEY,
            status TEXT NOT NULL CHECK (status IN ('running', 'complete', 'failed', 'skipped')),
            attempts INTEGER NOT NULL DEFAULT 0, reflection BLOB, error TEXT, updated_at TEXT NOT NULL)""",
        # Tasks done before the reflector existed are not reflected after an upgrade.
        "INSERT INTO post_reflections (task_id, status, updated_at)"
        " SELECT task_id, 'skipped', updated_at FROM tasks WHERE lifecycle_state = 'done'",
    ],
    [  # messages sent to a task (``pegasus message``), numbered per task, kept for good
        """CREATE TABLE task_messages (
            task_id TEXT NOT NULL, seq INTEGER NOT NULL, text TEXT NOT NULL, created_at TEXT NOT NULL,
            PRIMARY KEY (task_id, seq))""",
    ],
    [  # a schedule the supervisor could not follow is quarantined with its error, not retried
        "ALTER TABLE schedules ADD COLUMN quarantined TEXT",
    ],
    [  # 12: a message no handler can read is quarantined with its error, not read again
        "ALTER TABLE task_messages ADD COLUMN quarantined TEXT",
    ],
    # 13: tasks found by the words of their input and result, and by metadata (pegasus.store.search),
    # filled for the tasks already stored
    [*search.MIGRATION],
    [  # 14: a webhook's event filter: GitHub event names, comma-separated; NULL takes every event
        "ALTER TABLE webhooks ADD COLUMN events TEXT",
    ],
    [  # 15: calls whose usage the server did not report (estimated): stats says so, and its cost is unknown
        "ALTER TABLE usage_totals ADD COLUMN estimated_calls INTEGER NOT NULL DEFAULT 0",
    ],
    [  # 16 (i29-recall, memory vectors' model): the embeddings model that made each vector; a vector of another
        # model (or of an unknown one: made before this) counts as missing, so the background job re-embeds it
        "ALTER TABLE memory_facts ADD COLUMN vector_model TEXT",
        "ALTER TABLE memory_episodes ADD COLUMN vector_model TEXT",
    ],
    [  # 17 (i33-super2): a new episode's repeat check (same title, summary, details, lesson) by index: it read the
        # whole table at every done task's reflection, in the supervisor (0.27 ms of CPU more at 5,000 episodes)
        "CREATE INDEX memory_episodes_by_title ON memory_episodes (title)",
    ],
]
SCHEMA_VERSION = len(MIGRATIONS)


def _tables_after(migrations: list[list[str]]) -> set[str]:
    """The tables a store has once every migration ran (created, less dropped, renamed followed)."""
    tables: set[str] = set()
    for statement in (statement for step in migrations for statement in step):
        tables.update(re.findall(r"CREATE TABLE (\w+)", statement))
        tables.difference_update(re.findall(r"DROP TABLE (\w+)", statement))
        for old_name, new_name in re.findall(r"ALTER TABLE (\w+) RENAME TO (\w+)", statement):
            tables.discard(old_name)
            tables.add(new_name)
    return tables


TABLES = _tables_after(MIGRATIONS)


TASK_COLUMNS = ("task_id", "machine", "lifecycle_state", "cognitive_state", "priority", "seq", "attempts", "runs",
                "gate_failures", "exit_reason", "error", "input", "source", "metadata", "result", "pending_resume",
                "created_at", "updated_at")
JOURNAL_COLUMNS = ("key", "task_id", "run", "step_index", "tool", "effect", "status", "result", "started_at",
                   "finished_at")
