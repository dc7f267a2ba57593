"""No process of a system holds a heavy module it never uses (docs/memory.md, "What each process holds").

Every process is forked from the launcher, so what the launcher imports every process holds; a module
that one process imports later is that process's own.  The census (tests/support/census/sitecustomize.py,
put on the launcher's path) records, per process, what it held when forked and every module it imported
after: the modules each really holds, asked of a real system started as ``pegasus start`` starts it.  A command
line, its own process, is asked too (``-X importtime``): it pays every import on every run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.client import Client
from actors.runtime import procs
from actors.runtime.system import system_pids
from benchmarks.common import role_of, title_of
from tests.support.cli import SCRIPT

pytestmark = pytest.mark.integration

CENSUS = Path(__file__).resolve().parents[1] / "support" / "census"

# Never used by an offline system's processes, whatever their kind: the model SDK and its HTTP stack load
# only in an llm pool on a model endpoint (tests/integration/test_worker_memory.py), numpy only for vectors,
# the MCP SDK only in the MCP host, the gateway's server in its own process; structlog's optional
# console helpers never (pegasus/logs.py); asyncio (and ssl, concurrent.futures) and Pegasus's MCP client
# stack only where an MCP server is configured (pegasus/tools/plugins.py, actors/mcp_host.py); importlib.metadata
# only where read (pydantic's plugins are off in a system's processes); tomllib only where a file is read (a
# system's settings come as JSON), cronsim (and calendar) only for a cron schedule.
UNUSED = ("openai", "httpx", "httpcore", "numpy", "mcp", "anyio", "starlette", "uvicorn",
          "rich", "pygments", "colorama", "greenlet", "asyncio", "ssl", "_ssl", "concurrent",
          "pegasus.tools.mcp", "pegasus.tools.mcp_session",
          # importlib.metadata's own modules, email and csv: its stand-in loads none (actors/runtime/deferred.py)
          "importlib.metadata._meta", "email", "csv", "tomllib", "cronsim", "calendar")


def _census(folder: Path, pid: int) -> set[str]:
    return set((folder / str(pid)).read_text().split())


def test_no_process_of_an_offline_system_holds_a_module_it_never_uses(pegasus, tmp_path: Path, subprocess_env,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Idle and after a task.  Failed before structlog loaded without its console helpers: rich, pygments,
    colorama and greenlet (85 modules, ~4.7 MiB) were in every process; and before asyncio and the MCP
    client stack loaded only with an MCP server (37 modules, ~2.5 MiB).  The same system then shows what
    ``python -m benchmarks.memory --running`` measures (docs/memory.md's idle table): every process, by role."""
    folder = tmp_path / "census"
    folder.mkdir()
    monkeypatch.setenv("PEGASUS_TEST_MODULE_CENSUS", str(folder))  # the launcher's environment, and so the system's
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(CENSUS), os.environ.get("PYTHONPATH")) if p))
    client: Client = pegasus(daemon=True, pools={"llm_workers": 1, "tool_workers": 1})
    done = client.wait(client.submit("what is 6 * 7?")["task_id"], timeout=60)
    assert done["lifecycle_state"] == "done", done.get("error")
    held = {pid: (role_of(title_of(pid)), _census(folder, pid)) for pid in system_pids(client.spec)}
    roles = {role for role, _ in held.values()}
    # The pools run in the home host, a task actor (docs/architecture.md, "The home host").
    assert {"launcher", "admin", "logger", "guardian", "supervisor", "task actor", "llm worker",
            "tool worker"} <= roles, roles
    for role, modules in held.values():
        assert {"thespian", "pegasus.logs", "structlog"} <= modules, role  # the census sees what a process holds
        heavy = sorted(name for name in modules if name.partition(".")[0] in UNUSED or name in UNUSED)
        assert not heavy, f"{role} holds {heavy}"
    measured = subprocess.run([sys.executable, "-m", "benchmarks.memory", "--running"], capture_output=True, text=True,
                              env={**subprocess_env, "PEGASUS_HOME": str(client.spec.state_dir)}, timeout=120)
    assert measured.returncode == 0, measured.stderr
    rows = {line.split()[0]: line.split()[-1] for line in measured.stdout.splitlines()[2:]}
    assert {"launcher", "watcher", "admin", "logger", "guardian", "supervisor", "llm", "tool"} <= set(rows), rows
    assert float(rows["all"]) > 0


