"""The tools that touch files: list_dir, read_file, count (read), write_file and shell (workspace).

Each opens its path once, beneath the directory it must stay in (pegasus.tools.workspace), and works
through that descriptor, so a directory swapped for a symlink meanwhile cannot send it elsewhere.
``shell`` runs a command list (never a shell string) in the workspace, in its own process group,
killed at its timeout; it can reach anything the Pegasus user can, hence ``shell_enabled``.
"""

from __future__ import annotations

import codecs
import errno
import os
import signal
import stat
import subprocess
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from pegasus.tools.registry import Tool, ToolArgumentError, ToolContext, ToolExecutionError
from pegasus.tools.workspace import Workspace

MAX_COUNT_BYTES = 64 * 1024 * 1024
READ_BYTES_PER_CHAR = 4  # UTF-8: at most 4 bytes per character
MAX_WRITE_CHARS = 10_000_000
MAX_STREAM_CHARS = 1_000_000  # of each of stdout and stderr kept (the registry then caps the result)
# O_NONBLOCK: a FIFO planted in the workspace must not hang the worker at open (it is then refused).
_READ = os.O_RDONLY | os.O_NONBLOCK
_DIRECTORY = os.O_RDONLY | os.O_DIRECTORY
_PATH_DIRECTORY = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ListDirArgs(_Args):
    path: str = Field(".", description="directory; relative paths start at the workspace")
    max_entries: int = Field(1000, ge=1, le=100_000)


class ReadFileArgs(_Args):
    path: str = Field(min_length=1, description="file; relative paths start at the workspace")
    max_chars: int = Field(100_000, ge=1, le=1_000_000, description="characters to return at most")


CountUnit = Literal["lines", "words", "chars"]
_ALL_UNITS: tuple[CountUnit, ...] = ("lines", "words", "chars")


class CountArgs(_Args):
    path: str | None = Field(None, description="a text file to count (give path or text)")
    text: str | None = Field(None, description="text to count (give path or text)")
    units: list[CountUnit] = Field(default_factory=lambda: list(_ALL_UNITS), min_length=1)

    @model_validator(mode="after")
    def _one_source(self) -> CountArgs:
        if (self.path is None) == (self.text is None):
            raise ValueError("give exactly one of path or text")
        return self


class WriteFileArgs(_Args):
    path: str = Field(min_length=1, description="file inside the workspace; relative paths start at the workspace")
    content: str = Field(max_length=MAX_WRITE_CHARS, description="UTF-8 text to write")
    append: bool = Field(False, description="add to the end instead of replacing the file")
    create_dirs: bool = Field(False, description="create missing parent directories")


class ShellArgs(_Args):
    command: list[str] = Field(min_length=1, description="the program and its arguments; no shell: pipes, "
                                                          "globs and $VARIABLES are not interpreted")
    cwd: str = Field(".", description="working directory, inside the workspace")
    timeout_s: float | None = Field(None, gt=0, description="at most the configured shell_timeout_s")


# -- opening --------------------------------------------------------------------------------------


def _open(space: Workspace, tool: str, ctx: ToolContext, path: str, flags: int, *, reading: bool = True,
          make_parents: bool = False, mode: int = 0o644) -> tuple[int, Path]:
    """(descriptor, path shown) of ``path`` as ``tool`` may open it; the OS error in the user's words."""
    space = space.rooted_at(ctx.workspace) if ctx.local else space
    fd = -1
    try:
        fd = space.open(tool, ctx.workspace, path, flags, mode, reading=reading, make_parents=make_parents)
    except OSError as exc:
        shown = space.shown(ctx.workspace, path)
        directory = flags & os.O_DIRECTORY
        if exc.errno == errno.ENOENT:
            if reading:
                raise ToolExecutionError(tool, f"no such {'directory' if directory else 'file'}: {shown}") from None
            raise ToolExecutionError(tool, f"no such directory: {shown.parent} (set create_dirs)") from None
        if exc.errno == errno.ENOTDIR and directory:
            raise ToolExecutionError(tool, f"{shown} is a file, not a directory (use read_file)") from None
        if exc.errno == errno.EISDIR:
            raise ToolExecutionError(tool, f"{shown} is a directory") from None
        verb = "read" if reading else "write"
        raise ToolExecutionError(tool, f"cannot {verb} {shown}: {exc.strerror or exc}") from None
    return fd, space.shown(ctx.workspace, path)


def _regular(tool: str, fd: int, shown: Path) -> int:
    """The size of the regular file open as ``fd``; ToolExecutionError for a directory or a device."""
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ToolExecutionError(tool, f"{shown} is a directory, not a file (use list_dir)")
    if not stat.S_ISREG(info.st_mode):
        raise ToolExecutionError(tool, f"{shown} is not a regular file")
    return info.st_size


# -- reading --------------------------------------------------------------------------------------


def _list_dir(space: Workspace, args: ListDirArgs, ctx: ToolContext) -> dict[str, Any]:
    fd, shown = _open(space, "list_dir", ctx, args.path, _DIRECTORY)
    try:
        with os.scandir(fd) as scan:  # the directory opened, not the path
            # A symlink is listed without following it: its target may be outside.
            entries = sorted(entry.name + ("/" if entry.is_dir(follow_symlinks=False) else "") for entry in scan)
    except OSError as exc:
        raise ToolExecutionError("list_dir", f"cannot read {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return {"path": str(shown), "entries": entries[: args.max_entries], "total": len(entries),
            "truncated": len(entries) > args.max_entries}


