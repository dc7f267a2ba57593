"""The store's schedules and webhooks tables: functions over the supervisor's Store (its one writer).

A schedule row is its spec (JSON) and its state (cursor, buffered slot, counts, last task): written
in the same commit as the tasks its slots fire, so a crash leaves both or neither.  A webhook row
keeps its secret (the database file is 0600 in a 0700 directory, as every prompt in it is).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from pegasus.store.quarantine import reason, sift
from pegasus.triggers.schedules import Overlap, ScheduleError, ScheduleSpec, ScheduleState
from pegasus.store.database import Database, now_iso
from pegasus.triggers.webhooks import check_events

_SCHEDULE = "name, id, spec, paused, cursor, buffered, fired, skipped, last_task, created_at"
MAX_ERROR = 1000  # a quarantined schedule's error is kept this long


@dataclass(frozen=True)
class ScheduleRow:
    """A stored schedule.  ``quarantined``: why it is set aside (then ``spec``/``state`` are None when the row
    could not even be read); a quarantined schedule fires nothing until removed."""

    schedule_id: str
    name: str
    spec: ScheduleSpec | None
    state: ScheduleState | None
    created_at: str
    quarantined: str | None = None
    marked: bool = True  # False: found unreadable now, not yet marked quarantined in the store


def add_schedule(store: Database, schedule_id: str, spec: ScheduleSpec, state: ScheduleState) -> None:
    """A new schedule; ScheduleError when one of that name exists."""
    with store.transaction() as db:
        if db.execute("SELECT 1 FROM schedules WHERE name = ?", (spec.name,)).fetchone():
            raise ScheduleError(f"a schedule named {spec.name!r} exists (remove it first)")
        db.execute(f"INSERT INTO schedules ({_SCHEDULE}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   (spec.name, schedule_id, json.dumps(asdict(spec)), int(state.paused), state.cursor, state.buffered,
                    state.fired, state.skipped, state.last_task, now_iso()))


def schedules(store: Database) -> list[ScheduleRow]:
    """Every schedule, by name; one that cannot be read comes back quarantined with what is wrong (its row is
    not changed here: the supervisor marks it)."""
    rows = store._query(f"SELECT {_SCHEDULE}, quarantined FROM schedules ORDER BY name", ())
    out = []
    for name, schedule_id, spec, paused, cursor, buffered, fired, skipped, last_task, created_at, error in rows:
        try:
            fields: dict[str, Any] = json.loads(spec)
            fields["overlap"] = Overlap(fields["overlap"])
            read = ScheduleSpec(**fields)
            state = ScheduleState(cursor, bool(paused), buffered, fired, skipped, last_task)
        except Exception as exc:  # noqa: BLE001 - written by an old version or a bug: set aside, not raised
            out.append(ScheduleRow(str(schedule_id), str(name), None, None, str(created_at),
                                   error or f"unreadable: {type(exc).__name__}: {exc}"[:MAX_ERROR], error is not None))
            continue
        out.append(ScheduleRow(schedule_id, name, read, state, created_at, error))
    return out


def quarantine_schedule(store: Database, name: str, error: str) -> None:
    """Set the schedule aside with ``error`` (shown by list, stats and the dashboard; kept until removed)."""
    with store.transaction() as db:
        db.execute("UPDATE schedules SET quarantined = ? WHERE name = ?", (error[:MAX_ERROR], name))


def save_schedule(store: Database, name: str, state: ScheduleState) -> None:
    with store.transaction() as db:
        db.execute("UPDATE schedules SET paused = ?, cursor = ?, buffered = ?, fired = ?, skipped = ?, last_task = ?"
                   " WHERE name = ?", (int(state.paused), state.cursor, state.buffered, state.fired, state.skipped,
                                       state.last_task, name))


def remove_schedule(store: Database, name: str) -> bool:
    with store.transaction() as db:
        return db.execute("DELETE FROM schedules WHERE name = ?", (name,)).rowcount == 1


def add_webhook(store: Database, name: str, template: str, secret: bytes, secret_file: str | None,
                events: list[str] | None = None) -> None:
    """A new webhook (``events``: the GitHub events it takes; none: every one); ValueError when one of that
    name exists."""
    with store.transaction() as db:
        if db.execute("SELECT 1 FROM webhooks WHERE name = ?", (name,)).fetchone():
            raise ValueError(f"a webhook named {name!r} exists (remove it first)")
        db.execute("INSERT INTO webhooks (name, template, secret, secret_file, created_at, events)"
                   " VALUES (?, ?, ?, ?, ?, ?)", (name, template, secret, secret_file, now_iso(),
                                                  ",".join(events) if events else None))


_WEBHOOK = ("CAST(name AS BLOB), CAST(template AS BLOB), CAST(secret AS BLOB), CAST(secret_file AS BLOB),"
            " created_at, CAST(events AS BLOB)")


def webhooks(store: Database) -> list[dict[str, Any]]:
    """Every webhook, by name, without its secret: name, text, secret_file, created_at, quarantined (None, or
    why a row an old version or a bug wrote cannot be delivered to: shown, never raised -- pegasus.store.quarantine)."""
    rows = store._query(f"SELECT {_WEBHOOK} FROM webhooks ORDER BY name", ())
    views: list[dict[str, Any]] = []

    def set_aside(row: tuple[Any, ...], error: str) -> None:
        name = bytes(row[0]).decode("utf-8", "replace") if isinstance(row[0], bytes) else str(row[0])
        views.append({"name": name, "text": None, "secret_file": None, "created_at": str(row[4]),
                      "events": [], "quarantined": error})

    for view in sift(rows, _webhook_of, set_aside):
        views.append(view)
    return views


def webhook(store: Database, name: str) -> tuple[str, bytes, list[str]] | None:
    """A webhook's template, secret and event filter (None: no such webhook); ValueError (``quarantined:
    ...``) for a row that cannot be one."""
    rows = store._query(f"SELECT {_WEBHOOK} FROM webhooks WHERE name = ?", (name,))
    if not rows:
        return None
    try:
        view = _webhook_of(rows[0])
        return view["text"], bytes(rows[0][2]), view["events"]
    except Exception as exc:  # noqa: BLE001 - this webhook is refused, the supervisor goes on
        raise ValueError(reason(exc)) from None


def _webhook_of(row: tuple[Any, ...]) -> dict[str, Any]:
    name, template, secret, secret_file, created_at, events = row
    if not isinstance(secret, bytes) or not secret:
        raise ValueError("its secret is empty")
    return {"name": _text(name), "text": _text(template), "created_at": str(created_at), "quarantined": None,
            "secret_file": None if secret_file is None else _text(secret_file),
            "events": [] if events is None else check_events(_text(events).split(","))}


def _text(raw: Any) -> str:
    if not isinstance(raw, bytes):
        raise ValueError(f"a text column is stored as {type(raw).__name__}")
    return raw.decode("utf-8")


def remove_webhook(store: Database, name: str) -> bool:
    with store.transaction() as db:
        return db.execute("DELETE FROM webhooks WHERE name = ?", (name,)).rowcount == 1
