"""The built-in tools: arithmetic, list_dir, read_file, count, echo and sleep (``BUILTIN_TOOLS``,
read-only), plus write_file and shell (``workspace_tools``, built from ``[tools]`` settings).

Each is a pydantic argument model plus a function ``(args, ctx) -> JSON-able``; errors are
ToolExecutionError with a message meant for the user, since it ends up in the task's answer.
``arithmetic`` evaluates with ``ast``, never ``eval``, and bounds every intermediate result, so
``9**9**9`` is refused instead of eating the machine.  The file tools: pegasus.tools.file_tools.
"""

from __future__ import annotations

import ast
import math
import operator
import time
from collections.abc import Callable
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field

from pegasus.config import ToolSettings
from pegasus.tools.file_tools import read_tools, write_tools
from pegasus.tools.registry import Tool, ToolContext, ToolExecutionError, ToolRegistry
from pegasus.tools.workspace import Workspace

MAX_EXPRESSION_CHARS = 500
MAX_RESULT_BITS = 4096  # about 1200 decimal digits
INT64_MAX = 2**63 - 1  # beyond it an int is returned as a string: msgpack cannot carry it
MAX_SLEEP_S = 60.0


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


def _tools(space: Workspace) -> tuple[Tool, ...]:
    list_dir, read_file, count = read_tools(space)
    return (
        Tool("arithmetic", "Evaluate an arithmetic expression exactly (integers stay exact).",
             ArithmeticArgs, "pure", 5.0, _arithmetic),
        list_dir, read_file, count,
        Tool("echo", "Return the given text unchanged.", EchoArgs, "pure", 5.0, _echo),
        Tool("sleep", f"Wait for some seconds (at most {MAX_SLEEP_S:g}); a test and benchmark aid.",
             SleepArgs, "pure", MAX_SLEEP_S + 5.0, _sleep),
    )


# The read-only set, reads confined as by default: the user's home, narrowed by the task's workspace.
BUILTIN_TOOLS: tuple[Tool, ...] = _tools(Workspace.of(ToolSettings()))


def workspace_tools(tools: ToolSettings) -> tuple[Tool, ...]:
    """The built-ins plus write_file (and shell when enabled), as ``[tools]`` configures them."""
    space = Workspace.of(tools)
    return _tools(space) + write_tools(space, shell_enabled=tools.shell_enabled, shell_timeout_s=tools.shell_timeout_s)


def default_registry(*, max_output_chars: int | None = None) -> ToolRegistry:
    """A registry holding the built-in tools."""
    if max_output_chars is None:
        return ToolRegistry(BUILTIN_TOOLS)
    return ToolRegistry(BUILTIN_TOOLS, max_output_chars=max_output_chars)
