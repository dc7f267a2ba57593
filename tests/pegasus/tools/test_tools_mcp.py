"""MCP tools at the registry level, against a real MCP server subprocess (tests/support/mcp_server.py).

No actor system: the registry, the background loop thread and the SDK's stdio
client, as a stage worker uses them.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pegasus.config import Settings
from pegasus.tools import mcp
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import (
    ToolArgumentError, ToolContext, ToolExecutionError, ToolNotFoundError, ToolOutcomeUnknown, ToolRegistry,
)

SERVER = str(Path(__file__).resolve().parents[2] / "support" / "mcp_server.py")


def mcp_settings(tmp_path: Path, **server: Any) -> Settings:
    entry = {"name": "demo", "command": sys.executable, "args": [SERVER], "timeout_s": 10.0, **server}
    return Settings().with_overrides({"mcp": {"servers": [entry], "start_timeout_s": 20.0},
                                      "state": {"home": str(tmp_path / "state")}, "tools": {"max_output_chars": 500}})


@pytest.fixture(scope="module")
def shared_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """One server for the tests that only call it (its start is ~1 s of CPU, the mcp SDK's import): the
    registries built from the same settings share the process's host, until a test closes every host."""
    yield mcp_settings(tmp_path_factory.mktemp("mcp"))
    mcp.close_all()


@pytest.fixture
def registry(shared_settings: Settings) -> ToolRegistry:
    return registry_for(shared_settings)


def test_building_the_registry_starts_nothing(tmp_path: Path) -> None:
    registry = registry_for(mcp_settings(tmp_path, effect="idempotent"))
    assert "demo.reverse" not in registry.names()
    assert registry.effect_of("demo.reverse") == "idempotent"  # from the config entry, no server needed
    assert registry.effect_of("nope.reverse") is None


def test_tools_are_listed_validated_called_and_capped(registry: ToolRegistry) -> None:
    assert registry.call("demo.reverse", {"text": "abc"}) == "cba"
    described = {entry["name"]: entry for entry in registry.describe()}
    assert {"demo.reverse", "demo.add", "demo.crash", "echo"} <= set(described)
    assert described["demo.reverse"]["schema"]["required"] == ["text"]
    assert described["demo.reverse"]["effect"] == "effectful"  # the default for MCP servers
    with pytest.raises(ToolArgumentError) as caught:
        registry.call("demo.add", {"a": 1, "b": "two"})
    assert caught.value.fields == ["b"] and "'two' is not of type 'integer'" in caught.value.message
    with pytest.raises(ToolArgumentError, match="'text' is a required property"):
        registry.call("demo.reverse", {})
    assert registry.call("demo.add", {"a": 2, "b": 3}) == "5"
    with pytest.raises(ToolExecutionError, match="demo.fail failed"):
        registry.call("demo.fail", {"reason": "no"})
    big = registry.call("demo.big", {"n": 2000})
    assert big.startswith("y" * 500) and "[output truncated: 1500 of 2000 characters cut]" in big
    with pytest.raises(ToolNotFoundError):
        registry.get("demo.nothing")


def test_a_server_that_dies_gives_a_clear_error_and_is_started_again(registry: ToolRegistry) -> None:
    assert registry.call("demo.reverse", {"text": "ab"}) == "ba"
    with pytest.raises(ToolExecutionError, match="MCP server 'demo' went away during demo.crash"):
        registry.call("demo.crash", {})
    assert registry.call("demo.reverse", {"text": "xy"}) == "yx"  # a fresh server process


def test_a_server_that_cannot_start_is_a_tool_error(tmp_path: Path) -> None:
    registry = registry_for(mcp_settings(tmp_path, name="broken", command="/no/such/mcp-server"))
    with pytest.raises(ToolExecutionError, match=r"broken.x is unavailable: MCP server 'broken' .* could not start"):
        registry.call("broken.x", {})
    assert "could not start" in registry.load_providers()["broken"]
    assert [entry["name"] for entry in registry.describe()][:1] == ["arithmetic"]  # the rest still works


def test_duplicate_server_names_are_refused() -> None:
    from pegasus.config import Settings
    from pegasus.errors import ConfigError

    server = {"name": "a", "command": "x"}
    with pytest.raises(ConfigError, match="unique"):
        Settings().with_overrides({"mcp": {"servers": [server, server]}})


def test_a_call_of_unknown_outcome_is_sent_again_only_when_idempotent(tmp_path: Path) -> None:
    """Exiting or not answering mid-call: the effectful ``record`` raises ToolOutcomeUnknown and was sent
    once; the idempotent ``touch`` is sent again with the same key (from ToolContext, in ``_meta``)."""
    record = tmp_path / "record"
    registry = registry_for(mcp_settings(tmp_path, timeout_s=2.0, env={"PEGASUS_TEST_MCP_RECORD": str(record)}))
    try:
        for mode in ("exit", "hold"):
            with pytest.raises(ToolOutcomeUnknown, match="demo.record is effectful: not sent again"):
                registry.call("demo.record", {"mode": mode}, ToolContext(idempotency_key=f"r-{mode}"))
            assert registry.call("demo.touch", {"mode": mode}, ToolContext(idempotency_key=f"t-{mode}")) \
                == f"recorded t-{mode}"
        assert record.read_text().split() == ["r-exit", "t-exit", "t-exit", "r-hold", "t-hold", "t-hold"]
        assert registry.effect_of("demo.touch") == "idempotent"
    finally:
        mcp.close_all()
