"""Every reference in the README and docs/ resolves, and the README stays a page a newcomer reads.

A reference is a document (a page of docs/ by its file name, a relative link) and its section (``#anchor``), a path
in the repository (``tests/...py``, ``pegasus/...``), a test (``file.py::test_name`` or a bare
``test_name``), a module or a name in one (``pegasus.llm.ratelimit.RateLimiter``), a command
(``pegasus memory search``) and a setting (``[llm] max_concurrent``).  Each check is shown to fail
on a made-up reference.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = re.compile(r"\bdocs/[A-Za-z0-9_.-]+\.md\b")
LINK = re.compile(r"\]\((?!https?://|#)([^)#\s]+)(?:#[^)]*)?\)")  # a relative Markdown link
ANCHORED = re.compile(r"\]\(([\w.-]*\.md)?#([\w-]+)\)|(?<![\w/])docs/([\w.-]+\.md)#([\w-]+)")
# A path in the repository: not inside another path, a URL, a word or a quoted key ("pegasus/idempotency_key").
PATH = re.compile(r"(?<![\w./\"'-])((?:pegasus|actors|tests|benchmarks|config|docs|\.ci)/[\w./-]*[\w/])(?:::(\w+))?")
TEST = re.compile(r"(?<![\w/.:])(test_\w+)(\*)?(?![\w./])")
DOTTED = re.compile(r"(?<![\w./-])((?:pegasus|actors)(?:\.\w+)+)")
NOT_MODULES = (".log", ".toml", ".db", ".jsonl", ".lock", ".md", ".json", ".py")
SECTION = re.compile(r"(?<![\w/])docs/([\w.-]+\.md),? \"([^\"\n]+)\"")  # docs/llm.md, "Rate budgets"
CODE = re.compile(r"`([^`\n]+)`")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
BENCHMARK = re.compile(r"python -m benchmarks(?:\.(\w+))?((?: [^\s#]+)*)")
SETTING = re.compile(r"^\[([a-z_]+(?:\.[a-z_]+)*)\] ([a-z_]+)\b")  # `[llm] max_concurrent`
COMMAND = re.compile(r"(?:^|\$ |&& |; |\| |\()pegasus ([a-z][a-z-]*)(?: ([a-z][a-z-]*))?")


def _tracked() -> list[Path]:
    names = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    untracked = subprocess.run(["git", "ls-files", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True,
                               text=True, check=True).stdout.split()
    return [ROOT / name for name in names + untracked
            if name.endswith((".py", ".md", ".toml", ".cfg")) and (ROOT / name).is_file()]


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _text(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", "")).replace(" ", "-")


@functools.cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for line in FENCE.sub("", _text(page)).splitlines():
        if match := re.match(r"#{1,6} (.+)", line):
            base = slug(match.group(1))
            found.add(base if base not in seen else f"{base}-{seen[base]}")
            seen[base] = seen.get(base, 0) + 1
    return frozenset(found)


def dangling_anchors(page: Path, text: str) -> list[str]:
    out = []
    for match in ANCHORED.finditer(text):
        name, anchor = (match.group(1), match.group(2)) if match.group(2) else (match.group(3), match.group(4))
        target = (page.parent / name if match.group(2) else ROOT / "docs" / name) if name else page
        if not target.is_file() or anchor not in anchors(target.resolve()):
            out.append(match.group(0))
    return out


def dangling_sections(text: str) -> list[str]:
    """Sections named by title: a heading that starts with it, or a paragraph led by it in bold."""
    out = []
    for match in SECTION.finditer(text):
        page, title = ROOT / "docs" / match.group(1), match.group(2)
        lines = FENCE.sub("", _text(page)).splitlines() if page.is_file() else []
        if not any(re.match(rf"#{{1,6}} {re.escape(title)}", line) or f"**{title}" in line for line in lines):
            out.append(match.group(0))
    return out


@functools.cache
def _test_names() -> frozenset[str]:
    return frozenset(re.findall(r"def (test_\w+)", "\n".join(_text(p) for p in (ROOT / "tests").rglob("*.py"))))


def dangling_paths(text: str) -> list[str]:
    out = []
    for match in PATH.finditer(text):
        path, test = ROOT / match.group(1).rstrip("."), match.group(2)
        if not path.exists() or (test and not re.search(rf"def {test}\b", _text(path))):
            out.append(match.group(0))
    return out


def dangling_tests(text: str) -> list[str]:
    names = _test_names()
    return [match.group(0) for match in TEST.finditer(text)
            if not (any(n.startswith(match.group(1)) for n in names) if match.group(2) else match.group(1) in names)]


@functools.cache
def _names_in(path: Path) -> frozenset[str]:
    """What ``path`` defines at its top level and in its classes (a lazy ``__getattr__``'s names are strings)."""
    tree = ast.parse(_text(path))
    names = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Store):
            names.add(node.id if isinstance(node, ast.Name) else node.attr)
    return frozenset(names)


