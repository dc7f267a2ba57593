"""The store's schedules and webhooks tables: functions over the supervisor's Store (its one writer).

A schedule row is its spec (JSON) and its state (cursor, buffered slot, counts, last task): written
in the same commit as the tasks its slots fire, so a crash leaves both or neither.  A webhook row
keeps its secret (the database file is 0600 in a 0700 directory, as every prompt in it is).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from pegasus.schedules import Overlap, ScheduleError, ScheduleSpec, ScheduleState
from pegasus.store.database import Database, now_iso

_SCHEDULE = "name, id, spec, paused, cursor, buffered, fired, skipped, last_task, created_at"


def add_schedule(store: Database, schedule_id: str, spec: ScheduleSpec, state: ScheduleState) -> None:
    """A new schedule; ScheduleError when one of that name exists."""
    with store.transaction() as db:
        if db.execute("SELECT 1 FROM schedules WHERE name = ?", (spec.name,)).fetchone():
            raise ScheduleError(f"a schedule named {spec.name!r} exists (remove it first)")
        db.execute(f"INSERT INTO schedules ({_SCHEDULE}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (spec.name, schedule_id, json.dumps(asdict(spec)), int(state.paused), state.cursor, state.buffered,
                    state.fired, state.skipped, state.last_task, now_iso()))


def schedules(store: Database) -> list[tuple[str, ScheduleSpec, ScheduleState, str]]:
    """Every schedule, by name: (id, spec, state, created_at)."""
    rows = store._query(f"SELECT {_SCHEDULE} FROM schedules ORDER BY name", ())
    out = []
    for name, schedule_id, spec, paused, cursor, buffered, fired, skipped, last_task, created_at in rows:
        fields: dict[str, Any] = json.loads(spec)
        fields["overlap"] = Overlap(fields["overlap"])
        out.append((schedule_id, ScheduleSpec(**fields),
                    ScheduleState(cursor, bool(paused), buffered, fired, skipped, last_task), created_at))
    return out


def save_schedule(store: Database, name: str, state: ScheduleState) -> None:
    with store.transaction() as db:
        db.execute("UPDATE schedules SET paused = ?, cursor = ?, buffered = ?, fired = ?, skipped = ?, last_task = ?"
                   " WHERE name = ?", (int(state.paused), state.cursor, state.buffered, state.fired, state.skipped,
                                       state.last_task, name))


def remove_schedule(store: Database, name: str) -> bool:
    with store.transaction() as db:
        return db.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount == 1


def add_webhook(store: Database, name: str, template: str, secret: bytes, secret_file: str | None) -> None:
    """A new webhook; ValueError when one of that name exists."""
    with store.transaction() as db:
        if db.execute("SELECT 1 FROM webhooks WHERE name = ?", (name,)).fetchone():
            raise ValueError(f"a webhook named {name!r} exists (remove it first)")
        db.execute("INSERT INTO webhooks (name, template, secret, secret_file, created_at) VALUES (?, ?, ?, ?, ?)",
                   (name, template, secret, secret_file, now_iso()))


def webhooks(store: Database) -> list[dict[str, Any]]:
    """Every webhook, by name, without its secret: name, text, secret_file, created_at."""
    rows = store._query("SELECT name, template, secret_file, created_at FROM webhooks ORDER BY name", ())
    return [dict(zip(("name", "text", "secret_file", "created_at"), row, strict=True)) for row in rows]


def webhook(store: Database, name: str) -> tuple[str, bytes] | None:
    """A webhook's template and secret (None: no such webhook)."""
    rows = store._query("SELECT template, secret FROM webhooks WHERE name = ?", (name,))
    return (rows[0][0], bytes(rows[0][1])) if rows else None


def remove_webhook(store: Database, name: str) -> bool:
    with store.transaction() as db:
        return db.execute("DELETE FROM webhooks WHERE name = ?", (name,)).rowcount == 1
