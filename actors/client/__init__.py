"""The Python client of a system and the HTTP gateway's process (which serves Python clients).

``Client`` and its errors are named here; they load on first use, so an actor process importing
``actors.client.gateway_keeper`` does not load the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.client.client import Client, RequestError, SupervisorReplaced

__all__ = ["Client", "RequestError", "SupervisorReplaced"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("actors.client.client"), name)
    raise AttributeError(f"module 'actors.client' has no attribute {name!r}")
