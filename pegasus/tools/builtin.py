"""The built-in tools: arithmetic, list_dir, read_file, count, echo and sleep (``BUILTIN_TOOLS``,
read-only), plus write_file and shell (``workspace_tools``, built from ``[tools]`` settings).

Each is a pydantic argument model plus a function ``(args, ctx) -> JSON-able``.
The read-only set neither writes nor talks to the network.  Errors are raised as
ToolExecutionError with a message meant for the user ("no such file:
/x/README.md"), because the message ends up in the task's answer.

Confinement: ``write_file`` (always), the shell's working directory (always) and
the read tools (with ``confine_reads``) only reach paths inside the workspace
root (``[tools] workspace_root``, else the task's workspace).  A path is judged
after resolving ``..`` and every symlink, so ``../x``, an absolute path elsewhere
and a symlink that points out are all refused; the file is then opened with
O_NOFOLLOW, so a symlink swapped in after the check is refused too.  ``shell``
exists only with ``shell_enabled``: it runs a command list (never a shell
string), in its own process group, killed at its timeout.

``arithmetic`` evaluates with the ``ast`` module, never ``eval``: only numbers,
``+ - * / // % **``, unary signs and parentheses are accepted, and every
intermediate result is bounded so that ``9**9**9`` is refused instead of
eating the machine.
"""

from __future__ import annotations

import ast
import codecs
import math
import operator
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from pegasus.tools.registry import Tool, ToolContext, ToolExecutionError, ToolRegistry

MAX_EXPRESSION_CHARS = 500
MAX_RESULT_BITS = 4096  # about 1200 decimal digits
INT64_MAX = 2**63 - 1  # beyond it an int is returned as a string: msgpack cannot carry it
MAX_SLEEP_S = 60.0
MAX_COUNT_BYTES = 64 * 1024 * 1024
READ_BYTES_PER_CHAR = 4  # UTF-8: at most 4 bytes per character


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# -- arithmetic -----------------------------------------------------------------------


class ArithmeticArgs(_Args):
    expression: str = Field(min_length=1, max_length=MAX_EXPRESSION_CHARS,
                            description="numbers, + - * / // % **, unary signs and parentheses")


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _refuse(message: str) -> ToolExecutionError:
    return ToolExecutionError("arithmetic", message)


