"""The tool registry and the built-in tools: safe arithmetic, argument validation,
clear errors, output capping, schemas and effect classes."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from pydantic import BaseModel

from pegasus.errors import PegasusError
from pegasus.tools import (
    BUILTIN_TOOLS,
    Tool,
    ToolArgumentError,
    ToolContext,
    ToolError,
    ToolExecutionError,
    ToolNotFoundError,
    ToolRegistrationError,
    ToolRegistry,
    default_registry,
)


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default workspace root is the home directory: here, the test's tmp_path."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def tools() -> ToolRegistry:
    return default_registry()


def _arith(tools: ToolRegistry, expression: str) -> object:
    return tools.call("arithmetic", {"expression": expression})


# -- arithmetic ---------------------------------------------------------------------------


@pytest.mark.parametrize("expression,value", [
    ("2 + 3 * 4", 14), ("(10-4)/3", 2.0), ("7 // 2", 3), ("7 % 4", 3), ("2 ** 10", 1024),
    ("-3 + +4", 1), ("2 ** -2", 0.25), ("1.5 * 2", 3.0),
])
def test_arithmetic_evaluates_numbers_and_operators(tools: ToolRegistry, expression: str, value: object) -> None:
    """The allowed grammar: numbers, + - * / // % **, unary signs, parentheses."""
    assert _arith(tools, expression) == value


@pytest.mark.parametrize("expression,reason", [
    ("x + 1", "names are not allowed"),
    ("__import__('os').system('true')", "not allowed"),
    ("abs(-1)", "function calls are not allowed"),
    ("(1).real", "attribute access is not allowed"),
    ("'a' * 3", "only numbers"),
    ("True + 1", "only numbers"),
    ("[1][0]", "not allowed"),
    ("1 < 2", "not allowed"),
    ("1 << 2", "not allowed"),
    ("lambda: 1", "not allowed"),
    ("2 +", "not an arithmetic expression"),
])
def test_arithmetic_refuses_anything_but_arithmetic(tools: ToolRegistry, expression: str, reason: str) -> None:
    """Names, calls, attributes, strings, booleans and other syntax never evaluate."""
    with pytest.raises(ToolExecutionError, match=reason):
        _arith(tools, expression)


@pytest.mark.parametrize("expression", ["9**9**9", "2**100000", "10**5000", "(2**4000)*(2**4000)"])
def test_arithmetic_refuses_huge_results_before_computing_them(tools: ToolRegistry, expression: str) -> None:
    """9**9**9 would take the machine; it is refused with a clear reason instead."""
    with pytest.raises(ToolExecutionError, match="too large"):
        _arith(tools, expression)


@pytest.mark.parametrize("expression,reason", [
    ("1/0", "division by zero"), ("5 // 0", "division by zero"), ("5 % 0", "division by zero"),
    ("10.0 ** 400", "too large"), ("1e308 * 10", "not a finite number"), ("(-8) ** 0.5", "no real result"),
])
def test_arithmetic_errors_are_clear(tools: ToolRegistry, expression: str, reason: str) -> None:
    with pytest.raises(ToolExecutionError, match=reason) as caught:
        _arith(tools, expression)
    assert caught.value.tool == "arithmetic"


def test_arithmetic_big_integers_come_back_as_exact_text(tools: ToolRegistry) -> None:
    """Beyond 64 bits msgpack cannot carry an int, so the exact value is returned as digits."""
    assert _arith(tools, "2 ** 100") == str(2**100)
    assert _arith(tools, "2 ** 62") == 2**62


# -- validation, lookup, errors --------------------------------------------------------------


def test_argument_errors_name_the_field(tools: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentError, match="seconds") as caught:
        tools.call("sleep", {"seconds": 61})
    assert caught.value.fields == ["seconds"] and caught.value.tool == "sleep"
    with pytest.raises(ToolArgumentError) as caught:
        tools.call("arithmetic", {})
    assert caught.value.fields == ["expression"]
    with pytest.raises(ToolArgumentError) as caught:
        tools.call("echo", {"text": "a", "loud": True})
    assert caught.value.fields == ["loud"]


def test_arguments_must_be_an_object_and_count_needs_one_source(tools: ToolRegistry) -> None:
    with pytest.raises(ToolArgumentError, match="must be an object"):
        tools.call("echo", ["hi"])  # type: ignore[arg-type]
    with pytest.raises(ToolArgumentError, match="exactly one of path or text"):
        tools.call("count", {"path": "a", "text": "b"})


def test_arguments_are_validated_before_the_tool_runs() -> None:
    calls: list[object] = []

    class Args(BaseModel):
        n: int

    registry = ToolRegistry([Tool("t", "d", Args, "pure", 1.0, lambda args, ctx: calls.append(args))])
    with pytest.raises(ToolArgumentError):
        registry.call("t", {"n": "not a number"})
    assert calls == []


def test_unknown_tool_lists_the_known_ones(tools: ToolRegistry) -> None:
    with pytest.raises(ToolNotFoundError, match="unknown tool 'nope'.*arithmetic") as caught:
        tools.call("nope", {})
    assert caught.value.known == tools.names()


