"""The registry a system runs with: the built-ins, write_file and shell as ``[tools]`` configures
them, configured plugins, and the tools of the ``[[mcp.servers]]``.

Each ``[tools] plugins`` entry (``"module:function"``) registers its tools; ``preflight`` loads them
before a start, so a bad one stops it by name.  MCP servers start only when one of their tools is
needed, so building a registry stays cheap, and every process builds it from the same settings.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING

from pegasus.config import Settings
from pegasus.tools import memory as memory_tools
from pegasus.files import StateDirError, private_dir
from pegasus.tools.builtin import workspace_tools
from pegasus.tools.mcp_provider import LocalSource, McpProvider, RemoteSource
from pegasus.tools.registry import ToolError, ToolRegistry

if TYPE_CHECKING:
    from pegasus.tools.mcp import McpServerSpec


def _log_dir(settings: Settings) -> Path | None:
    """``<state dir>/logs`` (MCP servers' stderr goes there), or None when it cannot be made."""
    try:
        return private_dir(settings.logs_dir())
    except (OSError, StateDirError):
        return None


def _load_plugin(entry: str, registry: ToolRegistry) -> None:
    """Import ``module:function`` and let it register its tools; ToolError naming the entry and the error."""
    module_name, _, function_name = entry.partition(":")
    try:  # any exception: a plugin's import runs arbitrary code (SyntaxError, RuntimeError, ...)
        register = getattr(importlib.import_module(module_name), function_name or "register")
    except Exception as exc:  # noqa: BLE001
        raise ToolError(None, f"tool plugin {entry!r} cannot be loaded: {type(exc).__name__}: {exc}") from None
    try:
        register(registry)
    except Exception as exc:  # noqa: BLE001
        raise ToolError(None, f"tool plugin {entry!r} failed to register its tools: "
                              f"{type(exc).__name__}: {exc}") from None


def preflight(settings: Settings) -> None:
    """Build the registry ``settings`` configure, before any process is started for it.

    An unloadable plugin otherwise lets a system start whose every stage worker
    then fails: the ToolError names the plugin and its error.
    MCP servers are not started here (they are listed on first need).
    """
    registry_for(settings)


def mcp_specs(settings: Settings) -> list[McpServerSpec]:
    if not settings.mcp.servers:
        return []
    # Imported here: the MCP client stack (asyncio, ssl) is for systems with servers (docs/memory.md).
    from pegasus.tools.mcp import McpServerSpec  # noqa: PLC0415

    return McpServerSpec.from_settings(settings.mcp, _log_dir(settings))


def registry_for(settings: Settings, remote: RemoteSource | None = None, *, retry: bool = True) -> ToolRegistry:
    """The tools ``settings`` configure: built-ins, write_file, shell, plugins and MCP servers.

    ``remote``: where the ``scope = "machine"`` servers are (the machine's MCP host actor, in a
    worker or task actor); without it every server runs in this process, on first need.
    ``retry=False``: a server that failed is not started again (``pegasus tools``).
    """
    tools = settings.tools
    registry = ToolRegistry(workspace_tools(tools), max_output_chars=tools.max_output_chars)
    memory_tools.register(registry)  # listed and classified everywhere; run by the supervisor (PoolName.MEMORY)
    for entry in tools.plugins:
        _load_plugin(entry, registry)
    specs = mcp_specs(settings)
    local = [spec for spec in specs if remote is None or spec.scope == "worker"]
    host = None
    if local:
        from pegasus.tools.mcp import host_for  # noqa: PLC0415 - as in mcp_specs

        host = host_for(local, retry=retry)
    for spec in specs:
        source = LocalSource(host) if host is not None and spec in local else remote
        assert source is not None
        registry.add_provider(McpProvider(spec, source))
    return registry
