"""Tools the act stage calls: a registry of named, schema-described tools, the
built-ins (arithmetic, list_dir, read_file, count, echo, sleep; write_file and
shell confined to a workspace), the memory tools, configured plugins and MCP servers.

Pure Python, no Thespian: the tool pool's workers call ``ToolRegistry.call``.
"""

from pegasus.tools.builtin import BUILTIN_TOOLS, default_registry, workspace_tools
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import (
    EFFECTS,
    EffectClass,
    Tool,
    ToolArgumentError,
    ToolConfinementError,
    ToolContext,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRefused,
    ToolRegistrationError,
    ToolRegistry,
)

__all__ = [
    "BUILTIN_TOOLS", "EFFECTS", "EffectClass", "Tool", "ToolArgumentError", "ToolConfinementError", "ToolContext",
    "ToolError", "ToolExecutionError", "ToolNotFoundError", "ToolRefused", "ToolRegistrationError", "ToolRegistry",
    "default_registry", "registry_for", "workspace_tools",
]
