"""The registry a system runs with: the built-ins plus configured plugins.

``[tools] plugins`` lists ``"module:function"`` entries; each function is called
with the ToolRegistry and registers its tools.  Every process that needs the
registry (stage workers run tools, task actors read effect classes) builds it
from the same settings, so all agree.
"""

from __future__ import annotations

import importlib
from typing import Any

from pegasus.tools.builtin import default_registry
from pegasus.tools.registry import ToolError, ToolRegistry


def registry_for(settings: dict[str, Any]) -> ToolRegistry:
    """The built-ins and every plugin named in ``settings["tools"]["plugins"]``."""
    registry = default_registry()
    for entry in settings.get("tools", {}).get("plugins", []):
        module_name, _, function_name = str(entry).partition(":")
        try:
            register = getattr(importlib.import_module(module_name), function_name or "register")
        except (ImportError, AttributeError) as exc:
            raise ToolError(None, f"tool plugin {entry!r} cannot be loaded: {exc}") from None
        register(registry)
    return registry
