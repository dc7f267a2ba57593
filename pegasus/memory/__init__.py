"""Long-term memory: facts, episodes, the archive of done tasks, and the agent's identity.

The pure values and rules (``values``, ``query``, ``markdown``, ``identity``) and
the SQLite adapter (``store``) over the tasks' own database.  No actors, no
Thespian: the supervisor carries a ``MemoryStore`` (the writer); task actors read recall
through ``recall.LocalRecall`` (read-only); the CLI and the client go through the supervisor.
"""

from pegasus.memory.errors import (BadMemoryPath, MemoryCapExceeded, MemoryFormatError, MemoryNotFound,
                                   MemoryStoreError)
from pegasus.memory.identity import Identity, identity_of, load_identity
from pegasus.memory.store import MemoryStore
from pegasus.memory.values import ArchivedTask, Episode, Fact, MemoryItem, check_path, parse_id

__all__ = ["ArchivedTask", "BadMemoryPath", "Episode", "Fact", "Identity", "MemoryCapExceeded", "MemoryFormatError",
           "MemoryItem", "MemoryNotFound", "MemoryStore", "MemoryStoreError", "check_path", "identity_of",
           "load_identity", "parse_id"]
