"""Webhooks: a delivery's signature checked, its task's text built from a template, its redelivery key.

Pure: the secret, headers, raw body and clock in; a ``Delivery`` or a ``WebhookRefused`` out.
Signatures are HMAC-SHA256 compared in constant time (GitHub's, or timestamped within
``REPLAY_WINDOW_S``); templates are parsed here, never given to ``str.format`` (which would read
attributes of the values).  Forms, templates and GitHub's ping: docs/schedules.md.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from pegasus.errors import WebhookRefused
from pegasus.metadata import MAX_DEPTH, check_metadata

REPLAY_WINDOW_S = 300.0
GITHUB_SIGNATURE = "x-hub-signature-256"
SIGNATURE = "x-pegasus-signature"
TIMESTAMP = "x-pegasus-timestamp"
DELIVERY_HEADERS = ("x-github-delivery", "idempotency-key")  # a redelivery carries the same id
EVENT_HEADER = "x-github-event"
EVENT_FIELD = "@event"  # the template's name of the delivery's event
PING = "ping"
FORM = "application/x-www-form-urlencoded"
MAX_EVENT = 64
EVENT_NAME = re.compile(r"^[a-z0-9_.-]{1,64}$")  # GitHub's event names: pull_request, push, check_run...
MAX_TEMPLATE = 4096
MAX_DELIVERY_ID = 128
MAX_TIMESTAMP_DIGITS = 12  # Unix seconds until the year 33658: more is no timestamp (10**400 made a float overflow)

_FIELD = r"@?[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*"
_TOKEN = re.compile(r"\{\{|\}\}|\{(" + _FIELD + r")\}|[{}]")


@dataclass(frozen=True)
class Part:
    """A piece of a template: literal text, or a dotted field of the body (``field`` set)."""

    text: str = ""
    field: str | None = None


def parse_template(template: str) -> list[Part]:
    """The template's parts; ValueError naming the position of a stray brace or a bad field name."""
    if not template.strip():
        raise ValueError("a webhook's template cannot be empty")
    if len(template) > MAX_TEMPLATE:
        raise ValueError(f"the template is {len(template)} characters; the limit is {MAX_TEMPLATE}")
    parts: list[Part] = []
    position = 0
    for match in _TOKEN.finditer(template):
        if match.start() > position:
            parts.append(Part(template[position:match.start()]))
        token = match.group(0)
        if token in ("{{", "}}"):
            parts.append(Part(token[0]))
        elif match.group(1) is not None:
            if match.group(1).startswith("@") and match.group(1) != EVENT_FIELD:
                raise ValueError(f"template: {{{match.group(1)}}} at character {match.start() + 1}: a delivery's "
                                 f"own field is {{{EVENT_FIELD}}}")
            parts.append(Part(field=match.group(1)))
        else:
            raise ValueError(f"template: a stray {token!r} at character {match.start() + 1} (write {token * 2} for "
                             "a literal brace, {field.name} for a field of the body)")
        position = match.end()
    if position < len(template):
        parts.append(Part(template[position:]))
    return parts


def render(template: str, body: Any, event: str | None = None) -> str:
    """The template with each field replaced by the body's value (a string as is, anything else as JSON) and
    ``{@event}`` by ``event``; WebhookRefused(400, "missing_field") naming the first field the body lacks."""
    out = []
    for part in parse_template(template):
        if part.field is None:
            out.append(part.text)
            continue
        if part.field == EVENT_FIELD:
            if event is None:
                raise WebhookRefused(400, "missing_field", f"the delivery names no event ({EVENT_HEADER}); the "
                                                           "template reads {@event}")
            out.append(event)
            continue
        value = lookup(body, part.field)
        out.append(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))
    return "".join(out)


_MISSING = object()


def lookup(body: Any, field: str) -> Any:
    """``body``'s value at the dotted ``field``: keys of objects, indexes of lists (never attributes)."""
    value = body
    for name in field.split("."):
        if isinstance(value, dict):
            value = value.get(name, _MISSING)
        elif isinstance(value, list) and name.isdigit() and int(name) < len(value):
            value = value[int(name)]
        else:
            value = _MISSING
        if value is _MISSING:
            raise WebhookRefused(400, "missing_field", f"the body has no field {field!r} (the template names it)")
    return value


def sign(secret: bytes, body: bytes, timestamp: int | None = None) -> str:
    """``sha256=<hex>``: GitHub's signature of ``body``, or with ``timestamp`` the timestamped form's."""
    signed = body if timestamp is None else f"{timestamp}.".encode() + body
    return "sha256=" + hmac.new(secret, signed, hashlib.sha256).hexdigest()


