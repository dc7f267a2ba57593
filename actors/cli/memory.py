"""``pegasus memory list | search | show | write | forget | export | import`` and ``pegasus identity``.

With a system running, every request goes to its supervisor (the store's one
writer); with none, the command opens the store file itself, as ``pegasus
backup`` does (``actors.client.memory.LocalMemory``).  Export and import read
and write the Markdown files here, in the command's process.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from actors.cli.base import EXIT_OK, count, emit, settings_of
from actors.cli.views import clean
from actors.client.client import Client
from actors.client.memory import LocalMemory, MemoryClient
from actors.runtime.spec import resolved
from actors.runtime.system import SystemNotRunningError
from pegasus.memory import load_identity


def add_commands(sub: Any, on_system: argparse.ArgumentParser, configured: argparse.ArgumentParser) -> None:
    """Register ``memory`` (with its actions) and ``identity`` on the top-level subparsers ``sub``."""
    memory = sub.add_parser("memory", help="inspect, search, write, forget, export and import long-term memory",
                            description="Long-term memory: facts (versioned, by path) and episodes "
                                        "(docs/agent-memory.md).")
    actions = memory.add_subparsers(dest="action", required=True, metavar="ACTION")

    def action(name: str, answer: _Answer, help_text: str) -> argparse.ArgumentParser:
        p = actions.add_parser(name, parents=[on_system], help=help_text, description=help_text)
        p.set_defaults(handler=lambda args: _run(args, answer))
        return p

    p = action("list", _list, "facts (path, version, size) and the newest episodes")
    p.add_argument("--prefix", default="", metavar="PATH", help="only facts whose path starts with this")
    p = action("search", _search, "the memories most relevant to QUERY, best first")
    p.add_argument("query", metavar="QUERY")
    p.add_argument("-k", type=count(1, 100), default=5, metavar="N", help="how many (default 5)")
    p.add_argument("--archive", action="store_true", help="search the archive of done tasks instead")
    p = action("show", _show, "one memory: a fact path, fact:PATH@VERSION, episode:N or task:ID")
    p.add_argument("item_id", metavar="PATH-or-ID")
    p = action("write", _write, "write fact PATH (a new version; the same text again changes nothing)")
    p.add_argument("path", metavar="PATH")
    p.add_argument("text", metavar="TEXT")
    p = action("forget", _forget, "remove a fact (every version), an episode or an archived task for good")
    p.add_argument("item_id", metavar="PATH-or-ID")
    p = action("export", _export, "write the memory as Markdown into DIR (new or empty)")
    p.add_argument("directory", metavar="DIR")
    p = action("import", _import, "merge the Markdown in DIR (as export writes it) into the memory")
    p.add_argument("directory", metavar="DIR")
    p = sub.add_parser("identity", parents=[configured], help="show the agent's identity and where it comes from",
                       description="The agent's name, role and standing instructions: [agent] in the config, "
                                   "or <state dir>/identity.md when present.")
    p.set_defaults(handler=identity)


@contextmanager
def _memory(args: argparse.Namespace) -> Iterator[MemoryClient]:
    settings = resolved(settings_of(args))
    try:
        client = Client.connect(settings)
    except SystemNotRunningError:
        with LocalMemory(settings) as local:
            yield local
        return
    with client:
        yield client


_Answer = Callable[[argparse.Namespace, MemoryClient], tuple[dict[str, Any], str]]  # (the reply, its text)


def _run(args: argparse.Namespace, answer: _Answer) -> int:
    with _memory(args) as memory:
        found, text = answer(args, memory)
    emit(args, found, text)
    return EXIT_OK


def _list(args: argparse.Namespace, memory: MemoryClient) -> tuple[dict[str, Any], str]:
    found = memory.memory_list(args.prefix)
    return found, _list_text(found)


def _search(args: argparse.Namespace, memory: MemoryClient) -> tuple[dict[str, Any], str]:
    found = memory.memory_search(args.query, args.k, ["archive"] if args.archive else None)
    _warn(args, found)
    return found, "\n".join(f"{i['id']}  {i['score']:.3g}  {clean(i['title'])}: "
                            f"{clean(i['text'].splitlines()[0] if i['text'] else '')}"
                            for i in found["items"]) or "(nothing found)"


def _show(args: argparse.Namespace, memory: MemoryClient) -> tuple[dict[str, Any], str]:
    found = memory.memory_show(args.item_id)
    return found, _show_text(found)


def _write(args: argparse.Namespace, memory: MemoryClient) -> tuple[dict[str, Any], str]:
    found = memory.memory_write(args.path, args.text)
    _warn(args, found)
    return found, f"{'unchanged' if found['unchanged'] else 'wrote'} {found['id']}"


def _forget(args: argparse.Namespace, memory: MemoryClient) -> tuple[dict[str, Any], str]:
    found = memory.memory_forget(args.item_id)
    return found, "forgot " + ", ".join(found["forgotten"])


def _export(args: argparse.Namespace, memory: MemoryClient) -> tuple[dict[str, Any], str]:
    found = memory.memory_export(args.directory)
    return found, f"exported {found['facts']} facts and {found['episodes']} episodes to {found['directory']}"


def _import(args: argparse.Namespace, memory: MemoryClient) -> tuple[dict[str, Any], str]:
    found = memory.memory_import(args.directory)
    return found, ", ".join(f"{key.replace('_', ' ')}: {n}" for key, n in found.items())


def _warn(args: argparse.Namespace, found: dict[str, Any]) -> None:
    """What the embeddings endpoint did not do, as one line on stderr (with --json: the reply's ``warning``)."""
    if found.get("warning") and not args.json:
        print(f"pegasus: warning: {clean(found['warning'])}", file=sys.stderr, flush=True)


def identity(args: argparse.Namespace) -> int:
    found = load_identity(resolved(settings_of(args)))
    emit(args, found.as_dict(), f"{found.text}\n\n(from {found.source})")
    return EXIT_OK


def _list_text(found: dict[str, Any]) -> str:
    lines = [f"{f['path']}  v{f['version']}  {f['bytes']} bytes" for f in found["facts"]] or ["(no facts)"]
    lines += [""] + ([f"{e['id']}  {clean(e['title'])}" for e in found["episodes"]] or ["(no episodes)"])
    stats = found["stats"]
    lines += ["", f"{stats['facts']} facts ({stats['fact_bytes']} bytes), {stats['episodes']} episodes, "
                  f"{stats['archived']} archived tasks"]
    return "\n".join(lines)


def _show_text(found: dict[str, Any]) -> str:
    if found["kind"] == "fact":
        return (f"{found['id']}  (versions {', '.join(map(str, found['versions']))}; {found['created_at']})\n"
                f"{found['content']}")
    if found["kind"] == "episode":
        parts = [f"{found['id']}  {found['title']}  ({found['created_at']}, task {found['task_id']})",
                 found["summary"]]
        parts += [f"{name.capitalize()}: {found[name]}" for name in ("details", "lesson") if found[name]]
        return "\n".join(parts)
    return f"{found['id']}  {found['input']}\n{found['result']}"
