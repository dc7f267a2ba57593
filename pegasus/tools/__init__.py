"""Tools the act stage calls: a registry of named, schema-described tools and the
built-ins (arithmetic, list_dir, read_file, count, echo, sleep).

Pure Python, no Thespian: the tool pool's workers call ``ToolRegistry.call``.
"""

from pegasus.tools.builtin import BUILTIN_TOOLS, default_registry
from pegasus.tools.registry import (
    EFFECTS,
    Effect,
    Tool,
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolRegistry,
)

__all__ = [
    "BUILTIN_TOOLS", "EFFECTS", "Effect", "Tool", "ToolArgumentError", "ToolContext", "ToolError",
    "ToolExecutionError", "ToolNotFoundError", "ToolRegistrationError", "ToolRegistry", "default_registry",
]
