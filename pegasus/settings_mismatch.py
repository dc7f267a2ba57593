"""No silent mismatch: the settings a command was given that the running system does not have, in
what changes a task it submits (the model, its endpoint, the tools).

A task runs with the settings of the system it is submitted to, not the command's.
``differences(own, running)`` names each setting the command sets (unlike the defaults) to another
value than the system's, and the command refuses (``refusal``), saying how to apply it; a setting
left at its default is the system's to choose.  Pure: settings in, text out.
"""

from __future__ import annotations

from typing import Any

from pegasus.config import Settings

# What changes a task: the model and its endpoint, and the tools (built-in reach, plugins, MCP servers).
TASK_SETTINGS = ("llm.provider", "llm.model", "llm.base_url", "llm.api_key_env", "llm.tiers", "llm.stages",
                 "tools.plugins", "tools.workspace_root", "tools.confine_reads", "tools.read_allow",
                 "tools.shell_enabled", "tools.shell_timeout_s", "mcp.servers")


def _value(settings: Settings, dotted: str) -> Any:
    section, key = dotted.split(".")
    value = getattr(getattr(settings, section), key)
    if isinstance(value, list):
        return [item.model_dump() if hasattr(item, "model_dump") else item for item in value]
    if isinstance(value, dict):
        return {k: v.model_dump() if hasattr(v, "model_dump") else v for k, v in value.items()}
    return value


def differences(own: Settings, running: Settings) -> list[tuple[str, Any, Any]]:
    """(setting, the command's value, the system's) for each task setting the command sets otherwise."""
    default = Settings()
    found = []
    for dotted in TASK_SETTINGS:
        mine, theirs = _value(own, dotted), _value(running, dotted)
        if mine != _value(default, dotted) and mine != theirs:
            found.append((dotted, mine, theirs))
    return found


def refusal(found: list[tuple[str, Any, Any]], port: int) -> str:
    """One line: what differs, and how to apply it (or to go without it)."""
    named = "; ".join(f"{name} is {mine!r} here, {theirs!r} in the system" for name, mine, theirs in found)
    return (f"this command's settings differ from those of the system running on port {port}, which its tasks "
            f"would run with: {named}. To apply them, restart the system with them (pegasus stop, then pegasus "
            f"start with the same settings); to use the system's, run the command without them")
