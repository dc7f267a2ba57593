"""The Thespian runtime of Pegasus: system start/attach/shutdown, supervisor,
task actors, stage pools and workers.  Thespian's camelCase names stay in here.

The public API is ``__all__``: the Python client and the errors its calls raise
(``tests/actors/test_public_api.py`` keeps it).  They load on first use, so an actor
process importing ``actors.<module>`` does not load the client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pegasus import lazy

if TYPE_CHECKING:
    from actors.client.client import Client
    from actors.client.errors import RequestError, SupervisorReplaced
    from actors.runtime.spec import SystemNotRunningError, SystemStartError
    from pegasus.errors import InvalidRequest, PegasusError, WebhookRefused

__all__ = ["Client", "InvalidRequest", "PegasusError", "RequestError", "SupervisorReplaced", "SystemNotRunningError",
           "SystemStartError", "WebhookRefused"]
__getattr__, __dir__ = lazy.names(__name__, {
    "actors.client.client": ("Client",), "actors.client.errors": ("RequestError", "SupervisorReplaced"),
    "actors.runtime.spec": ("SystemNotRunningError", "SystemStartError"),
    "pegasus.errors": ("InvalidRequest", "PegasusError", "WebhookRefused"),
})
