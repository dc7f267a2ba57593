"""Bounds at the door and in the core (issue 28), without an actor system: a caller's seconds are refused
naming the parameter unless finite and in range; a timer a core hands out is always one Thespian can arm;
the HTTP bodies, cursors and event ids refuse what SQLite could not hold; a signed webhook with a timestamp
of 10**400 or a 100,000-deep body is a 400, not a 500."""

from __future__ import annotations

import base64
import math
import sqlite3
import time
from datetime import timedelta
from typing import Any

import pytest
from types import SimpleNamespace

from starlette.datastructures import QueryParams
from hypothesis import example, given, strategies as st

from pegasus import bounds
from pegasus.admission.commands import WakeAfter
from pegasus.errors import InvalidRequest, WebhookRefused
from pegasus.gateway.errors import ApiError
from pegasus.gateway.events import last_event_id
from pegasus.gateway.params import ListQuery, parse_query
from pegasus.gateway.models import MessageBody, ReasonBody, ResumeBody, SubmitBody, parse
from pegasus.metadata import INT64_MAX
from pegasus.pool.commands import Arm
from pegasus.pool.inputs import HealthDue
from pegasus.run.hosts import WakeIn
from pegasus.triggers.webhooks import deliver, sign

NUMBERS = (st.floats(allow_nan=True, allow_infinity=True) | st.integers()
           | st.sampled_from([10**400, -(10**400), math.inf, math.nan, 1e308]))


@given(NUMBERS)
@example(math.nan)
@example(10**400)
def test_a_callers_seconds_are_finite_and_in_range_or_refused_naming_the_parameter(value: Any) -> None:
    try:
        accepted = bounds.seconds(value, "timeout")
    except InvalidRequest as exc:
        assert exc.field == "timeout" and str(exc).startswith("timeout: ") and "\n" not in str(exc)
        return
    assert math.isfinite(accepted) and 0 < accepted <= bounds.MAX_WAIT_S
    timedelta(seconds=accepted)


def test_forever_is_infinity_only_never_nan() -> None:
    assert bounds.seconds(math.inf, "timeout", forever=True) == math.inf
    with pytest.raises(InvalidRequest, match="timeout"):
        bounds.seconds(math.nan, "timeout", forever=True)
    assert bounds.seconds("0", "seconds", inclusive=True) == 0.0


@given(NUMBERS)
@example(math.inf)
@example(10**400)
def test_every_timer_a_core_hands_out_can_be_armed(value: Any) -> None:
    """WakeAfter (Admission's retry back-off), Arm (a pool's deadlines), WakeIn (task actor hosts): whatever
    delay they are built with, Thespian's wakeupAfter gets a timedelta and a select timeout it can hold."""
    for delay in (WakeAfter(value, "t").seconds, Arm(value, HealthDue()).delay_s, WakeIn(value).seconds):
        assert 0.0 <= delay <= bounds.MAX_TIMER_S
        assert time.monotonic() + timedelta(seconds=delay).total_seconds() < 2**62


@given(st.integers() | st.sampled_from([10**20, 10**400, -1]))
def test_an_http_priority_is_refused_naming_it_or_fits_sqlite(priority: int) -> None:
    try:
        body = parse(SubmitBody, f'{{"text": "x", "priority": {priority}}}'.encode())
    except ApiError as exc:
        assert exc.status == 400 and exc.message.startswith("priority: ")
        return
    assert 0 <= body.priority <= 1_000_000
    sqlite3.connect(":memory:").execute("SELECT ?", (body.priority,))


def _cursor(cursor: str) -> int:
    """The ``cursor`` of ``GET /v1/tasks`` as the handler reads it (ApiError 400 when refused)."""
    request = SimpleNamespace(query_params=QueryParams({"cursor": cursor}))
    return int(parse_query(ListQuery, request).cursor)  # type: ignore[arg-type]


@given(st.integers(min_value=0) | st.sampled_from([10**30, 10**400]))
def test_a_cursor_or_an_event_id_is_refused_or_an_sqlite_integer(number: int) -> None:
    """seq:10**30 in a cursor was a 500 ('Python int too large to convert to SQLite INTEGER')."""
    cursor = str(number)  # a cursor is a task's seq (next_cursor), as the schema says
    for parsed in (lambda: _cursor(cursor), lambda: last_event_id(str(number))):
        try:
            value = parsed()
        except ApiError as exc:
            assert exc.status == 400
            continue
        assert value is not None and 0 <= value <= INT64_MAX


@pytest.mark.parametrize("text", ["²", "1²", "١٢"])  # digits to str.isdigit, not to int() or SQLite
def test_unicode_digits_are_a_400_not_a_500(text: str) -> None:
    for parsed in (lambda: _cursor(text), lambda: last_event_id(text)):
        with pytest.raises(ApiError) as refused:
            parsed()
        assert refused.value.status == 400


def test_the_other_bodies_bound_their_text() -> None:
    with pytest.raises(ApiError, match="reason: String should have at most 4096"):
        parse(ReasonBody, b'{"reason": "' + b"x" * 4097 + b'"}')
    with pytest.raises(ApiError, match="text: String should match pattern"):  # blank is refused (issue 32)
        parse(MessageBody, b'{"text": ""}')
    assert parse(ResumeBody, b"{}").message is None


SECRET = b"s3cret"


def _refused(headers: dict[str, str], body: bytes) -> WebhookRefused:
    with pytest.raises(WebhookRefused) as refused:
        deliver("hook", "hi {a}", SECRET, headers, body, now=time.time())
    return refused.value


def test_a_signed_webhook_with_a_timestamp_of_10_to_the_400_is_a_400() -> None:
    """It was a 500: ``now - int(stamp)`` raised OverflowError (int too large to convert to float)."""
    body, stamp = b'{"a": 1}', 10**400
    refused = _refused({"X-Pegasus-Timestamp": str(stamp), "X-Pegasus-Signature": sign(SECRET, body, stamp)}, body)
    assert (refused.status, refused.code) == (400, "bad_timestamp") and "X-Pegasus-Timestamp".lower() in str(refused)
    far = 10**12 - 1  # 12 digits: a timestamp, only not a fresh one
    refused = _refused({"X-Pegasus-Timestamp": str(far), "X-Pegasus-Signature": sign(SECRET, body, far)}, body)
    assert (refused.status, refused.code) == (401, "replayed")


@pytest.mark.parametrize("depth", [33, 900, 100_000])
def test_a_signed_webhook_nested_too_deep_is_a_400(depth: int) -> None:
    """100,000 levels was a 500 (RecursionError in json.loads); 900 would recurse in the template's json.dumps."""
    body = b'{"a": ' + b"[" * depth + b"]" * depth + b"}"
    refused = _refused({"X-Hub-Signature-256": sign(SECRET, body)}, body)
    assert (refused.status, refused.code) == (400, "bad_body") and "nested more than 32 levels" in str(refused)
