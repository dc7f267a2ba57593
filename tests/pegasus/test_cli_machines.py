"""`pegasus machines`: the table, JSON and a Mermaid diagram, through the real console script."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from pegasus.cli import main


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


def test_unknown_machine_is_a_usage_error() -> None:
    with pytest.raises(SystemExit) as info:
        main(["machines", "nope"])
    assert info.value.code == 2


@pytest.mark.skipif(shutil.which("pegasus") is None, reason="console script not installed")
def test_console_script_runs() -> None:
    out = subprocess.run(["pegasus", "machines", "classic", "--json"], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout)["initial"] == "idle"


def test_module_entry_point() -> None:
    out = subprocess.run([sys.executable, "-m", "pegasus.cli", "machines"], capture_output=True, text=True, check=True)
    assert "lifecycle" in out.stdout


@pytest.mark.skipif(shutil.which("pegasus") is None, reason="console script not installed")
def test_a_closed_pipe_is_not_a_traceback() -> None:
    """`pegasus ... | head` ends quietly when the reader has gone: no traceback."""
    child = subprocess.Popen(["pegasus", "machines", "classic"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    child.stdout.close()  # the reader is gone before the first write
    stderr = child.stderr.read().decode()
    child.wait(timeout=30)
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr
