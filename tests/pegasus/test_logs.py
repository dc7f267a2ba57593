"""Structured logs: a line that cannot be written (a full disk) is dropped, never raised."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]

# Every descriptor of the log file is pointed at /dev/full (each write: ENOSPC), however
# logs.configure opened it; then the process logs.
FULL_DISK_SCRIPT = """
import os, sys
from pathlib import Path
from pegasus import logs
path = logs.configure(Path(sys.argv[1]))
logs.get("probe").info("before")
full = os.open("/dev/full", os.O_WRONLY)
for name in os.listdir("/proc/self/fd"):
    try:
        if os.readlink(f"/proc/self/fd/{name}") == str(path):
            os.dup2(full, int(name))
    except OSError:
        pass
for n in range(3):
    logs.get("probe").error("while the disk is full", n=n)
print("still running")
"""


def test_logging_on_a_full_disk_does_not_raise(tmp_path: Path) -> None:
    """Issue 15: on a full disk every log call raised, and the supervisor answered nothing."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", FULL_DISK_SCRIPT, str(tmp_path)], capture_output=True, text=True,
                            timeout=60, env=env, cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == "still running\n", result.stderr
    lines = (tmp_path / "logs" / "pegasus.jsonl").read_text().splitlines()
    assert len(lines) == 1 and '"before"' in lines[0]  # whole lines only: nothing half-written
