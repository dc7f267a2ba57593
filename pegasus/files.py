"""Private files and directories: the state directory is 0700, everything in it 0600.

Prompts, results, logs and the system key live under the state directory, so
nothing Pegasus writes there may be readable by another user.  Every file and
directory Pegasus creates goes through these helpers (or is created by a process
whose umask is ``PRIVATE_UMASK``).  No Thespian, no actors.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from pegasus.errors import PegasusError

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
PRIVATE_UMASK = 0o077


class StateDirError(PegasusError):
    """The state directory (or a file in it) cannot be made private or belongs to someone else."""


def private_dir(path: Path | str) -> Path:
    """``path`` as an existing directory of this user, mode 0700 (created, or narrowed)."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise StateDirError(f"{path} is not a directory")
    try:
        path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        info = path.stat()
    except OSError as exc:
        raise StateDirError(f"cannot create directory {path}: {exc.strerror}") from None
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"{path} is not a directory")
    if info.st_uid != os.geteuid():
        raise StateDirError(f"directory {path} belongs to uid {info.st_uid}, not to this user ({os.geteuid()})")
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR:
        os.chmod(path, PRIVATE_DIR)
    return path


def open_private(path: Path | str, flags: int = os.O_WRONLY | os.O_APPEND) -> int:
    """A descriptor of ``path`` (created 0600 if missing; an existing file is narrowed to 0600)."""
    fd = os.open(path, flags | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        if stat.S_IMODE(os.fstat(fd).st_mode) != PRIVATE_FILE:
            os.fchmod(fd, PRIVATE_FILE)
    except BaseException:
        os.close(fd)
        raise
    return fd


def write_private(path: Path | str, data: bytes) -> None:
    """Replace ``path`` atomically with ``data``, mode 0600 (readers never see half a file)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, PRIVATE_FILE)
    try:
        os.fchmod(fd, PRIVATE_FILE)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def tighten(root: Path | str) -> None:
    """Narrow an existing tree to 0700 directories and 0600 files (state written by an older Pegasus).

    Symbolic links are left alone, never followed.
    """
    root = Path(root)
    for directory, dirs, names in os.walk(root, followlinks=False):
        for name in dirs:
            _narrow(Path(directory) / name, PRIVATE_DIR)
        for name in names:
            _narrow(Path(directory) / name, PRIVATE_FILE)
    _narrow(root, PRIVATE_DIR)


def _narrow(path: Path, mode: int) -> None:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode) or info.st_uid != os.geteuid():
            return
        if stat.S_IMODE(info.st_mode) != mode:
            os.chmod(path, mode, follow_symlinks=False)
    except (FileNotFoundError, NotImplementedError):
        pass
