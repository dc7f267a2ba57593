"""The HTTP gateway's bearer tokens: a client asks, the supervisor stores them.

Only a token's SHA-256 travels: the token is made and shown by the client (``Client.token_create``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pegasus.requests.base import Request, View, Views

TOKEN_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"


class TokenCreate(Request[View]):
    name: str = Field(pattern=TOKEN_NAME)
    scope: Literal["read", "submit", "admin"] = "read"
    token_hash: str = Field(pattern=r"^[0-9a-f]{64}$")


class TokenList(Request[Views]):
    pass


class TokenRevoke(Request[View]):
    name: str = Field(min_length=1, max_length=64)
