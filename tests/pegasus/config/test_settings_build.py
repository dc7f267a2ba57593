"""What reading the settings builds (issue 30: every CLI command reads them): one validator, the settings'
own, never one per section as well (calling a section's class to make its default built its validator too)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = """
import json, pydantic
from pegasus.config import Settings, sections, settings
settings.load(environ={"PEGASUS_HOME": "/nonexistent"})
Settings().with_overrides({"runtime": {"max_active_tasks": 2}})
print(json.dumps(sorted(name for name, cls in vars(sections).items() if isinstance(cls, type)
                        and issubclass(cls, pydantic.BaseModel) and cls.__pydantic_complete__)))
"""


def test_reading_the_settings_builds_no_sections_own_validator() -> None:
    root = str(Path(__file__).resolve().parents[3])
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True,
                          cwd=root)
    assert json.loads(done.stdout) == []
