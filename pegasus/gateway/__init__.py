"""The HTTP gateway's core: routes, request models, authentication, errors, events and metrics.

Pure of actors: the app is built over a ``Backend`` (``actors.client.gateway`` gives one made of
Python clients of the supervisor) and a token lookup, so it is tested without a socket.

Its names are imported on first use (PEP 562): ``pegasus.gateway.auth`` alone (the CLI's token scopes)
costs no Starlette.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as a type checker sees them
    from pegasus.gateway.app import Backend, build_app
    from pegasus.gateway.errors import ApiError, NotReady, Upstream

_HOME_OF = {"Backend": "pegasus.gateway.app", "build_app": "pegasus.gateway.app", "ApiError": "pegasus.gateway.errors",
            "NotReady": "pegasus.gateway.errors", "Upstream": "pegasus.gateway.errors"}


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOME_OF[name]), name)


__all__ = ["ApiError", "Backend", "NotReady", "Upstream", "build_app"]
