"""The supervisor refuses what would break it later: metadata the store cannot keep (a clear
BadRequest; it goes on serving) and tool plugins that cannot load (Configure fails naming them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from thespian.actors import ActorSystem

from actors import messages as m
from actors.client import Client, RequestError
from actors.supervisor import Supervisor
from pegasus.tools.registry import ToolError
from tests.actors.test_simple_system import settings_for


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    client = Client.start(settings_for(tmp_path), timeout=10)
    try:
        yield client
    finally:
        client.close()


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("metadata,message", [
    ({"n": 2**70}, "metadata.n: integer 1.18e+21 is outside the 64-bit range"),
    (nested(900), "metadata is nested more than 32 levels deep"),
])
def test_metadata_msgpack_cannot_carry_is_a_bad_request(client: Client, metadata: dict, message: str) -> None:
    """Issue 15: 2**70 and 900 levels of nesting gave InternalError."""
    with pytest.raises(RequestError, match=message.replace(".", r"\.").replace("+", r"\+")) as refused:
        client.submit("x", metadata=metadata)
    assert refused.value.error_type == "BadRequest"
    with pytest.raises(RequestError, match=r"task 2: metadata\.n") as refused:
        client.submit_many(["fine", {"text": "bad", "metadata": {"n": 2**70}}])
    assert refused.value.error_type == "BadRequest" and client.list() == []  # all or none
    done = client.wait(client.submit("what is 1 + 1?", metadata={"ok": [1, 2]})["task_id"], timeout=60)
    assert done["lifecycle_state"] == "done"


BAD_PLUGIN = {"tools": {"plugins": ["no_such_plugin_module:register"]}}


def test_configure_fails_naming_an_unloadable_plugin(tmp_path: Path) -> None:
    """Issue 15: the supervisor logged tool_registry_unavailable and went on; every task then failed."""
    asys = ActorSystem("simpleSystemBase", transientUnique=True, logDefs=False)
    try:
        supervisor = asys.createActor(Supervisor)
        settings = settings_for(tmp_path, **BAD_PLUGIN)
        reply = asys.ask(supervisor, m.Configure(request_id="c", settings=settings), 5)
        assert not reply.ok and reply.error_type == "ToolError"
        assert reply.error == ("tool plugin 'no_such_plugin_module:register' cannot be loaded: "
                               "ModuleNotFoundError: No module named 'no_such_plugin_module'")
        assert "not configured" in asys.ask(supervisor, m.Stats(request_id="s"), 5).error
    finally:
        asys.shutdown()


def test_client_start_refuses_an_unloadable_plugin_before_starting(tmp_path: Path) -> None:
    with pytest.raises(ToolError, match="tool plugin 'no_such_plugin_module:register' cannot be loaded"):
        Client.start(settings_for(tmp_path, **BAD_PLUGIN), timeout=10)
