"""The declared public API of ``actors`` (``__all__``: the client and the errors its calls raise), and that the
client stands apart: importing it loads none of the actors it talks to, and every request it asks is declared in
``pegasus.requests`` as a ``Request[R]``."""

from __future__ import annotations

import subprocess
import sys
import typing

import actors
from actors.client import Client
from pegasus import requests as r
from pegasus.errors import PegasusError

PUBLIC = ["Client", "InvalidRequest", "PegasusError", "RequestError", "SupervisorReplaced", "SystemNotRunningError",
          "SystemStartError", "WebhookRefused"]


def test_the_public_api_is_the_client_and_its_errors() -> None:
    assert sorted(actors.__all__) == PUBLIC
    assert actors.Client is Client and callable(Client.ask)
    assert all(issubclass(getattr(actors, name), PegasusError) for name in PUBLIC if name != "Client")


def test_importing_the_client_loads_no_actor_it_talks_to() -> None:
    code = ("import sys, actors.client; print(sorted(m for m in sys.modules if m.startswith(('actors.supervisor', "
            "'actors.guardian', 'actors.worker', 'actors.pool', 'actors.task_actor'))))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert loaded.stdout.strip() == "[]"


def test_every_request_declares_its_reply() -> None:
    requests = [getattr(r, name) for name in r.__all__
                if isinstance(getattr(r, name), type) and issubclass(getattr(r, name), r.Request)
                and getattr(r, name) is not r.Request]
    assert len(requests) >= 37
    for request in requests:
        declared = [base for base in request.__mro__ if getattr(base, "__pydantic_generic_metadata__", {}).get("args")]
        assert declared, f"{request.__name__} does not say what its reply is (Request[R])"
        assert typing.get_origin(declared[0].__pydantic_generic_metadata__["args"][0]) in (dict, list)
