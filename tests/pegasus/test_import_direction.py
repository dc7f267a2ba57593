"""Imports run one way: ``pegasus`` (the core) never imports ``actors`` or Thespian, and no module imports itself.

Every import is read from the source, also those inside functions (a circle
hidden behind a function-level import is still a circle), and resolved to the
project's module files; a circle through a package's ``__init__`` counts too.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pegasus", "actors")


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """Every module name ``name`` imports (at any depth of its code), absolute."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:  # a submodule of base, or a name of base's own
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return out


def _edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        targets = set()
        for imported in _imports(name, path):
            if imported in MODULES and imported != name:
                targets.add(imported)
        edges[name] = targets
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_the_core_imports_neither_actors_nor_thespian() -> None:
    """Issue 16: pegasus/cli.py imported actors.cli (the command line lives in actors/cli/ now)."""
    upward = {name: sorted(i for i in _imports(name, path) if i.split(".")[0] in ("actors", "thespian"))
              for name, path in MODULES.items() if name.split(".")[0] == "pegasus"}
    assert {name: found for name, found in upward.items() if found} == {}


# Below the carriers: what each lower folder of actors/ may import of actors/ (issue 30's layout).
BELOW = {"actors.wire": ("actors.wire",), "actors.messages": ("actors.messages",),
         "actors.runtime": ("actors.runtime", "actors.wire", "actors.messages")}


def test_the_runtime_the_wire_and_the_messages_import_nothing_above_them() -> None:
    """Issue 30: the convention module imported the client (start_leader built one), so starting a system
    walked runtime -> client -> runtime; a leader is Client.start_leader's now."""
    upward = set()
    for name, path in MODULES.items():
        allowed = next((below for folder, below in BELOW.items() if name == folder or name.startswith(folder + ".")),
                       None)
        if allowed is None:
            continue
        for imported in _imports(name, path):
            if imported.split(".")[0] == "actors" and imported != "actors" \
                    and not imported.startswith(tuple(f"{a}." for a in allowed) + allowed):
                upward.add((name, imported))
    assert upward == set()


def test_no_module_imports_itself_through_others() -> None:
    assert _cycles(_edges()) == []


def _folders(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The edges between the folders (and loose modules) right under each package: ``pegasus.tools``, ..."""
    def folder(name: str) -> str:
        return ".".join(name.split(".")[:2])

    folders: dict[str, set[str]] = {}
    for name, targets in edges.items():
        folders.setdefault(folder(name), set()).update(folder(t) for t in targets if folder(t) != folder(name))
    return folders


def test_no_folder_imports_itself_through_others() -> None:
    """Issue 30: tools/ and memory/ imported each other (``memory/tools.py`` up to the registry, ``plugins.py``
    down to it), store/ and ``views.py`` (``store_facts``), store/ and ``quarantine.py`` (``StoreUnavailable``):
    no module circle, yet two folders each above the other; in actors/ the guardian imported client/ (the
    gateway keeper) and runtime/ the guardian (the launcher)."""
    assert _cycles(_folders(_edges())) == []


def test_the_folder_check_sees_two_folders_that_import_each_other() -> None:
    edges = {"pegasus.tools.plugins": {"pegasus.memory.tools"}, "pegasus.memory.tools": {"pegasus.tools.registry"},
             "pegasus.tools.registry": set()}
    assert _cycles(edges) == [] and _cycles(_folders(edges)) == [["pegasus.memory", "pegasus.tools"]]


@pytest.mark.parametrize("source,expected", [
    ({"a": {"b"}, "b": {"c"}, "c": set()}, []),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}}, [["a", "b", "c"]]),
])
def test_the_circle_finder_finds_circles(source: dict[str, set[str]], expected: list[list[str]]) -> None:
    """The check can fail: a circle of three is found, a chain is not."""
    assert _cycles(source) == expected


def test_function_level_imports_are_read(tmp_path: Path) -> None:
    """The check sees an import hidden in a function (how the old client-supervisor-convention circle hid)."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from actors.client import Client\n\n\ndef g():\n    import pegasus.task.fsm\n")
    assert _imports("actors.probe", probe) == {"actors.client", "pegasus.task.fsm"}


LIFECYCLE = {"start_system", "start_daemon", "attach", "detach", "shutdown", "stop_daemon"}


def test_the_client_and_the_cli_start_attach_and_stop_a_system_only_through_lifecycle_system() -> None:
    """Issue 30: start went through ``Client._launch`` and ``convention.join``, stop through
    ``runtime.system`` (from the CLI); one object (``actors.runtime.lifecycle.System``) owns all three now."""
    direct = set()
    for name, path in MODULES.items():
        if not name.startswith(("actors.client", "actors.cli", "actors.runtime.convention")):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module == "actors.runtime.system":
                direct.update((name, alias.name) for alias in node.names if alias.name in LIFECYCLE)
    assert direct == set()


STATIC = ROOT / "pegasus" / "dashboard" / "static"
JS_IMPORT = re.compile(r'^\s*import\b[^;]*?\bfrom\s+"\./([\w.-]+\.js)"', re.M)


def _js_edges() -> dict[str, set[str]]:
    return {path.name: set(JS_IMPORT.findall(path.read_text())) for path in sorted(STATIC.glob("*.js"))}


def test_the_dashboards_modules_import_one_way() -> None:
    """Its modules made a circle of six: core.js took ``logout`` from app.js (the router), which imports
    every page; the router now hands core.js what a refused token does (``onRefusedToken``)."""
    edges = _js_edges()
    assert {"core.js", "task.js"} <= edges["app.js"]  # the reader reads these files
    assert _cycles(edges) == []
