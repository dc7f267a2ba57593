"""The commands that need no system (machines, tools, completion), --version, usage errors, and the console
script's entry point."""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys

import pytest

import pegasus
from actors.cli import main
from actors.cli.main import build_parser


def test_lists_the_three_machines(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["machines"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in ("classic", "reason_act", "lifecycle"))


def test_table_json_and_mermaid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["machines", "classic"]) == 0
    assert "reflecting  --REFLECT_DONE" in capsys.readouterr().out
    assert main(["machines", "lifecycle", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert len(data["states"]) == 10 and len(data["transitions"]) == 20
    assert main(["machines", "reason_act", "--mermaid"]) == 0
    diagram = capsys.readouterr().out.splitlines()
    assert diagram[0] == "stateDiagram-v2" and "    [*] --> idle" in diagram
    assert "    acting --> completed: STEP_COMPLETED [completed]" in diagram


def test_unknown_machine_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["machines", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: pegasus machines") and "pegasus machines: error: argument name: invalid choice" in err


@pytest.mark.skipif(shutil.which("pegasus") is None, reason="console script not installed")
def test_console_script_runs() -> None:
    out = subprocess.run(["pegasus", "machines", "classic", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["initial"] == "idle"


def test_module_entry_point() -> None:
    out = subprocess.run([sys.executable, "-m", "actors.cli", "machines"], capture_output=True, text=True, check=True)
    assert "lifecycle" in out.stdout


@pytest.mark.skipif(shutil.which("pegasus") is None, reason="console script not installed")
def test_a_closed_pipe_is_not_a_traceback() -> None:
    """`pegasus ... | head` ends quietly when the reader has gone: no traceback."""
    child = subprocess.Popen(["pegasus", "machines", "classic"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # the reader is gone before the first write
    stderr = child.stderr.read().decode()
    child.wait(timeout=60)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0 and capsys.readouterr().out == f"pegasus {pegasus.__version__}\n"


def test_a_usage_error_with_json_is_json_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16: with --json, errors are JSON too (same exit status); an unknown --state names the valid ones."""
    assert main(["list", "--state", "nope", "--json"]) == 2
    out, err = capsys.readouterr()
    error = json.loads(err)["error"]
    assert out == "" and error["type"] == "UsageError"
    assert "invalid choice: 'nope'" in error["message"] and "'blocked'" in error["message"]
    assert "'reflecting'" in error["message"]  # cognitive states too
    assert main(["list", "--limit", "0"]) == 2
    assert "argument --limit: 0 is out of range (1 to 10000)" in capsys.readouterr().err


def test_an_error_with_json_is_json_on_stderr(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    missing = tmp_path / "missing.toml"
    assert main(["tools", "--config", str(missing), "--json"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    error = json.loads(err)["error"]
    assert error["type"] == "ConfigError" and str(missing) in error["message"]
    assert main(["tools", "--config", str(missing)]) == 1
    plain = capsys.readouterr().err
    assert plain.startswith("pegasus: ") and str(missing) in plain


def test_tools_lists_builtins_with_their_arguments(capsys: pytest.CaptureFixture[str], monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("PEGASUS_HOME", str(tmp_path))
    assert main(["tools"]) == 0
    out = capsys.readouterr().out
    assert "write_file" in out and "effectful" in out and "args: expression: string (required)" in out
    assert "shell" not in out  # off by default


def _complete(script: str, *words: str) -> list[str]:
    """What bash offers with the cursor at the end of ``words`` (the last one is being typed)."""
    program = (f"{script}\nCOMP_WORDS=({' '.join(map(shlex.quote, words))}); COMP_CWORD={len(words) - 1}\n"
               "_shtab_pegasus\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    assert out.stderr == ""
    return out.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completion_offers_commands_flags_and_states(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert "complete" in script
    assert {"list", "submit", "completion"} <= set(_complete(script, "pegasus", ""))
    assert _complete(script, "pegasus", "li") == ["list"]
    assert {"--state", "--limit", "--offset", "--json", "--port"} <= set(_complete(script, "pegasus", "list", "--"))
    assert _complete(script, "pegasus", "list", "--state", "bl") == ["blocked"]
    assert _complete(script, "pegasus", "run", "--machine", "") == ["classic", "reason_act"]


def test_zsh_completion_is_a_compdef_script(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["completion", "zsh"]) == 0
    script = capsys.readouterr().out
    assert script.startswith("#compdef pegasus") and "--offset" in script and "blocked" in script
    if shutil.which("zsh"):
        subprocess.run(["zsh", "-n"], input=script, text=True, check=True)  # it parses


SYSTEM = ["-h", "--json", "--config", "--port"]
FLAGS = {  # the command line's contract, as the README lists it
    "run": [*SYSTEM, "--machine", "--tier", "--priority", "--timeout"],
    "submit": [*SYSTEM, "--machine", "--tier", "--priority", "--file", "--key"],
    "status": SYSTEM, "history": SYSTEM, "suspend": SYSTEM, "resume": [*SYSTEM, "--message"], "cancel": SYSTEM, "tree": SYSTEM,
    "message": SYSTEM, "watch": [*SYSTEM, "--interval", "--limit"], "wait": [*SYSTEM, "--timeout"],
    "approve": SYSTEM, "retry": SYSTEM, "list": [*SYSTEM, "--state", "--limit", "--offset", "--text", "--meta"],
    "logs": [*SYSTEM, "--follow", "-f"], "delete": SYSTEM, "purge": [*SYSTEM, "--older-than", "--state"],
    "start": [*SYSTEM, "--leader", "--http"], "stop": SYSTEM, "join": [*SYSTEM, "--key-file", "--capability"],
    "stats": SYSTEM, "backup": [*SYSTEM, "--force"], "restore": SYSTEM, "machines": ["-h", "--json", "--mermaid"],
    "tools": ["-h", "--json", "--config"], "completion": ["-h"], "schedule": ["-h"], "webhook": ["-h"],
    "token": ["-h"],
    "memory": ["-h"], "identity": ["-h", "--json", "--config"],
    "dashboard": [*SYSTEM, "--no-open"],
}
ACTION_FLAGS = {  # pegasus schedule ACTION, pegasus webhook ACTION, pegasus memory ACTION
    "schedule": {"add": [*SYSTEM, "--cron", "--every", "--text", "--tz", "--machine", "--priority", "--overlap",
                         "--catchup"],
                 "list": SYSTEM, "pause": SYSTEM, "resume": SYSTEM, "trigger": SYSTEM, "remove": SYSTEM},
    "webhook": {"add": [*SYSTEM, "--text", "--secret-file", "--events"], "list": SYSTEM, "remove": SYSTEM},
    "memory": {"list": [*SYSTEM, "--prefix"], "search": [*SYSTEM, "-k", "--archive"], "show": SYSTEM,
               "write": SYSTEM, "forget": SYSTEM, "export": SYSTEM, "import": SYSTEM},
}


def test_every_command_and_its_flags() -> None:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices
    found = {name: [flag for action in sub._actions for flag in action.option_strings if flag != "--help"]
             for name, sub in commands.items()}
    assert found == FLAGS


def test_schedule_and_webhook_actions_and_their_flags() -> None:
    """Each action of ``schedule``, ``webhook`` and ``memory`` takes --json, --config and --port, and its own flags."""
    def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices

    commands = subcommands(build_parser())
    found = {name: {action: [flag for a in sub._actions for flag in a.option_strings if flag != "--help"]
                    for action, sub in subcommands(commands[name]).items()} for name in ACTION_FLAGS}
    assert found == ACTION_FLAGS
