"""One log file that many processes append to, rotated by size without losing or tearing a line.

Under a ``flock`` of a lock file beside the log, a writer checks that its descriptor is still the
path's (another process may have rotated), rotates when its line would pass ``max_bytes``
(``.1``, ``.2`` ... up to ``backups``), and writes the line with one ``write`` on O_APPEND: every
line lands whole in the current file.  Hand-written because stdlib's RotatingFileHandler is for
one process.  Files are 0600 in a 0700 directory (pegasus.files).  No Thespian, no actors.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from pegasus.files import open_private, private_dir


class SharedLogFile:
    """Appends whole lines to ``path``; rotates it at ``max_bytes``, keeping ``backups`` older files."""

    def __init__(self, path: Path | str, *, max_bytes: int, backups: int) -> None:
        if max_bytes < 1 or backups < 1:
            raise ValueError("max_bytes and backups must be at least 1")
        self.path = Path(path)
        self.max_bytes, self.backups = max_bytes, backups
        private_dir(self.path.parent)
        self._pid = -1
        self._fd = self._lock_fd = -1
        self._inode: tuple[int, int] = (0, 0)

    def write_line(self, line: str) -> None:
        """Append ``line`` and a newline, in one write, rotating first when the file is full."""
        data = line.encode("utf-8", errors="replace") + b"\n"
        if self._pid != os.getpid():
            self._open_for_this_process()
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
        try:
            self._follow()
            size = os.fstat(self._fd).st_size
            if size and size + len(data) > self.max_bytes:  # a line longer than max_bytes still goes
                self._rotate()
            _write_all(self._fd, data)
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def files(self) -> list[Path]:
        """The log and its rotated copies that exist, newest first."""
        names = [self.path] + [self._backup(n) for n in range(1, self.backups + 1)]
        return [path for path in names if path.exists()]

    def close(self) -> None:
        for fd in (self._fd, self._lock_fd):
            if fd >= 0 and self._pid == os.getpid():
                os.close(fd)
        self._fd = self._lock_fd = -1
        self._pid = -1

    # -- inside ------------------------------------------------------------------------------------
    def _open_for_this_process(self) -> None:
        """Own descriptors: a forked child shares its parent's, and with them the parent's flock."""
        self._lock_fd = open_private(self.path.with_name(self.path.name + ".lock"), os.O_RDWR)
        self._fd = -1
        self._pid = os.getpid()
        self._reopen()

    def _reopen(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
        self._fd = open_private(self.path, os.O_WRONLY | os.O_APPEND)
        info = os.fstat(self._fd)
        self._inode = (info.st_dev, info.st_ino)

    def _follow(self) -> None:
        """Reopen the path when it is not the file this process has open (rotated, or deleted)."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            self._reopen()
            return
        if (info.st_dev, info.st_ino) != self._inode:
            self._reopen()

    def _rotate(self) -> None:
        """pegasus.jsonl -> .1 -> .2 ... (the oldest past ``backups`` replaced); a new file.  Lock held."""
        for number in range(self.backups - 1, 0, -1):
            older = self._backup(number)
            if older.exists():
                os.replace(older, self._backup(number + 1))
        os.replace(self.path, self._backup(1))
        self._reopen()

    def _backup(self, number: int) -> Path:
        return self.path.with_name(f"{self.path.name}.{number}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
