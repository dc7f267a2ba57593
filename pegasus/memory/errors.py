"""The memory store's errors: one root, each carrying what a caller (the CLI, a tool step, the reflector) shows."""

from __future__ import annotations

from typing import Any

from pegasus.errors import PegasusError


class MemoryStoreError(PegasusError):
    """Root of the memory errors (not Python's MemoryError: nothing here is about RAM)."""

    def __reduce__(self) -> tuple[Any, ...]:  # picklable whatever the subclass's __init__ takes
        return (MemoryStoreError, (str(self),))


class BadMemoryPath(MemoryStoreError):
    """A fact path that breaks the path rules (pegasus.memory.values.check_path)."""


class MemoryNotFound(MemoryStoreError):
    """No fact, episode or archived task of that id or path."""

    def __init__(self, item_id: str, hint: str = "") -> None:
        self.item_id = item_id
        super().__init__(f"no memory {item_id!r}" + (f": {hint}" if hint else ""))


class MemoryCapExceeded(MemoryStoreError):
    """A write past a cap of ``[memory]``; names the cap's config key."""

    def __init__(self, cap_key: str, limit: int, needed: int, what: str) -> None:
        self.cap_key, self.limit, self.needed = cap_key, limit, needed
        super().__init__(f"{what} refused: it needs {needed} and [memory] {cap_key} is {limit} "
                         f"(forget something with `pegasus memory forget`, or raise {cap_key})")


class MemoryFormatError(MemoryStoreError):
    """An imported Markdown file that does not read as memory; names the file and the line."""

    def __init__(self, file: str, line: int, problem: str) -> None:
        self.file, self.line = file, line
        super().__init__(f"{file}:{line}: {problem}")
