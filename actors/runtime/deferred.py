"""What a system's processes need not load: ``importlib.metadata`` (with email, csv and their kin, ~2 MiB).

The launcher imports this before anything else: every process of the system is forked from it.  pydantic's plugin
loader imports ``importlib.metadata`` with its first model and scans every installed distribution for plugins; the
system's processes run with pydantic's plugins off (``PYDANTIC_DISABLE_PLUGINS``, unless set: docs/memory.md), so
the module is a stand-in that loads the real one on its first attribute read.  Test: tests/actors/runtime/
test_deferred.py, and tests/integration/test_lean_imports.py on a real system.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import threading
import types
from typing import Any

PLUGINS_ENV = "PYDANTIC_DISABLE_PLUGINS"
DEFERRED = "importlib.metadata"
_swap = threading.Lock()


class _OnFirstUse(types.ModuleType):
    """Stands in ``sys.modules`` for a module not loaded yet; its first missing attribute loads it.

    Not the standard library's ``LazyLoader``: in Python 3.11 a second ``import`` of a lazy module reads its
    ``__spec__`` and so loads it, and pydantic imports it that way."""

    def __getattr__(self, name: str) -> Any:
        with _swap:  # one thread loads it; another reading meanwhile waits, then reads the real one
            if sys.modules.get(self.__name__) is self:
                del sys.modules[self.__name__]
                try:
                    real = importlib.import_module(self.__name__)
                except BaseException:
                    sys.modules[self.__name__] = self
                    raise
                self.__dict__.update({key: value for key, value in vars(real).items() if key != "__spec__"})
        return getattr(importlib.import_module(self.__name__), name)


def plugins_off() -> None:
    """pydantic's plugins off (its search reads every installed distribution) unless the environment says otherwise."""
    os.environ.setdefault(PLUGINS_ENV, "__all__")


def defer_metadata() -> None:
    """Turn pydantic's plugins off, and stand ``importlib.metadata`` in for itself until something reads it.
    Before any pydantic model is built."""
    plugins_off()
    if DEFERRED in sys.modules or (spec := importlib.util.find_spec(DEFERRED)) is None:
        return
    stand_in = _OnFirstUse(DEFERRED)
    stand_in.__spec__, stand_in.__path__ = spec, list(spec.submodule_search_locations or [])
    sys.modules[DEFERRED] = stand_in
