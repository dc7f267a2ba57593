"""A package's names loaded when first named (PEP 562): importing a package for one of its modules (or
unpickling a class of one) loads that module alone, not everything the package offers."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def names(package: str, homes: Mapping[str, Iterable[str]],
          submodules: Iterable[str] = ()) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` (its ``__name__``): each name of ``homes`` (a module -> the
    names it holds) is found in its module when first named, then kept in the package; each of ``submodules``
    is the package's module of that name."""
    home_of = {name: module for module, held in homes.items() for name in held}
    modules = frozenset(submodules)
    kept = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        if name in modules:
            return importlib.import_module(f"{package}.{name}")
        module = home_of.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        kept[name] = value  # found once
        return value

    def __dir__() -> list[str]:
        return sorted(set(kept) | set(home_of) | modules)

    return __getattr__, __dir__
