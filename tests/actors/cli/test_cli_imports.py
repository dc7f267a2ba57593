"""What a command line imports (issue 31: ``--version``, ``status``, ``list`` in under 0.3 s).

Time is measured in the benchmarks (``python -m benchmarks cli``); these tests keep the cause away:
each command imports its own module only, and the costly ones (Thespian, pydantic, the tools,
the machines' tables, rich, Starlette) only where it needs them.  Each runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, sys
from actors.cli import main
try:
    status = main(sys.argv[1:])
except SystemExit as exc:
    status = exc.code
print(json.dumps({"status": status, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def imported(tmp_path: Path, *argv: str) -> tuple[int, set[str]]:
    env = {**os.environ, "PEGASUS_HOME": str(tmp_path), "PEGASUS_SYSTEM__ADMIN_PORT": "1"}
    done = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True, env=env,
                          timeout=120, check=False)
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["status"], set(report["modules"])


def loaded(modules: set[str], *roots: str) -> list[str]:
    return sorted(name for name in modules if name.split(".")[0] in roots or name in roots
                  or any(name.startswith(root + ".") for root in roots))


def test_version_imports_no_runtime(tmp_path: Path) -> None:
    """``pegasus --version`` builds no command: no Thespian, pydantic, client, settings or requests."""
    status, modules = imported(tmp_path, "--version")
    assert status == 0
    assert loaded(modules, "thespian", "pydantic", "rich", "starlette", "shtab", "actors.client", "actors.messages",
                  "pegasus.config", "pegasus.requests", "pegasus.task.machines", "actors.runtime.system") == []


def test_status_imports_only_what_asking_needs(tmp_path: Path) -> None:
    """``pegasus status ID`` (no system here) loads the client, not the tools, the admission core, the memory, rich
    or Starlette, nor the other commands' modules (the machines' tables may come with reading the store)."""
    status, modules = imported(tmp_path, "status", "abc")
    assert status == 1
    assert "actors.client" in modules
    assert loaded(modules, "rich", "starlette", "pegasus.tools", "pegasus.admission.core", "pegasus.memory",
                  "actors.supervisor", "actors.guardian", "actors.cli.watch", "actors.runtime.sharing",
                  "actors.cli.system", "actors.cli.memory", "actors.cli.local", "actors.cli.progress") == []



ASKING = """
import json, sys
from actors.cli import base, tasks
from actors.client import Client
from actors import messages as m
m.Get, m.ListTasks, m.Reply
print(json.dumps(sorted(sys.modules)))
"""


def test_asking_a_running_system_imports_neither_the_store_nor_the_other_requests() -> None:
    """What ``status`` and ``list`` import to ask a running system (the command, the client, their requests):
    not the store (only read when no system runs), not the requests of memory, schedules or tokens, not the
    schedules' module nor the state machines."""
    done = subprocess.run([sys.executable, "-c", ASKING], capture_output=True, text=True, timeout=120, check=True)
    modules = set(json.loads(done.stdout))
    assert "pegasus.requests.tasks" in modules
    assert loaded(modules, "pegasus.store.sqlite", "pegasus.store.reader", "pegasus.store.checkpoint",
                  "pegasus.requests.memory", "pegasus.requests.triggers", "pegasus.requests.tokens",
                  "pegasus.triggers", "pegasus.task.fsm", "pegasus.task.machines", "sqlite3") == []