def verify(secret: bytes, headers: Mapping[str, str], body: bytes, now: float) -> str | None:
    """Check the delivery's signature; the timestamped form's signature when it was that form (a replay of
    it inside the window is then the same delivery), else None.  WebhookRefused(401) when it fails."""
    lowered = {name.lower(): value for name, value in headers.items()}
    if SIGNATURE in lowered:
        signature, stamp = lowered[SIGNATURE].strip(), lowered.get(TIMESTAMP, "").strip()
        if not (stamp.isascii() and stamp.isdigit()):
            raise WebhookRefused(401, "bad_signature", f"{SIGNATURE} needs {TIMESTAMP} (Unix seconds)")
        if len(stamp.lstrip("0")) > MAX_TIMESTAMP_DIGITS:
            raise WebhookRefused(400, "bad_timestamp", f"{TIMESTAMP} is {len(stamp)} digits; Unix seconds have at "
                                                       f"most {MAX_TIMESTAMP_DIGITS}")
        if not hmac.compare_digest(signature.encode(), sign(secret, body, int(stamp)).encode()):
            raise WebhookRefused(401, "bad_signature", "the signature does not match the body")
        if abs(now - int(stamp)) > REPLAY_WINDOW_S:
            raise WebhookRefused(401, "replayed", f"the timestamp is more than {REPLAY_WINDOW_S:g}s from now")
        return signature
    if GITHUB_SIGNATURE in lowered:
        if not hmac.compare_digest(lowered[GITHUB_SIGNATURE].strip().encode(), sign(secret, body).encode()):
            raise WebhookRefused(401, "bad_signature", "the signature does not match the body")
        return None
    raise WebhookRefused(401, "bad_signature", f"no signature: send {GITHUB_SIGNATURE} or {SIGNATURE} with "
                                               f"{TIMESTAMP}")


@dataclass(frozen=True)
class Delivery:
    """What a verified delivery makes: a task's text and metadata, and its key (None: no redelivery id)."""

    text: str
    metadata: dict[str, Any]
    key: str | None


@dataclass(frozen=True)
class NoTask:
    """A verified delivery answered without a task (200): a ping, or an event the hook does not take."""

    event: str
    reason: str


def check_events(events: Collection[str]) -> list[str]:
    """A hook's event filter: GitHub event names, sorted, each once; ValueError naming a bad one."""
    for event in events:
        if not EVENT_NAME.match(event):
            raise ValueError(f"event {event[:80]!r}: a GitHub event name (lower case, such as pull_request or push)")
    return sorted(set(events))


def event_of(headers: Mapping[str, str]) -> str | None:
    """The delivery's event (``X-GitHub-Event``), None when it names none; WebhookRefused(400) for a bad one."""
    lowered = {name.lower(): value for name, value in headers.items()}
    event = lowered.get(EVENT_HEADER, "").strip()
    if not event:
        return None
    if not EVENT_NAME.match(event):
        raise WebhookRefused(400, "bad_event", f"{EVENT_HEADER}: {event[:MAX_EVENT]!r} is not an event name")
    return event


def payload_of(headers: Mapping[str, str], body: bytes) -> Any:
    """The delivery's JSON: the body, or its ``payload`` field when it is form-encoded (GitHub's option)."""
    lowered = {name.lower(): value for name, value in headers.items()}
    raw = body
    if lowered.get("content-type", "").split(";")[0].strip().lower() == FORM:
        try:
            fields = parse_qs(body.decode("ascii"), keep_blank_values=True, strict_parsing=True, max_num_fields=10)
        except (UnicodeDecodeError, ValueError) as exc:
            raise WebhookRefused(400, "bad_body", f"the form-encoded body cannot be read: {exc}") from None
        if list(fields) != ["payload"] or len(fields["payload"]) != 1:
            raise WebhookRefused(400, "bad_body", "a form-encoded delivery has one field, payload (its JSON)")
        raw = fields["payload"][0].encode("utf-8")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WebhookRefused(400, "bad_body", f"the body is not JSON: {exc}") from None
    except RecursionError:  # nested deeper than the parser's stack (100,000 levels was a 500)
        raise WebhookRefused(400, "bad_body", f"the body is nested more than {MAX_DEPTH} levels deep") from None


def deliver(name: str, template: str, secret: bytes, headers: Mapping[str, str], body: bytes,
            now: float, events: Collection[str] = ()) -> Delivery | NoTask:
    """A delivery checked (signature first: nothing of an unsigned body is read) and turned into a task, or
    answered without one (a ping; an event not among ``events`` when the hook names some)."""
    signature = verify(secret, headers, body, now)
    event = event_of(headers)
    if event == PING:
        return NoTask(event, "ping: the hook is set up; a ping makes no task")
    if events and event not in events:
        named = f"event {event!r}" if event else f"a delivery without {EVENT_HEADER}"
        return NoTask(event or "", f"{named} is not one this webhook takes ({', '.join(sorted(events))}): no task")
    payload = payload_of(headers, body)
    try:  # what the task keeps, checked before the template reads it (json.dumps of a deep value recurses)
        check_metadata({"body": payload}, max_bytes=len(body) * 8 + 1024, name="the body")
    except ValueError as exc:
        raise WebhookRefused(400, "bad_body", str(exc)) from None
    lowered = {header.lower(): value for header, value in headers.items()}
    delivery = next((lowered[h].strip() for h in DELIVERY_HEADERS if lowered.get(h, "").strip()), None)
    if delivery is not None and len(delivery) > MAX_DELIVERY_ID:
        raise WebhookRefused(400, "bad_delivery_id", f"the delivery id is over {MAX_DELIVERY_ID} characters")
    text = render(template, payload, event)
    key = f"{name}:{delivery}" if delivery is not None else (f"{name}:{signature}" if signature else None)
    metadata: dict[str, Any] = {"webhook": name, "body": payload}
    if delivery is not None:
        metadata["delivery"] = delivery
    if event is not None:
        metadata["event"] = event
    return Delivery(text, metadata, key)