def _resident_file_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))


def test_the_launcher_of_a_running_system_maps_no_code_it_ran_only_to_start(pegasus) -> None:
    """Failed before (actors/runtime/sharing.release_file_pages): the launcher kept ~10 MiB of libpython's and the
    extension modules' pages mapped, run by its preload only (the import system, pydantic-core's schema builder)
    and mapped by no other process, ~4.5 MiB of an idle system's PSS on a quiet machine; its watcher ~1 MiB."""
    client: Client = pegasus(daemon=True, pools={"llm_workers": 1, "tool_workers": 1})
    roles = {role_of(title_of(pid)): pid for pid in system_pids(client.spec)}
    # 15 MiB before; ~3 MiB after, a little more once the launcher has run again (it maps back what it uses)
    assert _resident_file_kib(roles["launcher"]) < 6 * 1024, _resident_file_kib(roles["launcher"])


def _imported_by(argv: list[str], home: Path) -> set[str]:
    """Every module the ``pegasus`` command ``argv`` imported (``-X importtime``), run with no system on its port."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_") and k != "PYDANTIC_DISABLE_PLUGINS"}
    done = subprocess.run([sys.executable, "-X", "importtime", SCRIPT, *argv, "--port", str(procs.free_port())],
                          env={**env, "PEGASUS_HOME": str(home)}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "pegasus start" in done.stderr, done.stderr[-2000:]  # no system
    return {line.rpartition("|")[2].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}


def test_a_command_loads_neither_importlib_metadata_nor_rich_where_it_draws_nothing(tmp_path: Path) -> None:
    """A command is its own process: pydantic's plugins are off and ``importlib.metadata`` a stand-in before its parser
    builds the first model (before, that imported it, with email and csv, and scanned every installed distribution:
    ~20 ms of CPU a command); Rich loads only where something is drawn (before, every ``run`` and ``submit --file`` on
    a pipe imported it: ~22 ms)."""
    tasks = tmp_path / "tasks.txt"
    tasks.write_text("echo one\n")
    for argv in (["status", "some-task"], ["submit", "--file", str(tasks)]):
        imported = _imported_by(argv, tmp_path / "home")
        assert {"actors.cli.main", "pydantic", "pegasus.requests.base"} <= imported, argv  # models built: the census sees them
        assert not {"importlib.metadata", "email", "csv", "rich"} & imported, (argv, sorted(imported))
    assert "actors.cli.progress" in imported  # submit --file's bar: the module, not Rich


def test_a_transition_notice_unpickles_without_the_admission_core() -> None:
    """What a follower of a task receives (``pegasus run``, a client's subscription) loads ``pegasus.admission.commands``
    alone: the package no longer imports its core, and with it the tools, memory and store (~0.1 s of every ``run``)."""
    import pickle  # noqa: PLC0415

    from pegasus.admission.commands import TransitionNotice  # noqa: PLC0415

    notice = pickle.dumps(TransitionNotice("t-1", "lifecycle", "queued", "running", "TASK_STARTED", "2026-11-27"))
    probe = ("import pickle, sys; notice = pickle.loads(sys.stdin.buffer.read()); "
             "print(notice.to_state, *sorted(m for m in sys.modules if m.startswith('pegasus.')))")
    done = subprocess.run([sys.executable, "-c", probe], input=notice, capture_output=True, timeout=60, check=True)
    state, *loaded = done.stdout.decode().split()
    assert state == "running"
    assert "pegasus.admission.commands" in loaded
    assert not {"pegasus.admission.core", "pegasus.tools", "pegasus.memory", "pegasus.store"} & set(loaded), loaded
