"""The [llm], [tools] and [mcp] settings, and the catalogue of the tools they configure (``pegasus tools``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from pegasus import config
from pegasus.errors import ConfigError
from pegasus.tools import mcp
from pegasus.tools.catalogue import argument_summary, catalogue

SERVER = str(Path(__file__).resolve().parents[2] / "support" / "mcp_server.py")


def test_llm_settings_follow_the_environment_rule() -> None:
    env = {"PEGASUS_LLM__PROVIDER": "openai", "PEGASUS_LLM__BASE_URL": "http://127.0.0.1:11434/v1",
           "PEGASUS_LLM__MODEL": "llama3.1", "PEGASUS_LLM__API_KEY_ENV": '""', "PEGASUS_LLM__TPM": "90000"}
    settings = config.load(environ=env)
    assert (settings.llm.provider, settings.llm.base_url, settings.llm.model) == (
        "openai", "http://127.0.0.1:11434/v1", "llama3.1")
    assert (settings.llm.api_key_env, settings.llm.tpm, settings.llm.rpm) == ("", 90000, 0)
    assert settings.llm.timeout_s == 60.0


@pytest.mark.parametrize("text,key", [
    ("[llm]\nprovider = 'openai'", "llm"),  # no model
    ("[llm]\nprovider = 'anthropic'", "llm.provider"),
    ("[llm]\ntpm = -1", "llm.tpm"),
    ("[tools]\nshell_timeout_s = 0", "tools.shell_timeout_s"),
    ("[[mcp.servers]]\nname = 'x'", "mcp.servers.0: Value error, server 'x': set exactly one of command"),
    ("[[mcp.servers]]\nname = 'x'\ncommand = 'y'\nurl = 'http://h/mcp'", "mcp.servers.0: Value error"),
    ("[[mcp.servers]]\nname = 'x'\nurl = 'ftp://h'", "url must start with http"),
    ("[[mcp.servers]]\nname = 'x'\ncommand = 'y'\nscope = 'host'", "mcp.servers.0.scope"),
    ("[[mcp.servers]]\nname = 'x'\ncommand = 'y'\ntools = { a = 'safe' }", "mcp.servers.0.tools.a"),
    ("[[mcp.servers]]\nname = 'a.b'\ncommand = 'x'", "mcp.servers.0.name"),
    ("[[mcp.servers]]\nname = 'a'\ncommand = 'x'\neffect = 'harmless'", "mcp.servers.0.effect"),
])
def test_bad_llm_tool_and_mcp_values_name_the_key(text: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        config.parse(text)


def test_an_mcp_server_entry_with_defaults() -> None:
    settings = config.parse("[[mcp.servers]]\nname = 'fs'\ncommand = 'npx'\nargs = ['-y', 'server']\n")
    server = settings.mcp.servers[0]
    assert (server.effect, server.timeout_s, server.env, server.args) == ("effectful", 60.0, {}, ["-y", "server"])


def test_the_catalogue_lists_builtins(tmp_path: Path) -> None:
    found = catalogue(config.load(environ={"PEGASUS_HOME": str(tmp_path)}))
    tools = {tool["name"]: tool for tool in found["tools"]}
    assert tools["write_file"]["effect"] == "effectful" and tools["write_file"]["source"] == "builtin"
    assert argument_summary(tools["arithmetic"]["schema"]) == "expression: string (required)"
    assert "shell" not in tools and found["unavailable"] == {}  # off by default


def test_the_catalogue_includes_mcp_tools_and_unavailable_servers(tmp_path: Path) -> None:
    path = tmp_path / "pegasus.toml"
    path.write_text(f"[state]\nhome = {str(tmp_path)!r}\n[tools]\nshell_enabled = true\n"
                    f"[[mcp.servers]]\nname = 'demo'\ncommand = {sys.executable!r}\nargs = [{SERVER!r}]\n"
                    f"effect = 'idempotent'\n"
                    f"[[mcp.servers]]\nname = 'gone'\ncommand = '/no/such/server'\n")
    try:
        data = catalogue(config.load(path))
    finally:
        mcp.close_all()
    tools = {tool["name"]: tool for tool in data["tools"]}
    assert tools["demo.reverse"]["source"] == "mcp:demo" and tools["demo.reverse"]["effect"] == "idempotent"
    assert tools["demo.reverse"]["schema"]["properties"]["text"]["type"] == "string"
    assert tools["shell"]["source"] == "builtin" and tools["shell"]["effect"] == "effectful"
    assert "could not start" in data["unavailable"]["gone"]