@functools.cache
def _quoted_in_code() -> str:
    return "\n".join(_text(p) for p in [*(ROOT / "pegasus").rglob("*.py"), *(ROOT / "actors").rglob("*.py")])


def unresolved_module(dotted: str) -> bool:
    """True when ``dotted`` starts as a module of the project and names what it does not have."""
    parts = dotted.split(".")
    if dotted.endswith(NOT_MODULES) or not (ROOT / parts[0] / parts[1]).with_suffix(".py").exists() \
            and not (ROOT / parts[0] / parts[1]).is_dir():
        return False  # not a module reference: pegasus.toml, pegasus.llm_workers (a capability) ...
    if f'"{dotted}"' in _quoted_in_code():
        return False  # a name the code uses as a string: an OpenTelemetry attribute such as pegasus.task.id
    here = ROOT / parts[0]
    for i, part in enumerate(parts[1:], start=1):
        if (here / part).is_dir():
            here = here / part
        elif (here / f"{part}.py").is_file():
            return any(name not in _names_in(here / f"{part}.py") for name in parts[i + 1:i + 3])
        else:
            init = here / "__init__.py"
            return not init.is_file() or part not in _names_in(init)
    return False


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its subparsers here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


@functools.cache
def _commands() -> dict[str, argparse.ArgumentParser]:
    from actors.cli.main import build_parser
    return _subcommands(build_parser())


@functools.cache
def _scenarios() -> frozenset[str]:
    sources = "\n".join(_text(path) for path in (ROOT / "benchmarks").glob("*.py"))
    return frozenset(re.findall(r'^NAME = "(\w+)"', sources, re.M))


def dangling_commands(text: str) -> list[str]:
    """``pegasus`` commands the CLI's parser lacks; ``python -m benchmarks`` modules or scenarios that do not exist."""
    spans = CODE.findall(FENCE.sub("", text)) + [line for fence in FENCE.findall(text) for line in fence.splitlines()]
    out = []
    for span in spans:
        for match in BENCHMARK.finditer(span):
            only = re.findall(r"--only (\w+)", match.group(2))
            if (match.group(1) and not (ROOT / "benchmarks" / f"{match.group(1)}.py").is_file()) \
                    or any(name not in _scenarios() for name in only):
                out.append(match.group(0))
        for match in COMMAND.finditer(span.strip()):
            command, sub = match.group(1), match.group(2)
            subs = _subcommands(_commands()[command]) if command in _commands() else {}
            if command not in _commands() or (sub and subs and sub not in subs):
                out.append(match.group(0).strip(" $(&;|"))
    return out


def unknown_setting(section: str, key: str) -> bool:
    """True when ``[section] key`` is no setting of ``pegasus.config.Settings`` (a dict section takes any key)."""
    from pegasus.config import Settings
    model: Any = Settings
    for part in section.split("."):
        field = model.model_fields.get(part) if hasattr(model, "model_fields") else None
        if field is None:
            return True
        model = field.annotation
    return hasattr(model, "model_fields") and key not in model.model_fields


def dangling_settings(text: str) -> list[str]:
    return [f"[{m.group(1)}] {m.group(2)}" for span in CODE.findall(FENCE.sub("", text))
            if (m := SETTING.match(span)) and unknown_setting(m.group(1), m.group(2))]


def test_every_docs_reference_names_a_file_that_exists() -> None:
    missing = sorted({(str(path.relative_to(ROOT)), ref) for path in _tracked()
                      for ref in REFERENCE.findall(_text(path))
                      if not (ROOT / ref).is_file() and "/tests/" not in f"/{path.relative_to(ROOT)}"})
    assert missing == []


def test_every_relative_link_of_the_readme_and_docs_resolves() -> None:
    broken = sorted((str(page.relative_to(ROOT)), target) for page in _pages()
                    for target in LINK.findall(_text(page)) if not (page.parent / target).exists())
    assert broken == []


