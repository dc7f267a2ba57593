"""The supervisor's side of the HTTP gateway's bearer tokens: create, list, revoke (``pegasus.store.tokens``).

A mixin of ``actors.supervisor.Supervisor``: the supervisor is the store's only writer, so tokens are
written here; the gateway only reads them (``TokenReader``).
"""

from __future__ import annotations

from typing import Any

from actors import messages as m
from actors.request_handler import request_handler
from pegasus.store import tokens


class TokenRequests:
    """Handlers of the supervisor for token requests (see the module docstring)."""

    store: Any
    log: Any

    @request_handler
    def receiveMsg_TokenCreate(self, request: m.TokenCreate, sender: Any) -> Any:
        record = tokens.create(self.store, request.name, request.token_hash, request.scope)
        self.log.info("token_created", name=request.name, scope=request.scope)
        return record

    @request_handler
    def receiveMsg_TokenList(self, request: m.TokenList, sender: Any) -> Any:
        return tokens.listed(self.store)

    @request_handler
    def receiveMsg_TokenRevoke(self, request: m.TokenRevoke, sender: Any) -> Any:
        record = tokens.revoke(self.store, request.name)
        self.log.info("token_revoked", name=request.name)
        return record