def test_duplicate_registration_is_refused(tools: ToolRegistry) -> None:
    with pytest.raises(ToolRegistrationError, match="already registered"):
        tools.register(BUILTIN_TOOLS[0])


def test_a_tool_that_raises_becomes_a_tool_execution_error() -> None:
    class Args(BaseModel):
        pass

    def broken(args: Args, ctx: ToolContext) -> None:
        raise KeyError("boom")

    registry = ToolRegistry([Tool("broken", "d", Args, "effectful", 1.0, broken)])
    with pytest.raises(ToolExecutionError, match="broken failed: KeyError"):
        registry.call("broken", {})


def test_tool_errors_belong_to_the_pegasus_root_and_pickle() -> None:
    """Errors cross process boundaries: they keep their data when pickled."""
    for error in (ToolNotFoundError("x", ["a"]), ToolArgumentError("t", ["f"], "bad f"),
                  ToolExecutionError("t", "failed")):
        assert isinstance(error, ToolError) and isinstance(error, PegasusError)
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), str(copy), copy.tool) == (type(error), str(error), error.tool)


# -- output cap ------------------------------------------------------------------------------


def test_long_output_is_truncated_with_a_note() -> None:
    registry = default_registry(max_output_chars=100)
    out = registry.call("echo", {"text": "x" * 250})
    assert out.startswith("x" * 100)
    assert "[output truncated: 150 of 250 characters cut]" in out
    assert registry.call("echo", {"text": "short"}) == "short"


def test_long_structured_output_is_cut_as_json_text(tmp_path: Path) -> None:
    for n in range(50):
        (tmp_path / f"file-{n:02}.txt").write_text("")
    out = default_registry(max_output_chars=200).call("list_dir", {"path": str(tmp_path)})
    assert isinstance(out, str) and out.startswith('{"path"') and "characters cut]" in out


# -- files -----------------------------------------------------------------------------------


def test_file_tools_resolve_relative_paths_against_the_workspace(tools: ToolRegistry, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("one two\nthree\n")
    (tmp_path / "sub").mkdir()
    ctx = ToolContext(workspace=tmp_path)
    assert tools.call("read_file", {"path": "notes.txt"}, ctx) == "one two\nthree\n"
    assert tools.call("count", {"path": "notes.txt"}, ctx) == {"lines": 2, "words": 3, "chars": 14}
    assert tools.call("count", {"text": "a b c", "units": ["words"]}, ctx) == {"words": 3}
    listing = tools.call("list_dir", {"path": "."}, ctx)
    assert listing["entries"] == ["notes.txt", "sub/"] and listing["total"] == 2


@pytest.mark.parametrize("tool,make,reason", [
    ("read_file", lambda p: None, "no such file"),
    ("read_file", lambda p: p.mkdir(), "is a directory"),
    ("read_file", lambda p: p.write_bytes(b"\x00\x01\xff binary"), "binary"),
    ("count", lambda p: p.write_bytes(b"\xff\xfe\xfa"), "binary"),
    ("list_dir", lambda p: None, "no such directory"),
    ("list_dir", lambda p: p.write_text("x"), "not a directory"),
])
def test_file_errors_are_clear(tools: ToolRegistry, tmp_path: Path, tool: str, make, reason: str) -> None:
    target = tmp_path / "target"
    make(target)
    with pytest.raises(ToolExecutionError, match=reason):
        tools.call(tool, {"path": str(target)})


def test_read_file_is_size_capped(tools: ToolRegistry, tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("é" * 5000)
    out = tools.call("read_file", {"path": str(tmp_path / "big.txt"), "max_chars": 100})
    assert out.startswith("é" * 100) and "[file truncated: showing the first 100 characters of 10000 bytes]" in out


def test_sleep_waits_and_reports(tools: ToolRegistry) -> None:
    assert tools.call("sleep", {"seconds": 0.01}) == {"slept_s": 0.01}


# -- describe and effects ----------------------------------------------------------------------


def test_describe_gives_name_description_schema_effect_and_timeout(tools: ToolRegistry) -> None:
    described = {entry["name"]: entry for entry in tools.describe()}
    assert sorted(described) == tools.names() == ["arithmetic", "count", "echo", "list_dir", "read_file", "sleep"]
    for entry in described.values():
        assert set(entry) == {"name", "description", "schema", "effect", "timeout_s"}
        assert entry["schema"]["type"] == "object" and entry["description"] and entry["timeout_s"] > 0
    assert described["arithmetic"]["schema"]["required"] == ["expression"]
    assert described["sleep"]["schema"]["properties"]["seconds"]["maximum"] == 60
    assert described["sleep"]["timeout_s"] > 60


def test_builtin_effect_classes(tools: ToolRegistry) -> None:
    """None of the built-ins changes the world: every one is safe to run again."""
    effects = {entry["name"]: entry["effect"] for entry in tools.describe()}
    assert effects == {"arithmetic": "pure", "count": "pure", "echo": "pure", "list_dir": "idempotent",
                       "read_file": "pure", "sleep": "pure"}
