"""The supervisor's task actors: the one of each running task, and the free ones.

A task actor whose run stops is free: the next run (of any task) gets it instead
of a new process.  ``TaskActors`` keeps that account; the supervisor sends the
messages (StartTask, ActorExitRequest) and creates the actors.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Lease:
    """A task actor and the run it serves (``run`` 0: free); ``runs``: runs it has served."""

    address: Any
    run: int = 0
    runs: int = 0


class TaskActors:
    """The supervisor's task actors: the one of each running task, and the free ones.

    ``take`` gives a run a free actor (or creates one); ``give_back`` frees the actor
    of a run that stopped, or retires it (answers False) when it has served
    ``runs_per_actor`` runs or ``max_free`` actors are free already.
    """

    def __init__(self, create: Callable[[], Any], runs_per_actor: int = 1, max_free: int = 0) -> None:
        self.create, self.runs_per_actor, self.max_free = create, runs_per_actor, max_free
        self.running: dict[str, Lease] = {}
        self.free: list[Lease] = []
        self.created = 0

    def take(self, task_id: str, run: int) -> Lease:
        if self.free:
            lease = self.free.pop()
        else:
            lease = Lease(self.create())
            self.created += 1
        lease.run, lease.runs = run, lease.runs + 1
        self.running[task_id] = lease
        return lease

    def release(self, task_id: str, run: int | None = None) -> Lease | None:
        """The lease of a task's run (any run when ``run`` is None), no longer running."""
        lease = self.running.get(task_id)
        if lease is None or (run is not None and lease.run != run):
            return None
        return self.running.pop(task_id)

    def give_back(self, lease: Lease) -> bool:
        if lease.runs >= self.runs_per_actor or len(self.free) >= self.max_free:
            return False
        lease.run = 0
        self.free.append(lease)
        return True

    def exited(self, address: Any) -> tuple[str | None, Lease | None]:
        """Forget an actor that exited: (its running task or None if it was free, its lease);
        (None, None) for an actor not accounted here (one retired or canceled)."""
        for task_id, lease in self.running.items():
            if lease.address == address:
                return task_id, self.running.pop(task_id)
        for lease in self.free:
            if lease.address == address:
                self.free.remove(lease)
                return None, lease
        return None, None

    def addresses(self) -> list[Any]:
        return [lease.address for lease in (*self.running.values(), *self.free)]

    def view(self) -> dict[str, int]:
        return {"running": len(self.running), "free": len(self.free), "created": self.created}
