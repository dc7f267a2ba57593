"""Export and import: the store's memory as a ``markdown.Dump``, and a dump merged back into a store.

Import merges: an unchanged fact changes nothing, a new path keeps the file's version and time, any
other change is a new version; an episode is matched by its id (one without is added).  Caps are
checked before anything is written, and the whole import is one commit.
"""

from __future__ import annotations

from pegasus.memory.errors import MemoryCapExceeded, MemoryNotFound, MemoryStoreError
from pegasus.memory.markdown import Dump
from pegasus.memory.store import MemoryStore
from pegasus.memory.values import Episode, normalise, one_line


def export_dump(store: MemoryStore) -> Dump:
    """Every fact's current version and every episode (oldest first).  Older versions stay in the store only."""
    return Dump(store.list_facts(), list(reversed(store.episodes())))


def import_dump(store: MemoryStore, dump: Dump) -> dict[str, int]:
    """Merge ``dump`` into ``store``; counts of facts and episodes written and left as they were."""
    _check_caps(store, dump)
    counts = {"facts_written": 0, "facts_unchanged": 0, "episodes_written": 0, "episodes_unchanged": 0}
    with store.database.group():
        for fact in dump.facts:
            before = _current_version(store, fact.path)
            written = store.write_fact(fact.path, fact.content, task_id=fact.task_id, version=fact.version or None,
                                       created_at=fact.created_at or None)
            counts["facts_written" if written.version != before else "facts_unchanged"] += 1
        for episode in dump.episodes:
            counts["episodes_written" if _import_episode(store, episode) else "episodes_unchanged"] += 1
    return counts


def _current_version(store: MemoryStore, path: str) -> int | None:
    try:
        return store.read_fact(path).version
    except MemoryNotFound:
        return None


def _import_episode(store: MemoryStore, episode: Episode) -> bool:
    """Whether the episode changed the store."""
    if episode.episode_id:
        try:
            known = store.episode(episode.episode_id)
        except MemoryNotFound:
            known = None
        if known is not None:
            if known.task_id != episode.task_id:
                raise MemoryStoreError(f"{episode.id}: the store's is of task {known.task_id}, the file's of task "
                                       f"{episode.task_id}: import into another store, or drop the id line")
            fields = (one_line(episode.title), *(normalise(getattr(episode, f)) for f in ("summary", "details",
                                                                                            "lesson")))
            if fields == (known.title, known.summary, known.details, known.lesson):
                return False
            store.update_episode(episode)
            return True
    if episode.task_id is not None and store.database.db.execute(
            "SELECT 1 FROM memory_episodes WHERE task_id = ?", (episode.task_id,)).fetchone():
        return False  # the task's episode is there already (under another id): one per task
    store.add_episode(episode.task_id, episode.title, episode.summary, episode.details, episode.lesson,
                      created_at=episode.created_at or None, episode_id=episode.episode_id or None)
    return True


def _check_caps(store: MemoryStore, dump: Dump) -> None:
    settings = store.settings
    sizes = {fact.path: len(fact.content.encode()) for fact in store.list_facts()}
    sizes.update({fact.path: len(normalise(fact.content).encode()) for fact in dump.facts})
    if sum(sizes.values()) > settings.facts_max_bytes:
        raise MemoryCapExceeded("facts_max_bytes", settings.facts_max_bytes, sum(sizes.values()),
                                f"importing {len(dump.facts)} facts")
    db = store.database.db
    new = sum(1 for e in dump.episodes
              if not db.execute("SELECT 1 FROM memory_episodes WHERE episode_id = ? OR task_id = ?",
                                (e.episode_id, e.task_id)).fetchone())
    episodes = store.stats()["episodes"] + new
    if new and episodes > settings.episodes_max:
        raise MemoryCapExceeded("episodes_max", settings.episodes_max, episodes,
                                f"importing {len(dump.episodes)} episodes (an import drops none to make room)")
