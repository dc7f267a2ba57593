"""The agent's identity: its name, role and standing instructions, given to every think / reason stage.

From ``[agent]`` in the config, unless ``<state dir>/identity.md`` exists: then
that Markdown file is the identity, whole (a person edits it like any note).
The file is an instruction to the model, so it is read only when it is this
user's and no one else may write it (otherwise another account could steer the
agent); a bad file is a clear error, never silently skipped.
"""

from __future__ import annotations

import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pegasus.config import AgentSettings, Settings
from pegasus.memory.errors import MemoryStoreError

IDENTITY_FILE = "identity.md"
IDENTITY_MAX_BYTES = 16384  # it goes into every think / reason prompt
CONFIG_SOURCE = "config [agent]"


@dataclass(frozen=True)
class Identity:
    text: str
    source: str  # CONFIG_SOURCE or the file's path

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def identity_of(agent: AgentSettings, file_text: str | None, file_path: str = "") -> Identity:
    """The identity: ``file_text`` when there is one (it wins), else the ``[agent]`` settings as Markdown."""
    if file_text is not None:
        return Identity(file_text.strip(), file_path or IDENTITY_FILE)
    lines = [f"You are {agent.name}" + (f", {agent.role}." if agent.role else ".")]
    if agent.instructions:
        lines += ["", agent.instructions.strip()]
    return Identity("\n".join(lines), CONFIG_SOURCE)


def read_identity_file(path: Path) -> str | None:
    """The file's text; None when it does not exist.  Refused (MemoryStoreError) when another user owns it, group
    or others may write it, it is not a regular file, too long, or not UTF-8."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(info.st_mode):
        raise MemoryStoreError(f"{path} is not a regular file (a symbolic link is not followed)")
    if info.st_uid != os.geteuid():
        raise MemoryStoreError(f"{path} belongs to uid {info.st_uid}, not to this user: not read")
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise MemoryStoreError(f"{path} may be written by other users (mode {stat.S_IMODE(info.st_mode):o}): "
                               f"`chmod 600 {path}` to use it")
    if info.st_size > IDENTITY_MAX_BYTES:
        raise MemoryStoreError(f"{path} is {info.st_size} bytes; at most {IDENTITY_MAX_BYTES} (it goes in every "
                               "prompt)")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryStoreError(f"{path} is not UTF-8 text (byte {exc.start})") from None


def load_identity(settings: Settings) -> Identity:
    """The identity of the system ``settings`` describe (reads the state directory's file)."""
    path = settings.state_dir() / IDENTITY_FILE
    return identity_of(settings.agent, read_identity_file(path), str(path))
