"""The Python client of a system and the HTTP gateway's process (which serves Python clients).

``Client`` and its errors are named here; they load on first use, so a process importing one module of
this package loads only what that module needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.client.client import Client
    from actors.client.errors import RequestError, SupervisorReplaced

_HOMES = {"Client": "actors.client.client", "RequestError": "actors.client.errors",
          "SupervisorReplaced": "actors.client.errors"}
__all__ = ["Client", "RequestError", "SupervisorReplaced"]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'actors.client' has no attribute {name!r}")
