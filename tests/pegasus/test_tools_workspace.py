"""write_file, shell and confined reads: nothing reaches outside the workspace root; shell is off
unless enabled; every tool's result is capped with a note; argument errors are clear."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from pegasus.cognitive.offline import OfflineStepRunner
from pegasus.task.models import PlanStep, TaskContext
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import ToolArgumentError, ToolContext, ToolExecutionError, ToolNotFoundError


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    return root


def tools(**settings: object):
    return registry_for({"tools": settings})


def test_write_file_writes_and_appends_inside_the_workspace(workspace: Path) -> None:
    registry, ctx = tools(), ToolContext(workspace)
    assert registry.call("write_file", {"path": "notes.txt", "content": "one\n"}, ctx)["bytes"] == 4
    registry.call("write_file", {"path": "notes.txt", "content": "two\n", "append": True}, ctx)
    assert (workspace / "notes.txt").read_text() == "one\ntwo\n"
    registry.call("write_file", {"path": "sub/dir/x.txt", "content": "x", "create_dirs": True}, ctx)
    assert (workspace / "sub/dir/x.txt").read_text() == "x"
    with pytest.raises(ToolExecutionError, match="no such directory"):
        registry.call("write_file", {"path": "missing/x.txt", "content": "x"}, ctx)
    assert registry.get("write_file").effect == "effectful"


@pytest.mark.parametrize("path", ["../escape.txt", "sub/../../escape.txt", "link/escape.txt", "abs"])
def test_write_file_refuses_every_escape(workspace: Path, path: str) -> None:
    """../, a symlinked directory that points out, and an absolute path elsewhere: all refused."""
    outside = workspace.parent / "elsewhere"
    outside.mkdir()
    (workspace / "link").symlink_to(outside)
    target = str(outside / "escape.txt") if path == "abs" else path
    with pytest.raises(ToolExecutionError, match="outside the workspace"):
        tools().call("write_file", {"path": target, "content": "x"}, ToolContext(workspace))
    assert not (workspace.parent / "escape.txt").exists() and not (outside / "escape.txt").exists()


def test_write_file_refuses_a_symlinked_file_pointing_out(workspace: Path) -> None:
    (workspace / "innocent.txt").symlink_to(workspace.parent / "outside.txt")
    with pytest.raises(ToolExecutionError, match="outside the workspace"):
        tools().call("write_file", {"path": "innocent.txt", "content": "pwned"}, ToolContext(workspace))
    assert (workspace.parent / "outside.txt").read_text() == "secret"


def test_a_symlink_inside_the_workspace_is_fine(workspace: Path) -> None:
    (workspace / "real").mkdir()
    (workspace / "alias").symlink_to(workspace / "real")
    tools().call("write_file", {"path": "alias/f.txt", "content": "ok"}, ToolContext(workspace))
    assert (workspace / "real" / "f.txt").read_text() == "ok"


def test_a_configured_root_wins_over_the_task_workspace(workspace: Path, tmp_path: Path) -> None:
    registry = tools(workspace_root=str(workspace))
    registry.call("write_file", {"path": str(workspace / "a.txt"), "content": "a"}, ToolContext(tmp_path))
    with pytest.raises(ToolExecutionError, match="outside the workspace"):
        registry.call("write_file", {"path": "b.txt", "content": "b"}, ToolContext(tmp_path))


def test_reads_are_free_by_default_and_confined_when_configured(workspace: Path) -> None:
    ctx = ToolContext(workspace)
    assert tools().call("read_file", {"path": "../outside.txt"}, ctx) == "secret"  # today's behaviour
    confined = tools(confine_reads=True)
    for tool, args in (("read_file", {"path": "../outside.txt"}), ("list_dir", {"path": ".."}),
                       ("count", {"path": str(workspace.parent / "outside.txt")})):
        with pytest.raises(ToolExecutionError, match="outside the workspace"):
            confined.call(tool, args, ctx)
    (workspace / "in.txt").write_text("a b")
    assert confined.call("count", {"path": "in.txt", "units": ["words"]}, ctx) == {"words": 2}
    assert confined.call("count", {"text": "a b c", "units": ["words"]}, ctx) == {"words": 3}


def test_shell_is_off_by_default(workspace: Path) -> None:
    with pytest.raises(ToolNotFoundError):
        tools().call("shell", {"command": ["echo", "hi"]}, ToolContext(workspace))


def test_shell_runs_a_command_list_without_a_shell(workspace: Path) -> None:
    registry, ctx = tools(shell_enabled=True), ToolContext(workspace)
    out = registry.call("shell", {"command": ["echo", "hello $HOME; rm -rf /"]}, ctx)
    assert out == {"returncode": 0, "stdout": "hello $HOME; rm -rf /\n", "stderr": ""}  # nothing interpreted
    out = registry.call("shell", {"command": [sys.executable, "-c", "import os; print(os.getcwd())"]}, ctx)
    assert out["stdout"].strip() == str(workspace.resolve())
    assert registry.call("shell", {"command": ["false"]}, ctx)["returncode"] == 1
    with pytest.raises(ToolExecutionError, match="no such program"):
        registry.call("shell", {"command": ["no-such-program-xyz"]}, ctx)
    with pytest.raises(ToolExecutionError, match="outside the workspace"):
        registry.call("shell", {"command": ["ls"], "cwd": ".."}, ctx)
    with pytest.raises(ToolArgumentError, match="command"):
        registry.call("shell", {"command": "ls -la"}, ctx)
    assert registry.get("shell").effect == "effectful"


def test_shell_kills_a_command_at_its_timeout(workspace: Path) -> None:
    registry = tools(shell_enabled=True, shell_timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(ToolExecutionError, match="timed out after 0.3s"):
        registry.call("shell", {"command": ["sleep", "10"]}, ToolContext(workspace))
    assert time.monotonic() - started < 5


def test_every_tool_result_is_capped_with_a_note(workspace: Path) -> None:
    registry, ctx = tools(shell_enabled=True, max_output_chars=100), ToolContext(workspace)
    (workspace / "big.txt").write_text("z" * 5000)
    outputs = [registry.call("shell", {"command": [sys.executable, "-c", "print('x' * 5000)"]}, ctx),
               registry.call("read_file", {"path": "big.txt"}, ctx),
               registry.call("echo", {"text": "e" * 500}, ctx),
               registry.call("write_file", {"path": "long-" + "n" * 150 + ".txt", "content": ""}, ctx)]
    for out in outputs:
        assert isinstance(out, str) and len(out) < 200 and "[output truncated:" in out


def test_argument_errors_name_the_field(workspace: Path) -> None:
    with pytest.raises(ToolArgumentError) as caught:
        tools().call("write_file", {"path": "x.txt"}, ToolContext(workspace))
    assert caught.value.fields == ["content"] and "content" in caught.value.message


def test_the_step_runner_uses_the_task_workspace(workspace: Path) -> None:
    """The default root is input_metadata["workspace"] (the client's cwd)."""
    runner = OfflineStepRunner(tools())
    step = PlanStep(index=0, description="w", action_params={"tool": "write_file",
                                                             "args": {"path": "../x.txt", "content": "x"}})
    result = runner.run_step(TaskContext(input_metadata={"workspace": str(workspace)}), step)
    assert not result.success and "outside the workspace" in (result.error or "")
    ok = step.model_copy(update={"action_params": {"tool": "write_file", "args": {"path": "y.txt", "content": "y"}}})
    assert runner.run_step(TaskContext(input_metadata={"workspace": str(workspace)}), ok).success
    assert (workspace / "y.txt").read_text() == "y" and not os.path.exists(workspace.parent / "x.txt")
