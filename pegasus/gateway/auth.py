"""Bearer tokens of the HTTP API: made, hashed, checked, and the scope each route needs.

A token is ``pgs_`` and 32 random bytes (URL-safe base64); the store keeps only its SHA-256
(``pegasus.store.tokens``).  Why not a slow hash (bcrypt, scrypt, argon2): those protect
low-entropy secrets -- passwords -- from guessing once a store leaks.  A 256-bit random token
has no guess list, so a single SHA-256 is as strong as its preimage resistance, and a slow hash
would cost tens of milliseconds of CPU on every request.  The found hash is compared in constant
time (``hmac.compare_digest``).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Callable
from enum import StrEnum
from typing import Any

from pegasus.gateway.errors import ApiError

TOKEN_PREFIX = "pgs_"
TOKEN_BYTES = 32


class Scope(StrEnum):
    """What a token may do; each includes the ones before it."""

    READ = "read"  # every GET: tasks, history, events, stats, machines, metrics, schedules
    SUBMIT = "submit"  # and: submit a task, message or resume one
    ADMIN = "admin"  # and: cancel, suspend, approve, retry; change schedules


_RANK = {Scope.READ: 0, Scope.SUBMIT: 1, Scope.ADMIN: 2}
SCOPES = tuple(scope.value for scope in Scope)

Lookup = Callable[[str], "dict[str, Any] | None"]  # a token's hash -> its live record (name, scope, token_hash)


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def allows(granted: str, needed: Scope) -> bool:
    return granted in _RANK and _RANK[Scope(granted)] >= _RANK[needed]


_CHALLENGE = {"WWW-Authenticate": 'Bearer realm="pegasus"'}


def authenticate(authorization: str | None, lookup: Lookup, needed: Scope) -> dict[str, Any]:
    """The token record of a request's ``Authorization`` header; ApiError 401 (none, malformed, unknown or
    revoked) or 403 (its scope is below ``needed``)."""
    if not authorization:
        raise ApiError(401, "unauthorized", "a bearer token is required (Authorization: Bearer TOKEN)", _CHALLENGE)
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, "unauthorized", "the Authorization header must be: Bearer TOKEN", _CHALLENGE)
    digest = token_hash(token)
    record = lookup(digest)
    if record is None or not hmac.compare_digest(str(record.get("token_hash", "")), digest):
        raise ApiError(401, "unauthorized", "unknown or revoked token", _CHALLENGE)
    if not allows(str(record.get("scope")), needed):
        raise ApiError(403, "forbidden", f"token {record.get('name')!r} has scope {record.get('scope')!r}; "
                                         f"this needs {needed.value!r}")
    return record
