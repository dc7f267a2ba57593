"""Bounds of every client request (issue 28), as properties: any number in any numeric field is either refused
where the request is built (``InvalidRequest`` naming the field) and again by the supervisor's ``revalidate``,
or accepted and then safe to use: an SQLite integer, a finite float.  No actor system."""

from __future__ import annotations

import math
import sqlite3
import typing
from typing import Any

import pytest
from hypothesis import example, given, strategies as st

from actors import messages as m
from pegasus.errors import InvalidRequest
from pegasus.metadata import INT64_MAX

# The least each request needs besides the field under test.
REQUIRED: dict[str, dict[str, Any]] = {
    "Approve": {"task_id": "t"}, "Backup": {"path": "/tmp/x.db"}, "Cancel": {"task_id": "t"},
    "DeliverWebhook": {"name": "w", "body": b"{}"}, "Get": {"task_id": "t"}, "History": {"task_id": "t"},
    "MemoryForget": {"item_id": "i"}, "MemorySearch": {"text": "x"}, "MemoryShow": {"item_id": "i"},
    "MemoryWrite": {"path": "a", "content": "c"}, "Resume": {"task_id": "t"}, "Retry": {"task_id": "t"},
    "ScheduleAdd": {"name": "s", "text": "x", "every": "1h"}, "SchedulePause": {"name": "s"},
    "ScheduleResume": {"name": "s"}, "ScheduleTrigger": {"name": "s"}, "ScheduleRemove": {"name": "s"},
    "SendMessage": {"task_id": "t", "text": "x"}, "Submit": {"text": "x"}, "Suspend": {"task_id": "t"},
    "SubmitMany": {"tasks": [m.Submit(text="x")]}, "TaskContextRequest": {"task_id": "t"},
    "TokenCreate": {"name": "n", "token_hash": "a" * 64}, "TokenRevoke": {"name": "n"}, "Tree": {"task_id": "t"},
    "WebhookAdd": {"name": "w", "text": "x"}, "WebhookRemove": {"name": "w"},
    "DeleteTask": {"task_id": "t"}, "TaskLog": {"task_id": "t"}, "Purge": {"older_than_days": 1.0},
}


def _requests() -> list[type[m.Request]]:
    import pegasus.requests as declared
    for name in dir(declared):  # every request module loaded: they are imported on first use (PEP 562)
        getattr(declared, name)
    found: list[type[m.Request]] = []
    todo = [m.Request]
    while todo:
        for sub in todo.pop().__subclasses__():
            found.append(sub)
            todo.append(sub)
    return sorted(set(found) - {m.Configure}, key=lambda cls: cls.__name__)  # Configure: Settings (test_config)


def _kind(annotation: Any) -> str | None:
    """"int", "float" or "floats" (a list of them) for a numeric field, else None."""
    args = set(typing.get_args(annotation)) or {annotation}
    if int in args:
        return "int"
    if float in args:
        return "float"
    if any(typing.get_args(arg) == (float,) for arg in args):
        return "floats"
    return None


FIELDS = [(cls, name, kind) for cls in _requests() for name, info in cls.model_fields.items()
          if (kind := _kind(info.annotation)) is not None]
HUGE = [2**63, 2**63 - 1, -(2**63) - 1, 10**20, 10**400, -(10**400)]
INTS = st.integers() | st.sampled_from(HUGE) | st.integers(-(10**30), 10**30)
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([math.inf, -math.inf, math.nan, 1e308])
VALUES = {"int": INTS, "float": FLOATS, "floats": st.lists(FLOATS, max_size=4)}


def test_every_request_is_covered_and_every_numeric_field_found() -> None:
    names = {cls.__name__ for cls in _requests()}
    missing = {cls.__name__ for cls in _requests() if any(info.is_required() for info in cls.model_fields.values())
               } - set(REQUIRED)
    assert not missing and "Submit" in names and len(FIELDS) >= 8
    assert {(cls.__name__, name) for cls, name, _ in FIELDS} >= {
        ("Submit", "priority"), ("ListTasks", "limit"), ("ListTasks", "offset"), ("ListTasks", "before"),
        ("MemoryExport", "after_episode"), ("MemorySearch", "query_vector"), ("MemoryWrite", "vector")}


def _safe(value: Any) -> None:
    """What an accepted number must survive: SQLite (every one of them is a column or a query's value) and
    arithmetic as a float.  (No request carries a timer's seconds as a number; pegasus.bounds clamps those.)"""
    for number in value if isinstance(value, list) else [value]:
        if number is None:
            continue
        if isinstance(number, int):
            assert -(2**63) <= number <= INT64_MAX
            sqlite3.connect(":memory:").execute("SELECT ?", (number,)).fetchone()
        assert math.isfinite(float(number))


@pytest.mark.parametrize(("cls", "name", "kind"), FIELDS, ids=[f"{c.__name__}.{n}" for c, n, _ in FIELDS])
def test_a_number_is_refused_naming_its_field_or_safe_to_use(cls: type[m.Request], name: str, kind: str) -> None:
    @given(value=VALUES[kind])
    @example(value=10**400 if kind == "int" else [math.inf] if kind == "floats" else math.nan)
    def check(value: Any) -> None:
        fields = {**REQUIRED.get(cls.__name__, {}), name: value}
        defaults = {k: v.get_default(call_default_factory=True) for k, v in cls.model_fields.items()
                    if not v.is_required()}
        bypass = cls.model_construct(**{**defaults, **fields})  # a client past the door: no validation
        try:
            request = cls(**fields)
        except InvalidRequest as exc:  # the door: one line naming the field
            assert exc.field.split(".")[0] == name and str(exc).startswith(f"{name}") and "\n" not in str(exc)
            with pytest.raises(ValueError, match=f"malformed {cls.__name__}: {name}"):
                m.revalidate(bypass)  # the supervisor refuses what a client built past the door
            return
        _safe(getattr(request, name))
        assert m.revalidate(bypass) == request  # the core accepts exactly what the door accepts

    check()


@pytest.mark.parametrize("bad", [math.nan, -1.0, 0, math.inf, 1e308, 10**400])
def test_a_client_timeout_out_of_bounds_is_refused_before_anything_starts(bad: Any, tmp_path: Any) -> None:
    """A timeout becomes Thespian's listen(timedelta): inf or 1e308 raised OverflowError there."""
    from actors.client import Client
    from pegasus.config import Settings

    settings = Settings().with_overrides({"state": {"home": str(tmp_path)}, "system": {"admin_port": 1}})
    for make in (Client.connect, Client.start, Client.start_daemon):
        with pytest.raises(InvalidRequest, match="^timeout: ") as refused:
            make(settings, timeout=bad)
        assert refused.value.field == "timeout"
    assert list(tmp_path.iterdir()) == []  # nothing started, nothing written


@pytest.mark.parametrize("argv,flag", [
    (["submit", "--priority", "99999999999999999999", "x"], "--priority"), (["run", "--timeout", "inf", "x"], "--timeout"),
    (["wait", "--timeout", "nan", "t"], "--timeout"), (["list", "--offset", "9" * 30], "--offset"),
    (["list", "--limit", "0"], "--limit"), (["watch", "--interval", "1e400"], "--interval"),
    (["watch", "--limit", "-1"], "--limit"), (["memory", "search", "-k", "1000", "x"], "-k"),
    (["stats", "--port", "99999"], "--port"), (["start", "--http", "70000"], "--http"),
])
def test_a_cli_number_out_of_bounds_is_a_usage_error_naming_its_flag(argv: list[str], flag: str,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from actors.cli.main import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"argument {flag}: " in err.splitlines()[-1]
