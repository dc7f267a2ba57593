"""write_file, shell and confined reads: nothing reaches outside the workspace root; shell is off
unless enabled; every tool's result is capped with a note; argument errors are clear."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pegasus.config import Settings, ToolSettings
from pegasus.cognitive.offline import OfflineStepRunner
from pegasus.task.models import PlanStep, TaskContext
from pegasus.tools.plugins import registry_for
from pegasus.tools.registry import ToolArgumentError, ToolContext, ToolExecutionError, ToolNotFoundError
from pegasus.tools.workspace import Workspace
from tests.support.waiting import wait_for


@pytest.fixture(autouse=True)
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The default workspace root is the home directory: here, the test's tmp_path."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "outside.txt").write_text("secret")
    return root


def tools(**settings: object):
    return registry_for(Settings().with_overrides({"tools": settings}))


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


def test_a_task_workspace_may_only_narrow_the_root(workspace: Path, tmp_path: Path) -> None:
    """Issue 15: metadata={"workspace": "/"} moved write_file's confinement to /."""
    registry = tools(workspace_root=str(workspace))
    (workspace / "sub").mkdir()
    registry.call("write_file", {"path": "a.txt", "content": "a"}, ToolContext(workspace / "sub"))
    assert (workspace / "sub" / "a.txt").read_text() == "a"
    with pytest.raises(ToolExecutionError, match="outside the workspace"):  # narrowed: the root's rest is out
        registry.call("write_file", {"path": str(workspace / "b.txt"), "content": "b"}, ToolContext(workspace / "sub"))
    for wider in (Path("/"), tmp_path):
        with pytest.raises(ToolExecutionError, match=r"the task's workspace .* is outside the workspace root"):
            registry.call("write_file", {"path": "c.txt", "content": "c"}, ToolContext(wider))
    registry.call("write_file", {"path": "d.txt", "content": "d"}, ToolContext())  # none given: the root
    assert (workspace / "d.txt").read_text() == "d"
    assert not (tmp_path / "c.txt").exists() and not Path("/c.txt").exists()


def test_the_home_directory_is_the_root_when_none_is_configured(workspace: Path, tmp_path: Path) -> None:
    assert Workspace.of(ToolSettings()).root() == tmp_path.resolve()  # HOME is tmp_path here
    with pytest.raises(ToolExecutionError, match="outside the workspace root"):
        tools().call("read_file", {"path": "x"}, ToolContext(Path("/etc")))


def test_reads_are_confined_by_default_and_read_allow_opens_more(workspace: Path, tmp_path: Path) -> None:
    """Issue 15: read_file /etc/shadow worked by default."""
    ctx = ToolContext(workspace)
    (workspace / "in.txt").write_text("a b")
    for tool, args in (("read_file", {"path": "../outside.txt"}), ("list_dir", {"path": ".."}),
                       ("count", {"path": str(workspace.parent / "outside.txt")}), ("read_file", {"path": "/etc/passwd"})):
        with pytest.raises(ToolExecutionError, match="outside the workspace"):
            tools().call(tool, args, ctx)
    assert tools().call("count", {"path": "in.txt", "units": ["words"]}, ctx) == {"words": 2}
    assert tools().call("count", {"text": "a b c", "units": ["words"]}, ctx) == {"words": 3}
    allowed = tools(read_allow=[str(tmp_path)])
    assert allowed.call("read_file", {"path": str(tmp_path / "outside.txt")}, ctx) == "secret"
    with pytest.raises(ToolExecutionError, match="outside the workspace"):  # read_allow is for reading only
        allowed.call("write_file", {"path": str(tmp_path / "outside.txt"), "content": "x"}, ctx)
    assert tools(confine_reads=False).call("read_file", {"path": "../outside.txt"}, ctx) == "secret"


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


def test_a_shell_timeout_over_the_configured_limit_is_refused_not_cut(workspace: Path) -> None:
    """Issue 31: the limit is in the tool's schema, and a call past it is refused before anything runs."""
    registry = tools(shell_enabled=True, shell_timeout_s=5)
    assert registry.get("shell").schema()["properties"]["timeout_s"]["anyOf"][0]["maximum"] == 5
    with pytest.raises(ToolArgumentError, match="timeout_s: Input should be less than or equal to 5"):
        registry.call("shell", {"command": ["touch", "ran"], "timeout_s": 30}, ToolContext(workspace))
    assert not (workspace / "ran").exists()


def test_shell_kills_a_command_at_its_timeout(workspace: Path) -> None:
    """The command is killed at its timeout: the call says so, and the process is gone (not left to run)."""
    registry = tools(shell_enabled=True, shell_timeout_s=0.3)
    with pytest.raises(ToolExecutionError, match="timed out after 0.3s"):
        registry.call("shell", {"command": ["sh", "-c", "echo $$ > pid; exec sleep 600"]}, ToolContext(workspace))
    pid = int((workspace / "pid").read_text())
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), what=f"the killed command (pid {pid}) gone")


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


def test_a_local_clients_task_works_in_its_directory_outside_the_root_and_no_further(tmp_path: Path) -> None:
    """Issue 31: a clone outside $HOME.  Its workspace is its own root; others stay inside the configured one."""
    clone = tmp_path / "elsewhere" / "clone"
    clone.mkdir(parents=True)
    (clone / "setup.cfg").write_text("[metadata]\n")
    (clone.parent / "beside.txt").write_text("not the task's")
    registry = tools(workspace_root=str(tmp_path / "home"))
    (tmp_path / "home").mkdir()
    local, remote = ToolContext(clone, local=True), ToolContext(clone)
    assert registry.call("read_file", {"path": "setup.cfg"}, local) == "[metadata]\n"
    registry.call("write_file", {"path": "out.txt", "content": "x"}, local)
    with pytest.raises(ToolExecutionError, match="outside the workspace root"):
        registry.call("read_file", {"path": "setup.cfg"}, remote)
    for path in ("../beside.txt", str(clone.parent / "beside.txt")):
        with pytest.raises(ToolExecutionError, match="outside the workspace"):
            registry.call("read_file", {"path": path}, local)


def test_only_the_runtime_marks_a_task_local() -> None:
    """A request's own metadata never makes a task local: only its origin (a local client) or its parent's."""
    from pegasus.tools.workspace import LOCAL, with_local_mark

    assert with_local_mark({"workspace": "/x", LOCAL: True}, "http") == {"workspace": "/x"}
    assert with_local_mark({LOCAL: True}, "webhook") == {} and with_local_mark({LOCAL: True}, "schedule") == {}
    assert with_local_mark({"workspace": "/x"}, "cli") == {"workspace": "/x", LOCAL: True}
    assert with_local_mark({LOCAL: True}, "sub_task") == {LOCAL: True}  # the tree set it from the parent
    assert with_local_mark({LOCAL: False}, "sub_task") == {}
