"""Open a path inside a directory without ever leaving it, even while the tree changes underneath.

Checking a resolved path and then opening it is a race (docs/tools.md), so the path is resolved
against a descriptor of the root and the caller works on the descriptor returned: ``openat2`` with
``RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`` (Linux 5.6+, through ctypes) where it serves, else a
walk of one component at a time with ``O_NOFOLLOW``, following a symlink itself only while it stays
inside the root.  No Thespian, no actors.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from collections import deque

RESOLVE_NO_MAGICLINKS = 0x02
RESOLVE_BENEATH = 0x08
_OPENAT2 = {"x86_64": 437, "aarch64": 437}.get(platform.machine())  # syscall number; same on both
MAX_LINKS = 40  # the kernel's own limit on symlinks in one resolution
_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)


class EscapeError(OSError):
    """The path, or a symlink in it, leads outside the root."""

    def __init__(self, path: str) -> None:
        super().__init__(errno.EXDEV, "leads outside the root", path)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


_libc = ctypes.CDLL(None, use_errno=True) if _OPENAT2 is not None else None
_openat2_works: bool | None = None  # probed on first use (a seccomp filter may refuse it)


def _openat2(dir_fd: int, path: str, flags: int, mode: int) -> int:
    assert _libc is not None and _OPENAT2 is not None
    tmpfile = getattr(os, "O_TMPFILE", 0)  # it includes O_DIRECTORY's bit: test it whole
    creating = flags & os.O_CREAT or (tmpfile and flags & tmpfile == tmpfile)
    how = _OpenHow(flags | os.O_CLOEXEC, mode if creating else 0, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)
    fd = _libc.syscall(_OPENAT2, ctypes.c_int(dir_fd), ctypes.c_char_p(os.fsencode(path or ".")),
                       ctypes.byref(how), ctypes.c_size_t(ctypes.sizeof(how)))
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return int(fd)


def _has_openat2() -> bool:
    global _openat2_works
    if _openat2_works is None:
        _openat2_works = False
        if _libc is not None:
            root = os.open("/", _O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.close(_openat2(root, ".", _O_PATH | os.O_DIRECTORY, 0))
                _openat2_works = True
            except OSError:
                pass
            finally:
                os.close(root)
    return _openat2_works


def open_beneath(root_fd: int, path: str, flags: int, mode: int = 0o644, *, make_parents: bool = False) -> int:
    """A descriptor of ``path`` (relative) resolved inside the directory ``root_fd``.

    EscapeError when the path or a symlink on it leads outside; the usual OSError
    otherwise (ENOENT, ENOTDIR, EISDIR, ...).  ``make_parents`` creates missing
    directories on the way (0777 less the umask).
    """
    if os.path.normpath(path).split("/")[0] == "..":  # refused as written, before any missing directory
        raise EscapeError(path)
    if _has_openat2():
        try:
            return _openat2(root_fd, path, flags, mode)
        except OSError as exc:
            # EXDEV: it tried to leave (an absolute symlink may still point inside: the walk
            # decides); EAGAIN: a rename raced the lookup; ENOENT: the walk may create parents.
            if exc.errno not in (errno.EXDEV, errno.EAGAIN, errno.ELOOP) and not (
                    exc.errno == errno.ENOENT and make_parents):
                raise
    return _walk(root_fd, path, flags, mode, make_parents)


def _parts(path: str) -> list[str]:
    return [part for part in path.split("/") if part not in ("", ".")]


def _walk(root_fd: int, path: str, flags: int, mode: int, make_parents: bool) -> int:
    root_real = os.readlink(f"/proc/self/fd/{root_fd}") if os.path.isdir("/proc/self/fd") else None
    pending = deque(_parts(path))
    dirs = [os.dup(root_fd)]  # descriptors from the root down to the directory reached
    links = 0
    try:
        while pending:
            name = pending.popleft()
            if name == "..":
                if len(dirs) == 1:
                    raise EscapeError(path)
                os.close(dirs.pop())
                continue
            try:
                if not pending:  # the last component: what the caller asked for
                    return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dirs[-1])
                dirs.append(os.open(name, _O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dirs[-1]))
                continue
            except OSError as exc:
                if exc.errno == errno.ENOENT and make_parents and pending:
                    try:
                        os.mkdir(name, 0o777, dir_fd=dirs[-1])
                    except FileExistsError:
                        pass  # made meanwhile: open it again
                    pending.appendleft(name)
                    continue
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                try:  # a symlink (ELOOP; ENOTDIR when opened as a directory)? else the error stands
                    target = os.readlink(name, dir_fd=dirs[-1])
                except OSError:
                    raise exc from None
            links += 1
            if links > MAX_LINKS:
                raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
            if target.startswith("/"):  # absolute: followed only while it names a place inside the root
                if root_real is None or not (target == root_real or target.startswith(root_real.rstrip("/") + "/")):
                    raise EscapeError(path)
                target = target[len(root_real):]
                while len(dirs) > 1:
                    os.close(dirs.pop())
            pending.extendleft(reversed(_parts(target)))
        return os.open(".", flags | os.O_CLOEXEC, mode, dir_fd=dirs[-1])  # the path named a directory reached
    finally:
        for fd in dirs:
            os.close(fd)
