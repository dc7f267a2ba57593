"""Webhooks: a delivery's signature checked, its task's text built from a template, its redelivery key.

Pure: the secret, the headers, the raw body and the clock come in; a ``Delivery`` (the task's text,
metadata and idempotency key) or a ``WebhookRefused`` (status, code, message) comes out.  The
supervisor holds the secrets and runs this on every delivery.

Two signature forms, both HMAC-SHA256 with the webhook's secret, compared in constant time:

- GitHub's: ``X-Hub-Signature-256: sha256=<hex of HMAC(secret, body)>``;
- timestamped: ``X-Pegasus-Timestamp: <Unix seconds>`` and ``X-Pegasus-Signature: sha256=<hex of
  HMAC(secret, "<timestamp>." + body)>``; a timestamp more than ``REPLAY_WINDOW_S`` from now is refused.

Templates name fields of the JSON body with dots: ``Review "{pull_request.title}"``, ``{commits.0.id}``
(a number indexes a list); ``{{`` and ``}}`` are literal braces.  They are parsed here, never given
to ``str.format`` (whose ``{0.__class__}`` would read attributes of the values).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pegasus.errors import WebhookRefused
from pegasus.metadata import MAX_DEPTH, check_metadata

REPLAY_WINDOW_S = 300.0
GITHUB_SIGNATURE = "x-hub-signature-256"
SIGNATURE = "x-pegasus-signature"
TIMESTAMP = "x-pegasus-timestamp"
DELIVERY_HEADERS = ("x-github-delivery", "idempotency-key")  # a redelivery carries the same id
MAX_TEMPLATE = 4096
MAX_DELIVERY_ID = 128
MAX_TIMESTAMP_DIGITS = 12  # Unix seconds until the year 33658: more is no timestamp (10**400 made a float overflow)

_FIELD = r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*"
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
            parts.append(Part(field=match.group(1)))
        else:
            raise ValueError(f"template: a stray {token!r} at character {match.start() + 1} (write {token * 2} for "
                             "a literal brace, {field.name} for a field of the body)")
        position = match.end()
    if position < len(template):
        parts.append(Part(template[position:]))
    return parts


def render(template: str, body: Any) -> str:
    """The template with each field replaced by the body's value (a string as is, anything else as JSON);
    WebhookRefused(400, "missing_field") naming the first field the body lacks."""
    out = []
    for part in parse_template(template):
        if part.field is None:
            out.append(part.text)
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


def deliver(name: str, template: str, secret: bytes, headers: Mapping[str, str], body: bytes,
            now: float) -> Delivery:
    """A delivery checked (signature first: nothing of an unsigned body is read) and turned into a task."""
    signature = verify(secret, headers, body, now)
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise WebhookRefused(400, "bad_body", f"the body is not JSON: {exc}") from None
    except RecursionError:  # nested deeper than the parser's stack (100,000 levels was a 500)
        raise WebhookRefused(400, "bad_body", f"the body is nested more than {MAX_DEPTH} levels deep") from None
    try:  # what the task keeps, checked before the template reads it (json.dumps of a deep value recurses)
        check_metadata({"body": payload}, max_bytes=len(body) * 8 + 1024, name="the body")
    except ValueError as exc:
        raise WebhookRefused(400, "bad_body", str(exc)) from None
    lowered = {header.lower(): value for header, value in headers.items()}
    delivery = next((lowered[h].strip() for h in DELIVERY_HEADERS if lowered.get(h, "").strip()), None)
    if delivery is not None and len(delivery) > MAX_DELIVERY_ID:
        raise WebhookRefused(400, "bad_delivery_id", f"the delivery id is over {MAX_DELIVERY_ID} characters")
    text = render(template, payload)
    key = f"{name}:{delivery}" if delivery is not None else (f"{name}:{signature}" if signature else None)
    metadata: dict[str, Any] = {"webhook": name, "body": payload}
    if delivery is not None:
        metadata["delivery"] = delivery
    return Delivery(text, metadata, key)
