"""The Thespian runtime of Pegasus: system start/attach/shutdown, supervisor,
task actors, stage pools and workers.  Thespian's camelCase names stay in here.

The public API is ``__all__``: the Python client and the errors its calls raise
(``tests/actors/test_public_api.py`` keeps it).  They load on first use, so an actor
process importing ``actors.<module>`` does not load the client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from actors.client.client import Client
    from actors.client.errors import RequestError, SupervisorReplaced
    from actors.runtime.spec import SystemNotRunningError, SystemStartError
    from pegasus.errors import InvalidRequest, PegasusError, WebhookRefused

_HOMES = {
    "Client": "actors.client.client", "RequestError": "actors.client.errors",
    "SupervisorReplaced": "actors.client.errors",
    "SystemNotRunningError": "actors.runtime.spec", "SystemStartError": "actors.runtime.spec",
    "InvalidRequest": "pegasus.errors", "PegasusError": "pegasus.errors", "WebhookRefused": "pegasus.errors",
}
__all__ = ["Client", "InvalidRequest", "PegasusError", "RequestError", "SupervisorReplaced", "SystemNotRunningError",
           "SystemStartError", "WebhookRefused"]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'actors' has no attribute {name!r}")