def parse_expression(expression: str) -> ast.expr:
    """The checked syntax tree of ``expression``; ToolExecutionError for anything but arithmetic."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise _refuse(f"expression longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise _refuse(f"not an arithmetic expression: {expression!r}") from None
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise _refuse(f"only numbers are allowed, not {node.value!r}")
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _BINARY:
                raise _refuse(f"operator {type(node.op).__name__} is not allowed")
        elif isinstance(node, ast.UnaryOp):
            if type(node.op) not in _UNARY:
                raise _refuse(f"operator {type(node.op).__name__} is not allowed")
        elif not isinstance(node, (ast.operator, ast.unaryop)):
            what = {ast.Name: "names are", ast.Call: "function calls are",
                    ast.Attribute: "attribute access is"}.get(type(node), f"{type(node).__name__} is")
            raise _refuse(f"{what} not allowed in arithmetic (only numbers and + - * / // % **)")
    return tree


def is_expression(text: str) -> bool:
    """Whether ``text`` is arithmetic with at least one binary operator (used by the perceiver)."""
    try:
        tree = parse_expression(text)
    except ToolExecutionError:
        return False
    return any(isinstance(node, ast.BinOp) for node in ast.walk(tree))


def _bits(value: int | float) -> float:
    return math.log2(abs(value)) if value else 0.0


def _apply(op: ast.operator, left: int | float, right: int | float) -> int | float:
    if isinstance(op, ast.Pow):
        if right > 0 and abs(left) > 1 and right * _bits(left) > MAX_RESULT_BITS:
            raise _refuse(f"result of {left!r} ** {right!r} would be too large (over {MAX_RESULT_BITS} bits)")
    elif isinstance(op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
        if left.bit_length() + right.bit_length() > MAX_RESULT_BITS + 1:
            raise _refuse(f"result would be too large (over {MAX_RESULT_BITS} bits)")
    try:
        result = _BINARY[type(op)](left, right)
    except ZeroDivisionError:
        raise _refuse("division by zero") from None
    except OverflowError:
        raise _refuse("result too large for a floating-point number") from None
    if isinstance(result, complex):
        raise _refuse(f"{left!r} ** {right!r} has no real result")
    return result


def _eval(node: ast.expr) -> int | float:
    if isinstance(node, ast.Constant):
        return cast("int | float", node.value)  # checked by parse_expression
    if isinstance(node, ast.UnaryOp):
        return cast("int | float", _UNARY[type(node.op)](_eval(node.operand)))
    if isinstance(node, ast.BinOp):
        return _apply(node.op, _eval(node.left), _eval(node.right))
    raise _refuse(f"unsupported element {type(node).__name__}")  # unreachable after parse_expression


def evaluate(expression: str) -> int | float:
    """The value of ``expression``, safely; ToolExecutionError with the reason otherwise."""
    try:
        value = _eval(parse_expression(expression))
    except RecursionError:
        raise _refuse("expression nested too deeply") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise _refuse("result is not a finite number")
    return value


def _arithmetic(args: ArithmeticArgs, ctx: ToolContext) -> int | float | str:
    value = evaluate(args.expression)
    if isinstance(value, int) and abs(value) > INT64_MAX:
        return str(value)
    return value


# -- files ----------------------------------------------------------------------------


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


def _os_error(tool: str, path: Path, exc: OSError) -> ToolExecutionError:
    return ToolExecutionError(tool, f"cannot read {path}: {exc.strerror or exc}")


def _list_dir(args: ListDirArgs, ctx: ToolContext) -> dict[str, Any]:
    path = ctx.resolve(args.path)
    if not path.exists():
        raise ToolExecutionError("list_dir", f"no such directory: {path}")
    if not path.is_dir():
        raise ToolExecutionError("list_dir", f"{path} is a file, not a directory (use read_file)")
    try:
        children = sorted(path.iterdir(), key=lambda child: child.name)
    except OSError as exc:
        raise _os_error("list_dir", path, exc) from None
    entries = [child.name + ("/" if child.is_dir() else "") for child in children]
    return {"path": str(path), "entries": entries[: args.max_entries], "total": len(entries),
            "truncated": len(entries) > args.max_entries}


def _text_file(tool: str, path: Path, max_bytes: int) -> tuple[str, int]:
    """The start of a UTF-8 text file (at most ``max_bytes``) and its size in bytes."""
    if not path.exists():
        raise ToolExecutionError(tool, f"no such file: {path}")
    if path.is_dir():
        raise ToolExecutionError(tool, f"{path} is a directory, not a file (use list_dir)")
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            data = handle.read(max_bytes)
    except OSError as exc:
        raise _os_error(tool, path, exc) from None
    try:
        if b"\x00" in data:
            raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
        # Incremental decoding: a character cut by max_bytes is not an error.
        text = codecs.getincrementaldecoder("utf-8")().decode(data, final=len(data) >= size)
    except UnicodeDecodeError:
        raise ToolExecutionError(tool, f"{path} looks like a binary file (not UTF-8 text)") from None
    return text, size


def _read_file(args: ReadFileArgs, ctx: ToolContext) -> str:
    path = ctx.resolve(args.path)
    text, size = _text_file("read_file", path, args.max_chars * READ_BYTES_PER_CHAR)
    if len(text) > args.max_chars or len(text.encode()) < size:
        shown = text[: args.max_chars]
        return f"{shown}\n[file truncated: showing the first {len(shown)} characters of {size} bytes]"
    return text


def _count(args: CountArgs, ctx: ToolContext) -> dict[str, Any]:
    if args.path is not None:
        path = ctx.resolve(args.path)
        text, size = _text_file("count", path, MAX_COUNT_BYTES + 1)
        if size > MAX_COUNT_BYTES:
            raise ToolExecutionError("count", f"{path} is too large to count ({size} bytes)")
    else:
        text = args.text or ""
    counts = {"lines": len(text.splitlines()), "words": len(text.split()), "chars": len(text)}
    return {unit: counts[unit] for unit in args.units}


# -- echo and sleep ---------------------------------------------------------------------


class EchoArgs(_Args):
    text: str = Field(max_length=100_000)


class SleepArgs(_Args):
    seconds: float = Field(ge=0, le=MAX_SLEEP_S, description=f"at most {MAX_SLEEP_S:g} seconds")


def _echo(args: EchoArgs, ctx: ToolContext) -> str:
    return args.text


def _sleep(args: SleepArgs, ctx: ToolContext) -> dict[str, float]:
    time.sleep(args.seconds)
    return {"slept_s": args.seconds}


BUILTIN_TOOLS: tuple[Tool, ...] = (
    Tool("arithmetic", "Evaluate an arithmetic expression exactly (integers stay exact).",
         ArithmeticArgs, "pure", 5.0, _arithmetic),
    Tool("list_dir", "List the entries of a directory (sub-directories end with '/').",
         ListDirArgs, "idempotent", 10.0, _list_dir),
    Tool("read_file", "Read a UTF-8 text file (long files are cut, binary files refused).",
         ReadFileArgs, "pure", 10.0, _read_file),
    Tool("count", "Count the lines, words and characters of a text file or of given text.",
         CountArgs, "pure", 30.0, _count),
    Tool("echo", "Return the given text unchanged.", EchoArgs, "pure", 5.0, _echo),
    Tool("sleep", f"Wait for some seconds (at most {MAX_SLEEP_S:g}); a test and benchmark aid.",
         SleepArgs, "pure", MAX_SLEEP_S + 5.0, _sleep),
)


# -- the workspace: write_file, shell, confined reads ---------------------------------------------

MAX_WRITE_CHARS = 10_000_000
MAX_STREAM_CHARS = 1_000_000  # of each of stdout and stderr kept (the registry then caps the result)
READ_TOOLS = ("list_dir", "read_file", "count")


def confine(tool: str, path: Path, root: Path) -> Path:
    """``path`` with every symlink and ``..`` resolved, if it lies inside ``root``; else ToolExecutionError."""
    real_root, real = root.expanduser().resolve(), path.resolve()
    if real != real_root and not real.is_relative_to(real_root):
        raise ToolExecutionError(tool, f"{path} is outside the workspace {real_root}: refused")
    return real


def _root(ctx: ToolContext, root: Path | None) -> Path:
    return root if root is not None else ctx.workspace


class WriteFileArgs(_Args):
    path: str = Field(min_length=1, description="file inside the workspace; relative paths start at the workspace")
    content: str = Field(max_length=MAX_WRITE_CHARS, description="UTF-8 text to write")
    append: bool = Field(False, description="add to the end instead of replacing the file")
    create_dirs: bool = Field(False, description="create missing parent directories")


def _write_file(args: WriteFileArgs, ctx: ToolContext, root: Path | None) -> dict[str, Any]:
    target = confine("write_file", ctx.resolve(args.path), _root(ctx, root))
    if target.is_dir():
        raise ToolExecutionError("write_file", f"{target} is a directory")
    if not target.parent.is_dir():
        if not args.create_dirs:
            raise ToolExecutionError("write_file", f"no such directory: {target.parent} (set create_dirs)")
        target.parent.mkdir(parents=True, exist_ok=True)
    data = args.content.encode("utf-8")
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if args.append else os.O_TRUNC) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o644)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
    except OSError as exc:
        raise ToolExecutionError("write_file", f"cannot write {target}: {exc.strerror or exc}") from None
    return {"path": str(target), "bytes": len(data), "appended": args.append}


class ShellArgs(_Args):
    command: list[str] = Field(min_length=1, description="the program and its arguments; no shell: pipes, "
                                                          "globs and $VARIABLES are not interpreted")
    cwd: str = Field(".", description="working directory, inside the workspace")
    timeout_s: float | None = Field(None, gt=0, description="at most the configured shell_timeout_s")


def _stream(data: bytes) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) > MAX_STREAM_CHARS:
        return text[:MAX_STREAM_CHARS] + f"\n[stream truncated: {len(text) - MAX_STREAM_CHARS} characters cut]"
    return text


def _shell(args: ShellArgs, ctx: ToolContext, root: Path | None, limit_s: float) -> dict[str, Any]:
    cwd = confine("shell", ctx.resolve(args.cwd), _root(ctx, root))
    if not cwd.is_dir():
        raise ToolExecutionError("shell", f"no such directory: {cwd}")
    timeout = min(args.timeout_s or limit_s, limit_s)
    try:
        process = subprocess.Popen(args.command, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, start_new_session=True)
    except FileNotFoundError:
        raise ToolExecutionError("shell", f"no such program: {args.command[0]}") from None
    except OSError as exc:
        raise ToolExecutionError("shell", f"cannot run {args.command[0]}: {exc.strerror or exc}") from None
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


def _confined_reads(tool: Tool, root: Path | None) -> Tool:
    """``tool`` refusing a ``path`` argument outside the workspace root."""
    def func(args: Any, ctx: ToolContext) -> Any:
        if getattr(args, "path", None) is not None:
            confine(tool.name, ctx.resolve(args.path), _root(ctx, root))
        return tool.func(args, ctx)
    return Tool(tool.name, tool.description + " Confined to the workspace.", tool.args_model, tool.effect,
                tool.timeout_s, func)


def workspace_tools(*, workspace_root: str = "", confine_reads: bool = False, shell_enabled: bool = False,
                    shell_timeout_s: float = 30.0) -> tuple[Tool, ...]:
    """The built-ins plus write_file (and shell when enabled), as ``[tools]`` configures them."""
    root = Path(workspace_root).expanduser() if workspace_root else None
    tools = [_confined_reads(t, root) if confine_reads and t.name in READ_TOOLS else t for t in BUILTIN_TOOLS]
    tools.append(Tool("write_file", "Write (or append) UTF-8 text to a file inside the workspace.", WriteFileArgs,
                      "effectful", 10.0, lambda args, ctx: _write_file(args, ctx, root)))
    if shell_enabled:
        tools.append(Tool("shell", f"Run a command (a list: program and arguments, no shell) in the workspace; "
                                   f"at most {shell_timeout_s:g}s. Returns returncode, stdout and stderr.",
                          ShellArgs, "effectful", shell_timeout_s + 5.0,
                          lambda args, ctx: _shell(args, ctx, root, shell_timeout_s)))
    return tuple(tools)


def default_registry(*, max_output_chars: int | None = None) -> ToolRegistry:
    """A registry holding the built-in tools."""
    if max_output_chars is None:
        return ToolRegistry(BUILTIN_TOOLS)
    return ToolRegistry(BUILTIN_TOOLS, max_output_chars=max_output_chars)
