"""The HTTP gateway's bearer tokens in the store (table ``api_tokens``): functions over a ``Database``.

Only a token's SHA-256 is kept (``pegasus.gateway.auth`` says why not a slow hash); the
token itself is shown once, by ``pegasus token create``.  The supervisor writes (it is the
store's only writer); the gateway reads the one row of a presented token through its own
read-only connection (``TokenReader``), so a revocation holds from the next request on.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from pegasus.errors import PegasusError
from pegasus.store.quarantine import sift
from pegasus.store.database import Database, now_iso

_COLUMNS = ("name", "scope", "created_at", "revoked_at")


class TokenError(PegasusError):
    """A token name used already, or unknown."""


class TokenNotFound(TokenError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no token named {name!r}")


def create(db: Database, name: str, token_hash: str, scope: str) -> dict[str, Any]:
    """Keep a new token's hash under ``name``; TokenError when the name is taken (a revoked one's too)."""
    stamp = now_iso()
    with db.transaction() as conn:
        if conn.execute("SELECT 1 FROM api_tokens WHERE name = ?", (name,)).fetchone():
            raise TokenError(f"a token named {name!r} exists already (names are never reused: pick another)")
        conn.execute("INSERT INTO api_tokens (name, token_hash, scope, created_at) VALUES (?, ?, ?, ?)",
                     (name, token_hash, scope, stamp))
    return {"name": name, "scope": scope, "created_at": stamp, "revoked_at": None}


def listed(db: Database) -> list[dict[str, Any]]:
    """Every token (never its hash), oldest first; one whose row is not text (an old version's, a bug's) with
    ``quarantined`` saying why (pegasus.store.quarantine), never raised: the list is everyone's."""
    rows = db.db.execute("SELECT CAST(name AS BLOB), CAST(scope AS BLOB), CAST(created_at AS BLOB), "
                         "CAST(revoked_at AS BLOB) FROM api_tokens ORDER BY created_at, name").fetchall()
    views: list[dict[str, Any]] = []

    def set_aside(row: tuple[Any, ...], error: str) -> None:
        name = row[0].decode("utf-8", "replace") if isinstance(row[0], bytes) else str(row[0])
        views.append({"name": name, "scope": None, "created_at": None, "revoked_at": None, "quarantined": error})

    for view in sift(rows, _token_of, set_aside):
        views.append(view)
    return views


def _token_of(row: tuple[Any, ...]) -> dict[str, Any]:
    values = [None if raw is None else bytes(raw).decode("utf-8") for raw in row]
    if not values[0] or not values[1] or not values[2]:
        raise ValueError("a token row without its name, scope or creation time")
    return {**dict(zip(_COLUMNS, values)), "quarantined": None}


def revoke(db: Database, name: str) -> dict[str, Any]:
    """Revoke ``name`` for good (revoking it again changes nothing); TokenNotFound when unknown."""
    with db.transaction() as conn:
        row = conn.execute("SELECT revoked_at FROM api_tokens WHERE name = ?", (name,)).fetchone()
        if row is None:
            raise TokenNotFound(name)
        if row[0] is None:
            conn.execute("UPDATE api_tokens SET revoked_at = ? WHERE name = ?", (now_iso(), name))
    found = [token for token in listed(db) if token["name"] == name]
    return found[0]


class TokenReader:
    """The gateway's read-only view of the tokens: one indexed row per request, no write ever."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def lookup(self, token_hash: str) -> dict[str, Any] | None:
        """The live token with this hash: name, scope, hash (None: unknown or revoked)."""
        with self._lock:
            if self._db is None:
                self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False,
                                           timeout=5.0)
            row = self._db.execute("SELECT CAST(name AS BLOB), CAST(scope AS BLOB), token_hash FROM api_tokens"
                                   " WHERE token_hash = ? AND revoked_at IS NULL", (token_hash,)).fetchone()
        if row is None:
            return None
        try:
            return {"name": bytes(row[0]).decode("utf-8"), "scope": bytes(row[1]).decode("utf-8"),
                    "token_hash": row[2]}
        except (TypeError, ValueError):  # a row that cannot be a token (pegasus token list shows it quarantined)
            return None

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
