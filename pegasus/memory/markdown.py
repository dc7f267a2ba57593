"""Memory as Markdown a person reads and edits: ``facts/<path>.md`` and ``episodes/YYYY-MM.md``.

A fact file is a small front matter and the content; a month's episode file has one ``## title``
section per episode.  A body line starting with ``#`` or ``\\`` gets a ``\\`` before it, so no text
passes for a heading, and ``render`` then ``parse`` gives back the same values (export -> import
-> export writes the same files).  ``read_dir`` and ``write_dir`` are the only I/O here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from pegasus.files import private_dir, write_private
from pegasus.memory.errors import BadMemoryPath, MemoryFormatError, MemoryStoreError
from pegasus.memory.values import Episode, Fact, check_path, normalise

FACTS, EPISODES = "facts", "episodes"
FIELDS = ("summary", "details", "lesson")
_MONTH_FILE = re.compile(r"\d{4}-\d{2}\.md")
_META = re.compile(r"- (\w+): ?(.*)")


@dataclass(frozen=True)
class Dump:
    """What an export holds and an import reads: every fact's current version and every episode.
    An episode read from a file may lack an id (``episode_id`` 0: a new one) or a time (``created_at`` "")."""

    facts: list[Fact] = field(default_factory=list)
    episodes: list[Episode] = field(default_factory=list)


# -- rendering -------------------------------------------------------------------------------
def _escape(text: str) -> str:
    return "\n".join("\\" + line if line.startswith(("#", "\\")) else line for line in text.split("\n"))


def render_fact(fact: Fact) -> str:
    meta = [f"path: {fact.path}", f"version: {fact.version}", f"updated_at: {fact.created_at}"]
    if fact.task_id:
        meta.append(f"task: {fact.task_id}")
    return "---\n" + "\n".join(meta) + "\n---\n" + fact.content + "\n"


def render_month(month: str, episodes: Iterable[Episode]) -> str:
    out = [f"# Episodes {month}"]
    for episode in episodes:
        out += ["", f"## {episode.title}", f"- id: {episode.id}"]
        if episode.task_id:
            out.append(f"- task: {episode.task_id}")
        out.append(f"- when: {episode.created_at}")
        for name in FIELDS:
            text = getattr(episode, name)
            if text:
                out += ["", f"### {name.capitalize()}", "", _escape(text)]
    return "\n".join(out) + "\n"


def render(dump: Dump) -> dict[str, str]:
    """Relative file path -> text of every file of an export."""
    files = {f"{FACTS}/{fact.path}.md": render_fact(fact) for fact in dump.facts}
    months: dict[str, list[Episode]] = {}
    for episode in sorted(dump.episodes, key=lambda e: e.episode_id):
        months.setdefault(episode.created_at[:7], []).append(episode)
    for month, episodes in months.items():
        files[f"{EPISODES}/{month}.md"] = render_month(month, episodes)
    return files


# -- parsing ---------------------------------------------------------------------------------
def parse_fact(name: str, text: str) -> Fact:
    """The fact of ``facts/<path>.md`` (``name``: that relative path)."""
    if not name.startswith(f"{FACTS}/") or not name.endswith(".md"):
        raise MemoryFormatError(name, 1, "a fact file is facts/<path>.md")
    try:
        path = check_path(name[len(FACTS) + 1:-3])
    except BadMemoryPath as exc:
        raise MemoryFormatError(name, 1, str(exc)) from None
    lines = text.split("\n")
    if lines[0] != "---":
        raise MemoryFormatError(name, 1, "expected '---' (the front matter: path, version, updated_at)")
    meta: dict[str, str] = {}
    for number, line in enumerate(lines[1:], start=2):
        if line == "---":
            body = "\n".join(lines[number:])
            break
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep or key.strip() not in ("path", "version", "updated_at", "task"):
            raise MemoryFormatError(name, number, f"expected 'path|version|updated_at|task: value', got {line!r}")
        meta[key.strip()] = value.strip()
    else:
        raise MemoryFormatError(name, 1, "the front matter opened here has no closing '---'")
    if meta.get("path", path) != path:
        raise MemoryFormatError(name, 2, f"path {meta['path']!r} is not the file's path {path!r}")
    version = meta.get("version", "0")
    if not version.isdigit():
        raise MemoryFormatError(name, 2, f"version must be a number, got {version!r}")
    content = normalise(body)
    if not content:
        raise MemoryFormatError(name, len(lines), "the fact is empty (delete the file, or `pegasus memory forget`)")
    return Fact(path, int(version), content, meta.get("updated_at", ""), meta.get("task") or None)


def parse_month(name: str, text: str) -> list[Episode]:
    """The episodes of ``episodes/YYYY-MM.md``."""
    episodes: list[Episode] = []
    current: dict[str, str] | None = None
    field_name, body = "", list[str]()
    first = True

    def close_field() -> None:
        if current is not None and field_name:
            current[field_name] = normalise("\n".join(line[1:] if line.startswith("\\") else line for line in body))

    def close_episode(number: int) -> None:
        close_field()
        if current is not None:
            episodes.append(_episode(name, number, current))

    for number, line in enumerate(text.split("\n"), start=1):
        if first and line.strip():
            if not line.startswith("# "):
                raise MemoryFormatError(name, number, "expected '# Episodes YYYY-MM' first")
            first = False
        elif line.startswith("## "):
            close_episode(number)
            current, field_name, body = {"title": line[3:], "line": str(number)}, "", []
        elif line.startswith("### "):
            if current is None:
                raise MemoryFormatError(name, number, "a '###' section outside an episode ('## title' first)")
            close_field()
            field_name, body = line[4:].strip().lower(), []
            if field_name not in FIELDS:
                raise MemoryFormatError(name, number, f"unknown section {line[4:]!r}: Summary, Details or Lesson")
        elif line.startswith("#"):
            raise MemoryFormatError(name, number, f"unexpected heading {line!r} (a body line starting with '#' is "
                                                  "written '\\#')")
        elif field_name:
            body.append(line)
        elif current is not None and line.strip():
            match = _META.fullmatch(line)
            if match is None or match.group(1) not in ("id", "task", "when"):
                raise MemoryFormatError(name, number, f"expected '- id|task|when: value', got {line!r}")
            current[match.group(1)] = match.group(2).strip()
        elif line.strip():
            raise MemoryFormatError(name, number, "text before the first '## title'")
    close_episode(0)
    return episodes


def _episode(name: str, end: int, fields: dict[str, str]) -> Episode:
    line = int(fields["line"])
    episode_id = 0
    if "id" in fields:
        kind, _, number = fields["id"].partition(":")
        if kind != "episode" or not number.isdigit():
            raise MemoryFormatError(name, line, f"bad id {fields['id']!r}: expected episode:<number>")
        episode_id = int(number)
    title = " ".join(fields["title"].split())
    if not title:
        raise MemoryFormatError(name, line, "an episode needs a title after '## '")
    return Episode(episode_id, fields.get("task") or None, title, fields.get("summary", ""),
                   fields.get("details", ""), fields.get("lesson", ""), fields.get("when", ""))


def parse(files: dict[str, str]) -> Dump:
    """The memory in an export's files (relative path -> text); MemoryFormatError names the file and the line."""
    dump = Dump()
    for name in sorted(files):
        if name.startswith(f"{FACTS}/"):
            dump.facts.append(parse_fact(name, files[name]))
        elif name.startswith(f"{EPISODES}/"):
            if not _MONTH_FILE.fullmatch(name[len(EPISODES) + 1:]):
                raise MemoryFormatError(name, 1, "an episode file is episodes/YYYY-MM.md")
            dump.episodes.extend(parse_month(name, files[name]))
        else:
            raise MemoryFormatError(name, 1, "not a memory file: expected facts/<path>.md or episodes/YYYY-MM.md")
    return dump


# -- the directory (the edge) ---------------------------------------------------------------
def write_dir(directory: Path, files: dict[str, str]) -> list[str]:
    """Write an export into ``directory`` (new or empty: a file left from an older export would come back on
    import), private like the state directory.  Returns the files written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise MemoryStoreError(f"{directory} exists and is not an empty directory: export into a new one")
    private_dir(directory)
    for name, text in sorted(files.items()):
        target = directory / name
        private_dir(target.parent)
        write_private(target, text.encode("utf-8"))
    return sorted(files)


def read_dir(directory: Path) -> Dump:
    """The memory exported in ``directory`` (hidden files, such as an editor's, are skipped)."""
    if not directory.is_dir():
        raise MemoryStoreError(f"{directory} is not a directory")
    files: dict[str, str] = {}
    for root, dirs, names in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for file_name in names:
            if file_name.startswith("."):
                continue
            path = Path(root) / file_name
            name = path.relative_to(directory).as_posix()
            try:
                files[name] = path.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise MemoryFormatError(name, 1, f"not UTF-8 text (byte {exc.start})") from None
    return parse(files)
