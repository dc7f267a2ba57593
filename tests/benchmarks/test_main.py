"""``python -m benchmarks``'s scenario table: each name runs its own module, imported only when it runs (a
quick test runs one scenario a process: the other fifteen modules' imports were CPU it never used)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from benchmarks.__main__ import OPT_IN, SCENARIOS

ROOT = Path(__file__).resolve().parents[2]


def test_each_name_is_the_name_its_module_gives_itself() -> None:
    for name, module in {**SCENARIOS, **OPT_IN}.items():
        source = (ROOT / "benchmarks" / f"{module}.py").read_text(encoding="utf-8")
        assert re.search(rf'^NAME = "{name}"$', source, re.MULTILINE), (name, module)


def test_the_entry_point_imports_no_scenario_until_one_runs() -> None:
    check = ("import sys, benchmarks.__main__ as entry; "
             "print(sorted(m for m in sys.modules if m.startswith('benchmarks.') and m != 'benchmarks.__main__'))")
    done = subprocess.run([sys.executable, "-c", check], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['benchmarks.machine']"], done.stdout
