"""A relative ``PYTHONPATH`` (``PYTHONPATH=. pytest``) names another tree in every process a test starts in another
directory (a CLI's, a system's): there the editable install's tree is imported instead of the one under test."""

from __future__ import annotations

import os


def absolute(value: str, cwd: str) -> str:
    """``value``'s entries each made absolute against ``cwd`` (an empty entry is ``cwd``, as Python reads it)."""
    return os.pathsep.join(os.path.normpath(os.path.join(cwd, entry)) for entry in value.split(os.pathsep))
