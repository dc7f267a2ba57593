"""Every reference to a document resolves, and the README stays a page a newcomer reads."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"\bdocs/[A-Za-z0-9_.-]+\.md\b")
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")  # a relative Markdown link


def _tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()
    return [ROOT / name for name in names + untracked
            if name.endswith((".py", ".md", ".toml", ".cfg")) and (ROOT / name).is_file()]


def test_every_docs_reference_names_a_file_that_exists() -> None:
    missing = sorted({(str(path.relative_to(ROOT)), ref) for path in _tracked()
                      for ref in REFERENCE.findall(path.read_text(encoding="utf-8", errors="replace"))
                      if not (ROOT / ref).is_file() and "/tests/" not in f"/{path.relative_to(ROOT)}"})
    assert missing == []


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = sorted((str(page.relative_to(ROOT)), target) for page in pages
                    for target in LINK.findall(page.read_text(encoding="utf-8"))
                    if not (page.parent / target).exists())
    assert broken == []


def test_the_reference_check_can_fail() -> None:
    missing = "docs/" + "no-such-page.md"  # split so that no checker takes this test for a citation
    assert REFERENCE.findall(f"see {missing} for it") == [missing]
    assert LINK.findall(f"[a]({missing}#part) [b](https://e.org) [c](#here)") == [missing]


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300
