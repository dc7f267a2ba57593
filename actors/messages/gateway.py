"""The guardian starting the HTTP gateway's keeper, and the keeper's timer (token requests: ``pegasus.requests.tokens``)."""

from __future__ import annotations

from dataclasses import dataclass

# The gateway process's environment, as its keeper starts it (read by actors.client.gateway).
HOME_ENV = "PEGASUS_GATEWAY_HOME"  # the gateway process's state directory
RESTARTS_ENV = "PEGASUS_GATEWAY_RESTARTS"  # how many gateways died before this one (its /metrics says)


@dataclass(frozen=True)
class StartGateway:
    """Guardian -> gateway keeper: run the HTTP gateway of the system whose state directory this is."""

    state_dir: str


@dataclass(frozen=True)
class GatewayCheck:
    """The keeper's timer: look whether the gateway process still runs (or start it again)."""

    start: bool = False
