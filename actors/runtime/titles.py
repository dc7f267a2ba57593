"""Process titles in ``ps``: ``pegasus: supervisor [~/.pegasus]`` rather than ``python3 -P -c from ...``.

``install`` replaces Thespian's ``setProcName`` in the two modules that call it; an actor that
learns more later (a worker: its pool and index) calls ``set_title``.  If Thespian's names move,
processes keep Thespian's titles (a warning says so) and nothing else changes.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import warnings
from pathlib import Path

from setproctitle import setproctitle

# Thespian's class (or process) name -> the role a person reads.
ROLES = {"MultiProcAdmin": "admin", "logger": "logger", "Guardian": "guardian", "Supervisor": "supervisor",
         "StagePool": "pool", "StageWorker": "worker", "TaskActor": "task actor"}
_THESPIAN_CALLERS = ("thespian.system.multiprocCommon", "thespian.system.logdirector")


def home_label(state_dir: str | os.PathLike[str]) -> str:
    """The state directory as a person writes it: ``~/.pegasus`` under the home directory."""
    path = str(state_dir)
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home):]
    return path


def title(role: str, state_dir: str | os.PathLike[str] | None = None) -> str:
    return f"pegasus: {role}" + (f" [{home_label(state_dir)}]" if state_dir else "")


_system: tuple[int, Path] | None = None  # (admin port, state directory), set by install, inherited by forks


def set_title(role: str) -> None:
    """Title this actor's process, when it is one of a system's own: forked from where ``install`` ran
    (never the process of a simpleSystemBase, a test run's)."""
    if _system is not None and multiprocessing.parent_process() is not None:
        setproctitle(title(role, _system[1]))


def set_launcher_title(state_dir: Path) -> None:
    setproctitle(title("launcher", state_dir))


def install(admin_port: int, state_dir: Path) -> None:
    """Title every process Thespian starts from here on (this process's forks): see the module docstring."""
    global _system
    _system = (admin_port, state_dir)

    def set_proc_name(name: str, address: object) -> None:
        role = ROLES.get(name, name)
        set_title(f"admin :{admin_port}" if role == "admin" else role)

    for module_name in _THESPIAN_CALLERS:
        module = importlib.import_module(module_name)
        if not callable(getattr(module, "setProcName", None)):
            warnings.warn(f"{module_name}.setProcName is gone: processes keep Thespian's titles", stacklevel=2)
            continue
        module.setProcName = set_proc_name  # type: ignore[attr-defined]
