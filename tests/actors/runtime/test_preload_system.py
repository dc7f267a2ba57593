"""What a system's processes share (actors/runtime/sharing.preload_system, issue 33): the actor tree
and every pydantic schema are built once, before the admin is forked, and every forked process
freezes what it inherited (each process built the config's schemas at its first Settings: 0.05-0.3 s
of CPU, and the collections of that build copied 6-13 MiB of inherited heap; docs/memory.md)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pydantic

from actors.runtime import sharing

REPO = Path(__file__).resolve().parents[3]


def _models(root: type) -> list[type]:
    return [m for sub in root.__subclasses__() for m in (sub, *_models(sub))]


def test_after_the_preload_no_schema_of_pegasus_is_left_to_build() -> None:
    sharing.preload_system(freeze_here=False)
    ours = [m for m in _models(pydantic.BaseModel) if m.__module__.startswith(("pegasus.", "actors."))]
    from pegasus.config import Settings
    assert Settings in ours and len(ours) > 50  # the actor tree is loaded: the config, the task models, ...
    assert [m.__qualname__ for m in ours if not m.__pydantic_complete__] == []


def test_a_process_forked_after_the_preload_freezes_what_it_inherited_and_this_one_does_not() -> None:
    sharing.preload_system(freeze_here=False)
    here = gc.get_freeze_count()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports and exits
        os.write(write, str(gc.get_freeze_count()).encode())
        os._exit(0)
    os.close(write)
    try:
        frozen = int(os.read(read, 64))
    finally:
        os.close(read)
        os.waitpid(child, 0)
    assert frozen > 1000 and frozen > here  # the whole inherited heap
    assert gc.get_freeze_count() <= here  # the client's own process froze nothing (a frozen object may be freed)


LAUNCHER_PRELOAD = """
import sys
from actors.runtime import sharing
from pegasus.config import Settings

layers = {"state": {"home": sys.argv[1]}, "tools": {"plugins": ["tests.support.tools:register", "no_such_plugin:x"]}}
if sys.argv[2] == "mcp":
    layers["mcp"] = {"servers": [{"name": "probe", "command": "true"}]}
sharing.preload_system(freeze_here=True, settings_json=Settings().with_overrides(layers).model_dump_json())
print(*(name in sys.modules for name in ("tests.support.tools", "asyncio", "pegasus.tools.mcp")))
"""


def test_the_launcher_loads_the_plugins_once_for_all_and_the_mcp_stack_only_with_a_server(tmp_path: Path) -> None:
    """The tool plugins were imported by the supervisor and each pool apart (three copies; -1.5 MiB in
    the cpu benchmark's idle system once shared); asyncio and Pegasus's MCP client stack only where a
    server is configured (docs/memory.md).  A plugin that cannot load is left to where it is used."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for mcp, expected in (("", "True False False"), ("mcp", "True True True")):
        done = subprocess.run([sys.executable, "-c", LAUNCHER_PRELOAD, str(tmp_path / mcp), mcp], env=env,
                              capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == expected.split(), mcp


FORKED_ALLOCATOR = """
import os
from actors.runtime.deferred import defer_metadata; defer_metadata()
from actors.runtime import sharing
sharing.preload_system(freeze_here=True)
read, write = os.pipe()
child = os.fork()
if child == 0:
    def private_kib():
        with open("/proc/self/smaps_rollup", encoding="ascii") as rollup:
            return sum(int(line.split()[1]) for line in rollup if line.startswith(("Private_Clean", "Private_Dirty")))
    before = private_kib()
    # 50 new objects of each of the allocator's 32 small sizes (16 to 512 bytes): 422 KiB
    kept = [[object() for _ in range(50)], [(1 << 40) + n for n in range(50)]]
    kept += [[bytes(size - 33) for _ in range(50)] for size in range(48, 513, 16)]
    os.write(write, str(private_kib() - before).encode())
    os._exit(0)
os.waitpid(child, 0)
print(os.read(read, 64).decode())
"""


def test_what_a_process_forked_from_the_launcher_allocates_goes_to_pages_of_its_own() -> None:
    """Failed before (actors/runtime/free_blocks.py): the launcher's small-object pools had ~370 KiB of free
    blocks, each in a page all 14 processes share, so a child's first objects filled them and copied a page
    for each: 422 KiB of new objects made 1,028 KiB private, 560 KiB since."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", FORKED_ALLOCATOR], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) < 1.6 * 50 * sum(range(16, 513, 16)) / 1024


RELEASE = """
import json, sqlite3
from actors.runtime import sharing

def resident_file_kib():
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("RssFile:"))

before = resident_file_kib()
released = sharing.release_file_pages()
after = resident_file_kib()
import decimal  # code runs on: its pages map back in; ld.so's relocated read-only data was left whole
assert sqlite3.connect(":memory:").execute("select 40 + 2").fetchone() == (42,)
print(json.dumps({"before": before, "after": after, "released": released, "pi": str(decimal.Decimal(22) / 7)[:4]}))
"""


def test_a_process_releases_its_pages_of_read_only_files_and_runs_on() -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", RELEASE], env=env, capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["pi"] == "3.14" and report["released"] > 0
    assert report["after"] < report["before"] / 2, report