def _text_file(space: Workspace, tool: str, ctx: ToolContext, path: str, max_bytes: int) -> tuple[str, int, Path]:
    """The start of a UTF-8 text file (at most ``max_bytes``), its size in bytes, and its path shown."""
    fd, shown = _open(space, tool, ctx, path, _READ)
    try:
        size = _regular(tool, fd, shown)
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes)
    except OSError as exc:
        raise ToolExecutionError(tool, f"cannot read {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        if b"\x00" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
        # Incremental decoding: a character cut by max_bytes is not an error.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=len(data) >= size)
    except UnicodeDecodeError:
        raise ToolExecutionError(tool, f"{shown} looks like a binary file (not UTF-8 text)") from None
    return text, size, shown


def _read_file(space: Workspace, args: ReadFileArgs, ctx: ToolContext) -> str:
    text, size, _ = _text_file(space, "read_file", ctx, args.path, args.max_chars * READ_BYTES_PER_CHAR)
    if len(text) > args.max_chars or len(text.encode()) < size:
        shown = text[: args.max_chars]
        return f"{shown}\n[file truncated: showing the first {len(shown)} characters of {size} bytes]"
    return text


def _count(space: Workspace, args: CountArgs, ctx: ToolContext) -> dict[str, Any]:
    if args.path is not None:
        text, size, shown = _text_file(space, "count", ctx, args.path, MAX_COUNT_BYTES + 1)
        if size > MAX_COUNT_BYTES:
            raise ToolExecutionError("count", f"{shown} is too large to count ({size} bytes)")
    else:
        text = args.text or ""
    counts = {"lines": len(text.splitlines()), "words": len(text.split()), "chars": len(text)}
    return {unit: counts[unit] for unit in args.units}


def read_tools(space: Workspace) -> tuple[Tool, ...]:
    """list_dir, read_file and count, reaching what ``space`` lets them read."""
    confined = " Confined to the workspace." if space.confine_reads else ""
    return (
        Tool("list_dir", "List the entries of a directory (sub-directories end with '/')." + confined,
             ListDirArgs, "idempotent", 10.0, lambda args, ctx: _list_dir(space, args, ctx)),
        Tool("read_file", "Read a UTF-8 text file (long files are cut, binary files refused)." + confined,
             ReadFileArgs, "pure", 10.0, lambda args, ctx: _read_file(space, args, ctx)),
        Tool("count", "Count the lines, words and characters of a text file or of given text." + confined,
             CountArgs, "pure", 30.0, lambda args, ctx: _count(space, args, ctx)),
    )


# -- writing and running --------------------------------------------------------------------------


def _write_file(space: Workspace, args: WriteFileArgs, ctx: ToolContext) -> dict[str, Any]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | (os.O_APPEND if args.append else 0)
    fd, shown = _open(space, "write_file", ctx, args.path, flags, reading=False, make_parents=args.create_dirs)
    data = args.content.encode("utf-8")
    try:
        _regular("write_file", fd, shown)
        if not args.append:
            os.ftruncate(fd, 0)  # after the check: a device or FIFO is never truncated
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        raise ToolExecutionError("write_file", f"cannot write {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    return {"path": str(shown), "bytes": len(data), "appended": args.append}


def _stream(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_STREAM_CHARS:
        return text[:MAX_STREAM_CHARS] + f"\n[stream truncated: {len(text) - MAX_STREAM_CHARS} characters cut]"
    return text


def _shell(space: Workspace, args: ShellArgs, ctx: ToolContext, limit_s: float) -> dict[str, Any]:
    if args.timeout_s is not None and args.timeout_s > limit_s:  # refused, never cut silently
        raise ToolArgumentError("shell", ["timeout_s"], f"tool 'shell': bad argument(s) timeout_s: "
                                f"{args.timeout_s:g} s is over the configured shell_timeout_s ({limit_s:g} s)")
    fd, _ = _open(space, "shell", ctx, args.cwd, _PATH_DIRECTORY, reading=False)
    timeout = args.timeout_s or limit_s
    try:
        # The child changes into the directory opened (its inherited descriptor), not into a path.
        process = subprocess.Popen(args.command, cwd=f"/proc/self/fd/{fd}", stdin=subprocess.DEVNULL,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError:
        raise ToolExecutionError("shell", f"no such program: {args.command[0]}") from None
    except OSError as exc:
        raise ToolExecutionError("shell", f"cannot run {args.command[0]}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    try:
        out, err = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the command and anything it started
        except ProcessLookupError:
            pass
        process.communicate()
        raise ToolExecutionError("shell", f"{args.command[0]} timed out after {timeout:g}s (killed)") from None
    return {"returncode": process.returncode, "stdout": _stream(out), "stderr": _stream(err)}


def _shell_args(limit_s: float) -> type[ShellArgs]:
    """ShellArgs whose schema holds the configured limit: a longer timeout_s is refused, not cut."""
    return create_model("ShellArgs", __base__=ShellArgs,
                        timeout_s=(float | None, Field(None, gt=0, le=limit_s, description=f"at most {limit_s:g} s")))


def write_tools(space: Workspace, *, shell_enabled: bool, shell_timeout_s: float) -> tuple[Tool, ...]:
    """write_file (and shell when enabled), reaching only the task's workspace."""
    tools = [Tool("write_file", "Write (or append) UTF-8 text to a file inside the workspace.", WriteFileArgs,
                  "effectful", 10.0, lambda args, ctx: _write_file(space, args, ctx))]
    if shell_enabled:
        tools.append(Tool("shell", f"Run a command (a list: program and arguments, no shell) in the workspace; "
                                   f"at most {shell_timeout_s:g}s. Returns returncode, stdout and stderr.",
                          _shell_args(shell_timeout_s), "effectful", shell_timeout_s + 5.0,
                          lambda args, ctx: _shell(space, args, ctx, shell_timeout_s)))
    return tuple(tools)
