"""The HTTP gateway's conversations: its bearer tokens (a client and the supervisor, who stores them) and
the guardian starting the gateway's keeper.

Only a token's SHA-256 travels: the token is made and shown by the client (``Client.token_create``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from actors.messages.requests import Request

TOKEN_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class TokenCreate(Request):
    name: str = Field(pattern=TOKEN_NAME)
    scope: Literal["read", "submit", "admin"] = "read"
    token_hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class TokenList(Request):
    pass


class TokenRevoke(Request):
    name: str = Field(min_length=1, max_length=64)


@dataclass(frozen=True)
class StartGateway:
    """Guardian -> gateway keeper: run the HTTP gateway of the system whose state directory this is."""

    state_dir: str


@dataclass(frozen=True)
class GatewayCheck:
    """The keeper's timer: look whether the gateway process still runs (or start it again)."""

    start: bool = False
