"""Every tool a configuration gives, described for a person (``pegasus tools``).

Built-ins, write_file and shell, plugins' tools and the tools of each MCP server, with
where each comes from; an MCP server that cannot be started is named with its reason.
Describing starts each MCP server once, all at the same time (to list its tools), waits at most
``mcp.start_timeout_s`` for each once it runs (its process may take seconds to start on a loaded
machine: SPAWN_MARGIN_S), and ends them all before it returns; nothing else is run.
"""

from __future__ import annotations

from typing import Any

from pegasus.config import Settings
from pegasus.tools.memory import MEMORY_TOOLS
from pegasus.tools import mcp
from pegasus.tools.builtin import BUILTIN_TOOLS
from pegasus.tools.plugins import registry_for

WORKSPACE_TOOLS = frozenset({"write_file", "shell"})
SPAWN_MARGIN_S = 30.0  # a start's own timeout begins once its process runs: waited for, not guessed at


def catalogue(settings: Settings) -> dict[str, Any]:
    """``{"tools": [{name, description, schema, effect, timeout_s, source}], "unavailable": {server: why}}``;
    ``source`` is ``builtin``, ``plugin`` or ``mcp:<server>``."""
    registry = registry_for(settings, retry=False)
    try:
        unavailable = registry.load_providers(settings.mcp.start_timeout_s + SPAWN_MARGIN_S)
        described = registry.describe()
    finally:
        mcp.close_all()  # the servers were started for their listings only: none is left behind
    builtin = {tool.name for tool in BUILTIN_TOOLS} | WORKSPACE_TOOLS | set(MEMORY_TOOLS)
    providers = {provider.name for provider in registry.providers()}
    rows = []
    for entry in described:
        prefix = entry["name"].partition(".")[0]
        source = ("builtin" if entry["name"] in builtin
                  else f"mcp:{prefix}" if "." in entry["name"] and prefix in providers else "plugin")
        rows.append({**entry, "source": source})
    return {"tools": rows, "unavailable": unavailable}


def argument_summary(schema: dict[str, Any]) -> str:
    """``name: type (required)`` for each property of a JSON schema, on one line."""
    required = set(schema.get("required", []))
    parts = []
    for name, prop in (schema.get("properties") or {}).items():
        kind = prop.get("type") or "/".join(str(o.get("type", "?")) for o in prop.get("anyOf", [])) or "any"
        parts.append(f"{name}: {kind}{' (required)' if name in required else ''}")
    return ", ".join(parts) or "(none)"
