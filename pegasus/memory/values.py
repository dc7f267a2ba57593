"""What the memory holds, as values (no I/O): facts, episodes, archived tasks, search hits, and the path rules.

Ids are stable and name what a task was given: ``fact:<path>@<version>`` (a
version is never reused, even after ``forget``), ``episode:<n>`` (SQLite
AUTOINCREMENT: never reused) and ``task:<task_id>`` for an archived task.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any, Literal

from pegasus.memory.errors import BadMemoryPath

Kind = Literal["fact", "episode", "archive"]
KINDS: tuple[Kind, ...] = ("fact", "episode", "archive")
RECALLED: tuple[Kind, ...] = ("fact", "episode")  # what search returns unless asked for the archive too

PATH_MAX = 200
_PATH_CHARS = re.compile(r"[a-z0-9/_.\-]+")


def check_path(path: str) -> str:
    """``path`` when it is a fact path: relative, segments of [a-z0-9_.-] joined by '/', none empty or starting with
    '.', at most PATH_MAX characters.  BadMemoryPath says which rule it breaks."""
    if not isinstance(path, str) or not path:
        raise BadMemoryPath("a fact path must not be empty")
    if len(path) > PATH_MAX:
        raise BadMemoryPath(f"fact path is {len(path)} characters; at most {PATH_MAX}")
    if path.startswith("/"):
        raise BadMemoryPath(f"fact path {path!r} must be relative (no leading '/')")
    if not _PATH_CHARS.fullmatch(path):
        bad = sorted({c for c in path if not _PATH_CHARS.fullmatch(c)})
        raise BadMemoryPath(f"fact path {path!r} has {''.join(bad)!r}: only a-z 0-9 / _ . - are allowed "
                            "(lower case)")
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            raise BadMemoryPath(f"fact path {path!r} has an empty, '.' or '..' segment")
        if segment.startswith("."):
            raise BadMemoryPath(f"fact path {path!r}: a segment may not start with '.' ({segment!r})")
    return path


def normalise(text: str) -> str:
    """Stored text: trailing whitespace and leading blank lines dropped (an editor's final newline changes nothing,
    and export -> import -> export is exact)."""
    lines = text.rstrip().split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return "\n".join(lines)


def one_line(text: str) -> str:
    """A title: its whitespace runs (newlines too) as one space."""
    return " ".join(text.split())


@dataclass(frozen=True)
class Fact:
    path: str
    version: int
    content: str
    created_at: str
    task_id: str | None = None

    @property
    def id(self) -> str:
        return f"fact:{self.path}@{self.version}"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "fact", **asdict(self)}


@dataclass(frozen=True)
class Episode:
    episode_id: int
    task_id: str | None
    title: str
    summary: str
    details: str
    lesson: str
    created_at: str

    @property
    def id(self) -> str:
        return f"episode:{self.episode_id}"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "episode", **asdict(self)}


@dataclass(frozen=True)
class ArchivedTask:
    task_id: str
    input: str
    result: Any
    context: dict[str, Any] | bytes  # bytes: packed, in archive's answer when it was given so (codec.Packed)
    created_at: str

    @property
    def id(self) -> str:
        return f"task:{self.task_id}"

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "kind": "archive", **asdict(self)}


@dataclass(frozen=True)
class MemoryItem:
    """One search hit: ``title`` is a fact's path or an episode's title, ``text`` what goes in a prompt."""

    id: str
    kind: Kind
    title: str
    text: str
    score: float
    created_at: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def parse_id(item_id: str) -> tuple[Kind, str, int | None]:
    """(kind, key, version) of an id; a bare string is a fact path.  ``fact:a/b@3`` -> ("fact", "a/b", 3)."""
    kind, sep, rest = item_id.partition(":")
    if not sep:
        return "fact", check_path(item_id), None
    if kind == "fact":
        path, at, version = rest.partition("@")
        if at and not version.isdigit():
            raise BadMemoryPath(f"bad fact id {item_id!r}: the version after '@' must be a number")
        return "fact", check_path(path), int(version) if at else None
    if kind == "episode":
        if not rest.isdigit():
            raise BadMemoryPath(f"bad episode id {item_id!r}: expected episode:<number>")
        return "episode", rest, None
    if kind in ("task", "archive"):
        if not rest:
            raise BadMemoryPath(f"bad archive id {item_id!r}: expected task:<task id>")
        return "archive", rest, None
    raise BadMemoryPath(f"unknown memory id {item_id!r}: expected fact:<path>[@<version>], episode:<n>, "
                        "task:<task id> or a fact path")
