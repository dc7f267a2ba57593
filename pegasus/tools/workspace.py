"""Where the file tools may reach: the workspace root, a task's workspace inside it, read_allow.

A task's workspace may only narrow ``workspace_root`` (checked at the tool), except a local client's
task, marked ``LOCAL`` by the supervisor alone, whose workspace is its own root; write_file and the
shell reach the workspace, the read tools it and ``read_allow`` (docs/tools.md, "The workspace").
Every path is opened beneath the directory it must stay in (pegasus.tools.beneath) and the tools
work on the descriptor.  No Thespian, no actors.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pegasus.config import ToolSettings
from pegasus.tools.beneath import EscapeError, open_beneath
from pegasus.tools.registry import ToolConfinementError

_DIR_FLAGS = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY


LOCAL = "workspace_local"  # metadata the supervisor alone sets: a local client's task (see the module docstring)
LOCAL_SOURCES = frozenset({"cli", "python"})  # Submit.source of the clients that hold the system's key
SUB_TASK_SOURCE = "sub_task"


def with_local_mark(metadata: dict[str, Any], source: str) -> dict[str, Any]:
    """``metadata`` as a task of ``source`` keeps it: ``LOCAL`` true for a local client's task, and for a
    sub-task whose parent's was (its tree carries it over), removed from any other."""
    marked = {key: value for key, value in metadata.items() if key != LOCAL}
    if source in LOCAL_SOURCES or (source == SUB_TASK_SOURCE and metadata.get(LOCAL) is True):
        marked[LOCAL] = True
    return marked


class WorkspaceError(ValueError):
    """A task's workspace lies outside the configured root (or is no absolute path)."""


def _inside(path: Path, root: Path) -> bool:
    return path == root or path.is_relative_to(root)


@dataclass(frozen=True)
class Workspace:
    """The confinement ``[tools]`` configures; see the module docstring."""

    root_setting: str
    confine_reads: bool
    read_allow: tuple[str, ...]

    @classmethod
    def of(cls, tools: ToolSettings) -> Workspace:
        """The confinement the ``[tools]`` settings describe."""
        return cls(tools.workspace_root, tools.confine_reads, tuple(tools.read_allow))

    def rooted_at(self, workspace: Path | None) -> Workspace:
        """The confinement of a local client's task: its own workspace is its root (see the module docstring)."""
        return self if workspace is None else replace(self, root_setting=str(workspace))

    def root(self) -> Path:
        """The configured root, absolute and resolved."""
        return Path(self.root_setting or "~").expanduser().resolve()

    def task_dir(self, requested: str | os.PathLike[str] | None) -> Path:
        """The task's workspace: ``requested`` if it lies in the root (None: the root); else WorkspaceError."""
        root = self.root()
        if requested is None or str(requested) == "":
            return root
        path = Path(requested).expanduser()
        if not path.is_absolute():
            raise WorkspaceError(f"the task's workspace must be an absolute path, got {str(requested)!r}")
        resolved = path.resolve()
        if not _inside(resolved, root):
            raise WorkspaceError(f"the task's workspace {path} is outside the workspace root {root} "
                                 f"([tools] workspace_root): refused")
        return resolved

    # -- opening -------------------------------------------------------------------------------
    def shown(self, workspace: Path | None, path: str) -> Path:
        """``path`` as the tools show it: absolute as given, or joined to the task's workspace."""
        given = Path(path).expanduser()
        return given if given.is_absolute() else self.task_dir(workspace) / given

    def open(self, tool: str, workspace: Path | None, path: str, flags: int, mode: int = 0o644, *,
             reading: bool, make_parents: bool = False) -> int:
        """A descriptor of ``path`` (relative to the task's workspace, or absolute).

        ToolConfinementError (a refusal, never retried) when it is outside what ``tool`` may reach;
        OSError as the open fails.
        """
        try:
            base = self.task_dir(workspace)
        except WorkspaceError as exc:
            raise ToolConfinementError(tool, str(exc)) from None
        shown = self.shown(base, path)
        if reading and not self.confine_reads:
            return os.open(shown, flags | os.O_CLOEXEC, mode)
        top, relative = _within(shown, [base, *self._allowed()] if reading else [base])
        if top is None:
            raise ToolConfinementError(tool, f"{shown} is outside the workspace {base}: refused" +
                                       (" (add its directory to [tools] read_allow)" if reading else ""))
        top_fd = self._open_dir(top, base)
        try:
            return open_beneath(top_fd, relative, flags, mode, make_parents=make_parents)
        except EscapeError:
            raise ToolConfinementError(tool, f"{shown} leads outside the workspace {top}: refused") from None
        finally:
            os.close(top_fd)

    def _open_dir(self, top: Path, base: Path) -> int:
        """A descriptor of ``top``: the task's workspace is itself opened beneath the root."""
        if top != base:
            return os.open(top, _DIR_FLAGS | os.O_CLOEXEC)  # a configured read_allow directory
        root = self.root()
        root_fd = os.open(root, _DIR_FLAGS | os.O_CLOEXEC)
        try:
            return open_beneath(root_fd, str(base.relative_to(root)), _DIR_FLAGS)
        finally:
            os.close(root_fd)

    def _allowed(self) -> Iterable[Path]:
        return (Path(p).expanduser().resolve() for p in self.read_allow)


def _within(path: Path, roots: Iterable[Path]) -> tuple[Path | None, str]:
    """The first root ``path`` lies in, compared as written (``..`` included: the open refuses an escape)."""
    for root in roots:
        if _inside(path, root):
            return root, str(path.relative_to(root))
    return None, ""
