"""The README's examples run as written (in a tmp state dir, on a free port)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_the_readme_has_the_two_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    assert "pip install -e . && pegasus run" in text
    assert "pip install -e '.[test]' && python -m pytest -q" in text
    ci = (README.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "python -m pytest -q" in ci and "pip install --quiet -e '.[test]'" in ci


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
