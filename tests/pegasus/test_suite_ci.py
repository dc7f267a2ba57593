"""What each collecting process of the suite costs (issue 30): CI's script (``.ci/run``) leaves pytest's rewritten
test modules cached before the run, and no process loads a pytest plugin the suite never uses.

Where ``PYTHONDONTWRITEBYTECODE`` is set (this VM, CI), pytest rewrites every test module's asserts at import
and keeps nothing, so each xdist worker did it again (13.4 s of CPU a collection, 4.5 s from the cache:
docs/testing.md).  pytest reads a cached rewrite whatever that setting; one collection with writing on
leaves it.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _commands() -> list[list[str]]:
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [shlex.split(line, comments=True) for line in lines
            if "pytest" in line and not line.lstrip().startswith("#")]


def _prepass() -> list[str]:
    [prepass] = [words for words in _commands() if "--collect-only" in words]
    return prepass


def test_a_collection_with_bytecode_written_comes_before_the_run() -> None:
    commands = _commands()
    prepass = _prepass()
    assert prepass[0] == "PYTHONDONTWRITEBYTECODE=", prepass  # emptied: Python writes when it is empty
    assert commands.index(prepass) < commands.index(["python", "-m", "pytest", "-q", "-n", "4"])


def test_that_collection_leaves_a_rewrite_a_run_without_bytecode_reads(tmp_path: Path) -> None:
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert 1 + 1 == 2\n", encoding="utf-8")
    # No third-party plugin: the rewrite and its cache are pytest's own, and loading them was most of each start.
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    words = _prepass()[1:]
    args = words[:min(words.index(end) for end in (">", "||") if end in words)] if {">", "||"} & set(words) else words
    assert args[:3] == ["python", "-m", "pytest"], args
    ran = subprocess.run([sys.executable, *args[1:], "--rootdir", str(tmp_path), str(tmp_path)],
                         env={**env, "PYTHONDONTWRITEBYTECODE": ""}, cwd=tmp_path, capture_output=True, text=True,
                         timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert [p.name for p in (tmp_path / "__pycache__").glob("test_one.*pytest*.pyc")], ran.stdout
    traced = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--debug",
                             str(tmp_path / "trace.log"), "--rootdir", str(tmp_path), str(tmp_path)],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert traced.returncode == 0, traced.stdout + traced.stderr
    assert "found cached rewritten pyc" in (tmp_path / "trace.log").read_text(encoding="utf-8")


def test_no_process_of_the_suite_loads_the_pytest_plugins_it_never_uses(request: pytest.FixtureRequest) -> None:
    """Schemathesis runs as its own CLI (tests/integration/test_openapi_conformance.py), no test is a
    pytest-benchmark or an anyio one: their plugins cost each collecting process ~0.85 s of CPU (3.5 s of 4.4)."""
    for name in ("schemathesis", "benchmark", "anyio"):
        assert not request.config.pluginmanager.has_plugin(name), name