def test_every_anchor_and_section_title_names_a_section_of_its_page() -> None:
    code = [p for p in _tracked() if p.suffix == ".py" and not p.is_relative_to(ROOT / "tests")]
    broken = sorted((str(path.relative_to(ROOT)), ref) for path in [*_pages(), *code]
                    for ref in [*dangling_anchors(path, _text(path)), *dangling_sections(_text(path))])
    assert broken == []


def test_every_path_test_module_command_and_setting_the_readme_and_docs_name_exists() -> None:
    broken = sorted((page.name, kind, ref) for page in _pages() for kind, refs in (
        ("path", dangling_paths(_text(page))), ("test", dangling_tests(_text(page))),
        ("module", [d for d in DOTTED.findall(_text(page)) if unresolved_module(d)]),
        ("command", dangling_commands(_text(page))), ("setting", dangling_settings(_text(page)))) for ref in refs)
    assert broken == []


def test_the_reference_checks_can_fail() -> None:
    missing = "docs/" + "no-such-page.md"  # split so that no checker takes this test for a citation
    assert REFERENCE.findall(f"see {missing} for it") == [missing]
    assert LINK.findall(f"[a]({missing}#part) [b](https://e.org) [c](#here)") == [missing]
    page = ROOT / "docs" / "architecture.md"
    assert dangling_anchors(page, "[a](#the-store) [b](#no-such-part) docs/durability.md#nowhere") == [
        "](#no-such-part)", "docs/durability.md#nowhere"]
    assert dangling_sections('docs/llm.md, "Rate budgets"; docs/tools.md, "The workspace"; '
                             'docs/architecture.md, "The store"; docs/llm.md, "No such part"') == [
        'docs/llm.md, "No such part"']
    assert dangling_paths("`pegasus/pool/core.py` `tests/pegasus/no_such.py` "
                          "`tests/pegasus/test_docs.py::test_no_such` \"pegasus/idempotency_key\"") == [
        "tests/pegasus/no_such.py", "tests/pegasus/test_docs.py::test_no_such"]
    assert dangling_tests("test_the_readme_is_short, test_the_reference_*, test_" + "nothing_of_that_name") == [
        "test_" + "nothing_of_that_name"]
    assert [d for d in DOTTED.findall("pegasus.llm.ratelimit.RateLimiter pegasus.llm.ratelimit.NoSuch "
                                      "pegasus.task.id pegasus.toml pegasus.no_such_module pegasus.store.Store")
            if unresolved_module(d)] == ["pegasus.llm.ratelimit.NoSuch"]
    assert dangling_settings("`[llm] max_concurrent` `[llm.stages] post_reflect` `[llm] no_such_key` "
                             "`[no_such] key`") == ["[llm] no_such_key", "[no_such] key"]
    assert dangling_commands("`pegasus memory search X` `pegasus memory find X`\n```\n$ pegasus launch\n```") == [
        "pegasus memory find", "pegasus launch"]
    assert dangling_commands("`python -m benchmarks --only hop --only cpu` `python -m benchmarks.hoptrace` "
                             "`python -m benchmarks --only hops` `python -m benchmarks.nothing`") == [
        "python -m benchmarks --only hops", "python -m benchmarks.nothing"]


def test_slugs_are_githubs() -> None:
    assert slug("Issue 30: the task actor's host core and `lifecycle.System` (hop, pool)") == \
        "issue-30-the-task-actors-host-core-and-lifecyclesystem-hop-pool"
    assert slug("Embeddings (optional)") == "embeddings-optional"


MODULE_DOCSTRING_LINES = 8  # what a module owns and why, in a few lines: figures and history go to docs/ and commits
DOCSTRING_LINES = 8  # a function's or class's too


def _sources() -> list[Path]:
    return sorted(p for package in ("actors", "pegasus", "benchmarks") for p in (ROOT / package).rglob("*.py"))


def _lines(node: ast.AST) -> int:
    return len((ast.get_docstring(node, clean=False) or "").splitlines())  # type: ignore[arg-type]


def test_every_module_says_what_and_why_in_a_few_lines() -> None:
    long = []
    for path in _sources():
        lines = _lines(ast.parse(_text(path)))
        if not 0 < lines <= MODULE_DOCSTRING_LINES:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert long == []


def test_every_function_and_class_docstring_says_what_and_why_in_a_few_lines() -> None:
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {_lines(node)} lines" for path in _sources()
            for node in ast.walk(ast.parse(_text(path)))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and _lines(node) > DOCSTRING_LINES]
    assert long == []


def test_the_readme_is_short() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300
