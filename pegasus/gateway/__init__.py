"""The HTTP gateway's core: routes, request models, authentication, errors, events and metrics.

Pure of actors: the app is built over a ``Backend`` (``actors.client.gateway`` gives one made of
Python clients of the supervisor) and a token lookup, so it is tested without a socket.

Its names are imported on first use (PEP 562): ``pegasus.gateway.auth`` alone (the CLI's token scopes)
costs no Starlette.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pegasus import lazy

if TYPE_CHECKING:  # the names as a type checker sees them
    from pegasus.gateway.app import Backend, build_app
    from pegasus.gateway.errors import ApiError, NotReady, Upstream

__getattr__, __dir__ = lazy.names(__name__, {"pegasus.gateway.app": ("Backend", "build_app"),
                                              "pegasus.gateway.errors": ("ApiError", "NotReady", "Upstream")})


__all__ = ["ApiError", "Backend", "NotReady", "Upstream", "build_app"]
