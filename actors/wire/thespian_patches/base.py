"""What every Thespian patch shares: the pinned version, the targets it touches, and their check.

Each patch names its targets (what it replaces, wraps or relies on) with a SHA-256 of the source
it was written against, captured at import before anything is patched; the check compares it and
that nothing else replaced it since.  No patch module raises at import: the check reports.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
import linecache
from dataclasses import dataclass
from pathlib import Path
from types import CodeType
from typing import Any

PINNED = "4.0.1"  # setup.cfg pins the same (tests/actors/wire/test_thespian_patches.py)
DOCS = "docs/thespian-patches.md"
MARK = "__pegasus_patch__"  # on every object a patch installs: the name of the patch
_MISSING = object()


class Kind(enum.Enum):
    SECURITY = "security"  # keeps strangers out, files private.  Cannot apply: refuse to start
    ROBUSTNESS = "robustness"  # without it Pegasus is wrong (a dead admin, a wedge).  Cannot apply: refuse to start
    SPEED = "speed"  # without it Pegasus is only slower.  Cannot apply: run without it, and say so

    @property
    def required(self) -> bool:
        """Whether a patch of this kind that cannot apply refuses the start."""
        return self is not Kind.SPEED


def installed_version() -> str | None:
    """The version of the installed Thespian distribution (None when it has no metadata): read from the one
    ``thespian-*.dist-info`` beside the package imported, else from ``importlib.metadata``, which a system's
    processes do not load otherwise (actors/runtime/deferred.py)."""
    import thespian  # noqa: PLC0415 - loaded already by whoever patches it

    found = list(Path(thespian.__path__[0]).parent.glob("thespian-*.dist-info"))
    if len(found) == 1:
        for line in _lines(found[0] / "METADATA"):
            if line.startswith("Version:"):
                return line.partition(":")[2].strip()
    from importlib import metadata  # noqa: PLC0415

    try:
        return metadata.version("thespian")
    except metadata.PackageNotFoundError:
        return None


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").split("\n\n", 1)[0].splitlines()  # the headers only
    except OSError:
        return []


def fingerprint(value: Any, members: dict[str, Any] | None = None) -> str:
    """What a target is: a hash of its source for code, its name for a module, "value" for a setting.

    The source, not the signature (a changed body keeps its signature) nor the bytecode (which differs
    between Python versions for the same Thespian).  A class: its own functions' sources (of ``members``,
    its namespace as imported, where given).
    """
    if value is _MISSING:
        return "missing"
    code: Any = value.fget if isinstance(value, property) else value
    if inspect.ismodule(code):
        return f"module {code.__name__}"
    if inspect.isbuiltin(code):
        return f"builtin {code.__qualname__}"
    if inspect.isclass(code):
        found_members = vars(code) if members is None else members
        parts = [f"{name} {fingerprint(member)}" for name, member in sorted(found_members.items())
                 if inspect.isfunction(member) or isinstance(member, (property, staticmethod, classmethod))]
        source = f"class {code.__qualname__}({', '.join(b.__qualname__ for b in code.__bases__)})\n" + "\n".join(parts)
    elif isinstance(code, (staticmethod, classmethod)):
        return fingerprint(code.__func__)
    elif hasattr(code, "__code__"):
        found = _source(code.__code__)
        if found is None:
            return "no source"
        source = found
    else:
        return "value"  # a setting Thespian reads: only that it is there matters
    return "source " + hashlib.sha256(source.encode()).hexdigest()[:16]


def _source(code: CodeType) -> str | None:
    """The source lines of a function, from its first line to the last line any of its code is on.

    (What inspect.getsource returns but for trailing comments, at a tenth of its cost: it tokenizes.)
    """
    lines = linecache.getlines(code.co_filename)
    if not lines:
        return None
    return "".join(lines[code.co_firstlineno - 1:_last_line(code)])


def _last_line(code: CodeType) -> int:
    last = max((line for _, _, line in code.co_lines() if line is not None), default=code.co_firstlineno)
    return max([last, *(_last_line(const) for const in code.co_consts if isinstance(const, CodeType))])


def is_ours(value: Any) -> bool:
    return hasattr(value.fget if isinstance(value, property) else value, MARK)


def mark(value: Any, patch: str) -> Any:
    """Tag what a patch installs (a property's getter for a property); returns value."""
    setattr(value.fget if isinstance(value, property) else value, MARK, patch)
    return value


class Target:
    """One attribute of Thespian a patch touches, as it was when this module was imported."""

    __slots__ = ("owner", "name", "expected", "original", "members")

    def __init__(self, owner: Any, name: str, expected: str) -> None:
        self.owner, self.name, self.expected = owner, name, expected
        self.original: Any = getattr(owner, name, _MISSING)
        # A class's namespace now, before any patch: another patch may replace one of its members later.
        self.members = dict(vars(self.original)) if inspect.isclass(self.original) else None

    def found(self) -> str:
        """The fingerprint of what this target was when imported."""
        return fingerprint(self.original, self.members)

    @property
    def label(self) -> str:
        """``TCPTransport._next_XMIT_2`` for a class's attribute, ``transport.TCPTransport.ackMsg`` for a module's."""
        if inspect.ismodule(self.owner):
            return f"{self.owner.__name__.removeprefix('thespian.system.')}.{self.name}"
        return f"{self.owner.__qualname__}.{self.name}"

    def problem(self) -> str | None:
        found = self.found()
        if found != self.expected:
            return f"{self.label} is not the code the patch was written for ({found}, expected {self.expected})"
        if self.expected != "value":
            current = getattr(self.owner, self.name, _MISSING)
            if current is not self.original and not is_ours(current):
                return f"{self.label} was replaced by something other than Pegasus"
        return None

    def replace(self, value: Any, patch: str) -> None:
        setattr(self.owner, self.name, value if self.expected == "value" else mark(value, patch))


@dataclass(frozen=True)
class Patch:
    """A patch: its name, kind, section of docs/thespian-patches.md and targets."""

    name: str
    kind: Kind
    section: str
    targets: tuple[Target, ...]

    def problem(self, version: str | None) -> str | None:
        """Why the patch cannot apply here, or None."""
        if version != PINNED:
            return f"Thespian {version or '(unknown version)'} is installed; the patch is written for {PINNED}"
        for target in self.targets:
            found = target.problem()
            if found:
                return found
        return None

    @property
    def where(self) -> str:
        return f"{DOCS}#{self.section}"


def wrap(target: Target, patch: str, make: Any) -> None:
    """Install ``make(current)`` over target, once: a second install finds itself in the chain.

    For two patches around the same function (the child starters): each wraps what is there.
    """
    current = getattr(target.owner, target.name)
    link = current
    while link is not None:
        if getattr(link, MARK, None) == patch:
            return
        link = getattr(link, "__wrapped__", None)
    wrapper = make(current)
    wrapper.__wrapped__ = current
    target.replace(wrapper, patch)
