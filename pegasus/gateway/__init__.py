"""The HTTP gateway's core: routes, request models, authentication, errors, events and metrics.

Pure of actors: the app is built over a ``Backend`` (``actors.client.gateway`` gives one made of
Python clients of the supervisor) and a token lookup, so it is tested without a socket.
"""

from pegasus.gateway.app import Backend, build_app
from pegasus.gateway.errors import ApiError, NotReady, Upstream

__all__ = ["ApiError", "Backend", "NotReady", "Upstream", "build_app"]
