"""``Client``'s administration: the HTTP gateway's bearer tokens and backups (a mixin, as memory and
triggers are: the methods ask the supervisor like every other).  Only a token's hash leaves this process."""

from __future__ import annotations

import os
from typing import Any, Literal

from actors import messages as m
from pegasus.requests import R


class AdminClient:
    """Tokens (pegasus.store.tokens) and backups of ``actors.client.Client``."""

    def ask(self, request: m.Request[R]) -> R:  # Client's
        raise NotImplementedError

    def token_create(self, name: str, scope: Literal["read", "submit", "admin"] = "read") -> dict[str, Any]:
        """A new token for the HTTP API: its record and, this once, the ``token`` itself."""
        from pegasus.gateway.auth import new_token, token_hash  # here: starlette is not every command's cost
        token = new_token()
        record = self.ask(m.TokenCreate(name=name, scope=scope, token_hash=token_hash(token)))
        return {**record, "token": token}

    def token_list(self) -> list[dict[str, Any]]:
        return self.ask(m.TokenList())

    def token_revoke(self, name: str) -> dict[str, Any]:
        return self.ask(m.TokenRevoke(name=name))

    def backup(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> dict[str, Any]:
        """Copy the system's database to ``path`` (SQLite's online backup API: consistent while
        tasks run; mode 0600); an existing file is replaced only with ``overwrite``.
        Answers path, bytes, tasks, schema_version and seconds."""
        return self.ask(m.Backup(path=os.path.abspath(os.path.expanduser(path)), overwrite=overwrite))
