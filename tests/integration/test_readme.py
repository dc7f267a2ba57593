"""The README's examples run as written (in a tmp state dir, on a free port)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from actors.runtime import procs

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_the_two_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "pip install -e . && pegasus run" in text
    assert "pip install -e '.[test]' && python -m pytest -q -n 4" in text
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q -n 4" in ci and "pip install --quiet -e '.[test]'" in ci


def test_the_state_machine_example() -> None:
    block = next(b for b in python_blocks() if "TaskFSM.create" in b)
    namespace: dict = {}
    exec(compile(block, "README", "exec"), namespace)
    assert [h.to_state for h in namespace["fsm"].history] == ["perceiving", "thinking"]


@pytest.mark.integration
def test_the_client_example(tmp_path: Path, free_port: int) -> None:
    block = next(b for b in python_blocks() if "Client.start" in b)
    env = {"PATH": "/usr/bin:/bin", "PEGASUS_HOME": str(tmp_path / "home"),
           "PEGASUS_SYSTEM__ADMIN_PORT": str(free_port)}
    work = tmp_path / "cwd"
    work.mkdir()
    out = subprocess.run([sys.executable, "-c", block], cwd=work, env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "'to be or not to be': 6 words"
    assert any("classic reflecting -> completed" in line for line in lines)
    assert list(work.iterdir()) == []


def _command_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Command line"):text.index("## Python")]
    return section[section.index("```") + 3:section.index("```", section.index("```") + 3)]


def test_the_readme_names_every_command_and_only_flags_they_take() -> None:
    """The README's command list is the parser's: every command there, every flag it shows accepted."""
    import argparse

    from actors.cli.main import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    flags = {name: {flag for action in sub._actions for flag in action.option_strings} for name, sub in commands.items()}
    block = _command_block()
    shown: dict[str, set[str]] = {}
    for segment in re.split(r"\||\n", block):
        words = segment.split("#")[0].split()
        if words[:1] == ["pegasus"]:
            words = words[1:]
        if words and words[0] in commands:
            shown.setdefault(words[0], set()).update(w.strip("[]") for w in words if w.strip("[]").startswith("--"))
    assert set(shown) == set(commands), set(commands) ^ set(shown)
    wrong = {name: sorted(given - flags[name]) for name, given in shown.items() if given - flags[name]}
    assert wrong == {}
    assert "--version" in block and "--version" in {f for a in parser._actions for f in a.option_strings}


@pytest.mark.integration
def test_the_plugin_example_runs(tmp_path: Path, free_port: int) -> None:
    """The README's plugin, saved as myplugin.py, answers through the real command line."""
    block = next(b for b in python_blocks() if "def register(registry" in b)
    (tmp_path / "myplugin.py").write_text(block, encoding="utf-8")
    work = tmp_path / "cwd"
    work.mkdir()
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get(
        "PYTHONPATH", "")])), "PEGASUS_HOME": str(tmp_path / "home"), "HOME": str(tmp_path),
           "PEGASUS_TOOLS__PLUGINS": '["myplugin:register"]'}
    out = subprocess.run(["pegasus", "run", 'call shout {"text": "hi"}', "--port", str(free_port)], cwd=work,
                         env=env, capture_output=True, text=True, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    assert re.search(r"result:\s+.*HI", out.stdout), out.stdout


def _sh_blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def _clone(into: Path) -> Path:
    """The project's files (as git lists them, as they are now) in ``into``: a clone, without the network."""
    root = README.parent
    files = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True)
    for name in filter(None, files.stdout.split("\0")):
        source, target = root / name, into / name
        if source.is_file() and not source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(source.read_bytes())
    return into


@pytest.mark.integration
def test_the_command_blocks_run_from_a_clone_outside_home(tmp_path: Path, free_port: int) -> None:
    """Issue 31: from a clone outside $HOME, ``pegasus run "read setup.cfg"`` was refused (the workspace root
    is $HOME); the README's HTTP block failed on its second ``token create me``."""
    clone = _clone(tmp_path / "clone")
    assert not clone.resolve().is_relative_to(Path.home().resolve())
    http = procs.free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")},
           "PEGASUS_HOME": str(tmp_path / "home"), "PEGASUS_SYSTEM__ADMIN_PORT": str(free_port)}

    def sh(script: str, timeout: float = 90) -> str:
        out = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=clone, env=env,
                             capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, f"{script}\n-> {out.returncode}\n{out.stdout}{out.stderr}"
        return out.stdout

    [install_and_run] = [b for b in _sh_blocks() if b.startswith("pip install -e . && pegasus run")]
    assert re.search(r"result:\s+2 \+ 3 \* 4 = 14", sh(install_and_run.removeprefix("pip install -e . && ")))
    [api] = [b for b in _sh_blocks() if "/v1/tasks" in b]
    dashboard = re.search(r"`(pegasus start --http 8470 && pegasus token create me --scope admin)", README.read_text(
        encoding="utf-8"))
    try:
        sh(dashboard.group(1).replace("8470", str(http)))  # type: ignore[union-attr]
        # The file examples on the running system (``run`` uses it, as the README says): the embedded start from
        # the clone is the first block's; a local client's task is confined to its own directory either way.
        for example in ("read setup.cfg", "count the lines in README.md"):
            assert f"`{example}`" in README.read_text(encoding="utf-8").replace("\n", " ")
            assert "result:" in sh(f"pegasus run {example!r}")
        lines = api.replace("8470", str(http)).strip().splitlines()
        events = lines.pop().replace("TASK_ID", "$(echo \"$SUBMITTED\" | python3 -c 'import json,sys; "
                                                 "print(json.load(sys.stdin)[\"task_id\"])')")
        out = sh("\n".join([lines[0], f"SUBMITTED=$({lines[1]})", "echo \"$SUBMITTED\"", events]))
        assert '"task_id"' in out and "event: end" in out, out
    finally:
        subprocess.run(["pegasus", "stop"], cwd=clone, env=env, capture_output=True, timeout=90)
