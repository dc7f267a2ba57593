"""The type checker passes: strict for the pure core (setup.cfg [mypy-...]), checked for the rest."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_mypy_passes_on_pegasus_and_actors(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is in the test extra")
    out = subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "cache"), "pegasus", "actors"],
                         cwd=REPO, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
