"""The memory methods of ``Client``, and the same over the store file when no system runs (``LocalMemory``).

Reads and writes go to the supervisor; export and import files, and embedding vectors, are made
here in the client's process, never in the supervisor.  With no system running, SQLite serialises
the writers and the supervisor keeps no copy to go stale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from actors import messages as m
from pegasus.config import Settings
from pegasus.requests import R

if TYPE_CHECKING:
    from pegasus.memory import markdown
    from pegasus.memory.embeddings import Embedded

IMPORT_PAGE_BYTES = 96 * 1024  # an import request stays well under [runtime] max_message_bytes (256 KiB)


class MemoryClient:
    """``memory_*`` methods over ``ask`` (a request in, its Reply's data out)."""

    settings: Settings

    def ask(self, request: m.Request[R]) -> R:  # Client's, or LocalMemory's below
        raise NotImplementedError

    def _embedded(self, text: str) -> Embedded:
        """``text``'s vector (one bounded call, no retry), or why there is none."""
        from pegasus.memory.embeddings import embed  # imported when used: memory is no cost of other commands
        return embed([text], self.settings.memory, self.settings.llm)

    def memory_list(self, prefix: str = "", episodes: int = 20) -> dict[str, Any]:
        """Every fact (path, version, size) and the newest episodes."""
        return self.ask(m.MemoryList(prefix=prefix, episodes=episodes))

    def memory_search(self, text: str, k: int = 5, kinds: list[str] | None = None) -> dict[str, Any]:
        """The ``k`` memories most relevant to ``text``, best first (``items``: id, kind, title, text, score)."""
        found = self._embedded(text)
        reply = self.ask(m.MemorySearch(text=text, k=k, kinds=list(kinds or []),
                                        query_vector=found.vectors[0] if found.vectors else None))
        return _with_warning(reply, found.error, "searched by full text alone")

    def memory_show(self, item_id: str) -> dict[str, Any]:
        """One memory: a fact path, ``fact:<path>@<v>``, ``episode:<n>`` or ``task:<id>``."""
        return self.ask(m.MemoryShow(item_id=item_id))

    def memory_write(self, path: str, content: str) -> dict[str, Any]:
        """A new version of fact ``path`` (``unchanged``: it already held ``content``)."""
        from pegasus.memory.values import normalise
        from pegasus.memory.vectors import fact_text
        found = self._embedded(fact_text(normalise(content)))
        reply = self.ask(m.MemoryWrite(path=path, content=content, vector=found.vectors[0] if found.vectors else None))
        return _with_warning(reply, found.error, "stored without a vector (a running system's background job gives "
                                                 "it one once the endpoint answers)")

    def memory_forget(self, item_id: str) -> dict[str, Any]:
        """Remove a fact (every version), an episode or an archived task for good; ``forgotten``: the ids."""
        return self.ask(m.MemoryForget(item_id=item_id))

    def memory_export(self, directory: str | os.PathLike[str]) -> dict[str, Any]:
        """Write the memory as Markdown into ``directory`` (new or empty)."""
        facts: list[dict[str, Any]] = []
        episodes: list[dict[str, Any]] = []
        after = 0
        while True:
            page = self.ask(m.MemoryExport(after_episode=after))
            facts += page["facts"]
            episodes += page["episodes"]
            if not page["more"] or not page["episodes"]:
                break
            after = page["episodes"][-1]["episode_id"]
        from pegasus.memory import Episode, Fact, markdown
        dump = markdown.Dump([Fact(**f) for f in facts], [Episode(**e) for e in episodes])
        target = Path(directory).expanduser().resolve()
        files = markdown.write_dir(target, markdown.render(dump))
        return {"directory": str(target), "files": files, "facts": len(facts), "episodes": len(episodes)}

    def memory_import(self, directory: str | os.PathLike[str]) -> dict[str, Any]:
        """Merge the Markdown in ``directory`` (as ``memory_export`` writes it) into the memory.  Every file is
        read and checked before anything is sent (a bad one: MemoryFormatError naming the file and line)."""
        from pegasus.memory import markdown
        dump = markdown.read_dir(Path(directory).expanduser().resolve())
        totals: dict[str, int] = {}
        for facts, episodes in _pages(dump):
            for key, count in self.ask(m.MemoryImport(facts=facts, episodes=episodes)).items():
                totals[key] = totals.get(key, 0) + count
        return totals


def _with_warning(reply: dict[str, Any], error: str | None, outcome: str) -> dict[str, Any]:
    """A search's or write's reply, with ``warning`` saying what the embeddings endpoint did not do."""
    return {**reply, "warning": f"{error}: {outcome}"} if error else reply


def _pages(dump: markdown.Dump) -> list[tuple[list[dict[str, Any]], list[dict[str, Any]]]]:
    """The dump's facts and episodes in pages of about IMPORT_PAGE_BYTES (at least one item each)."""
    pages: list[tuple[list[dict[str, Any]], list[dict[str, Any]]]] = [([], [])]
    size = 0
    for kind, item in [*(("f", f) for f in dump.facts), *(("e", e) for e in dump.episodes)]:
        row = dict(item.__dict__)
        length = len(json.dumps(row))
        if size and size + length > IMPORT_PAGE_BYTES:
            pages.append(([], []))
            size = 0
        pages[-1][0 if kind == "f" else 1].append(row)
        size += length
    return pages


class LocalMemory(MemoryClient):
    """The memory of a state directory with no system running: the same answers, on the store file."""

    def __init__(self, settings: Settings) -> None:
        from pegasus.store import Store
        self.settings = settings
        self.store = Store.in_state_dir(settings.state_dir())

    def ask(self, request: m.Request[R]) -> R:
        from pegasus.memory import MemoryStore
        from pegasus.memory.answers import answer_memory
        return answer_memory(MemoryStore(self.store, self.settings.memory), m.revalidate(request))

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> LocalMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
