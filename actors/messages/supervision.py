"""The timers of the guardian and the supervisor (wakeup payloads), and how a client finds the guardian."""

from __future__ import annotations

from dataclasses import dataclass

GUARDIAN_NAME = "pegasus-guardian"  # the guardian's global name in its admin
GUARDIAN_CLASS = "actors.guardian.Guardian"  # by name: a client asks for it without importing the actors below it


@dataclass(frozen=True)
class RestartDue:
    """Wakeup payload of the guardian: start supervisor generation ``generation + 1`` now."""

    generation: int

@dataclass(frozen=True)
class RetryDue:
    """Wakeup payload of the supervisor: a retried task's backoff has passed."""

    task_id: str

@dataclass(frozen=True)
class StoreProbe:
    """Wakeup payload of the supervisor: try a write to learn whether the store takes writes again."""

@dataclass(frozen=True)
class TaskActorsDue:
    """Wakeup payload of the supervisor: a task actor may have been idle long enough to retire."""

@dataclass(frozen=True)
class PoolDue:
    """Wakeup payload of the supervisor: start the dead pool ``name`` again now (its back-off passed)."""

    name: str

@dataclass(frozen=True)
class PoolsCheck:
    """Wakeup payload of the supervisor: look whether a pool's process is stopped (SIGSTOP, a debugger)."""

@dataclass(frozen=True)
class StatsDue:
    """Wakeup payload of the supervisor: answer stats request ``ask_id`` with the pools that answered."""

    ask_id: int

@dataclass(frozen=True)
class CommitDue:
    """Wakeup payload of the supervisor: commit the reports' group that lingered (pegasus.store.drain)."""

@dataclass(frozen=True)
class PoolReady:
    """Pool -> supervisor, once configured: its process (for the stopped-pool check and stats)."""

    name: str
    pid: int

@dataclass(frozen=True)
class PoolReplaced:
    """Supervisor -> task actors: pool ``name`` died and ``address`` replaces it; the requests sent
    to the dead one and not answered are sent again (an effectful step's journal decides whether it runs)."""

    name: str
    address: object
    dead: object

@dataclass(frozen=True)
class ChildTrouble:
    """Supervisor -> guardian: what the supervisor is failing on (a handler's error, giving up on a
    pool), so that the guardian can name it if the supervisor dies next."""

    error: str

@dataclass(frozen=True)
class KeeperDue:
    """Wakeup payload of the guardian: start the HTTP gateway's keeper again now (its back-off passed)."""

@dataclass(frozen=True)
class RetentionDue:
    """Wakeup payload of the supervisor: delete the task trees older than ``[store] retain_days`` now."""
