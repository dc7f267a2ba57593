"""The Python client of a system and the HTTP gateway's process (which serves Python clients).

``Client`` and its errors are named here; they load on first use, so a process importing one module of
this package loads only what that module needs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pegasus import lazy

if TYPE_CHECKING:
    from actors.client.client import Client
    from actors.client.errors import RequestError, SupervisorReplaced

__all__ = ["Client", "RequestError", "SupervisorReplaced"]
__getattr__, __dir__ = lazy.names(__name__, {"actors.client.client": ("Client",),
                                              "actors.client.errors": ("RequestError", "SupervisorReplaced")})
