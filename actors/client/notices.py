"""What a client was sent besides replies: transition notices and streamed text, kept by task.

Each ``follow`` reads its own task's queue; ``notices()`` (a ``subscribe(None)`` reader) takes
those of the tasks no follow reads.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import TYPE_CHECKING

from actors import messages as m

if TYPE_CHECKING:  # named, not imported: the admission's notice is no cost of a command that only asks
    from typing import TypeAlias

    Notice: TypeAlias = m.TransitionNotice | m.TextDelta


class Notices:
    """The queues of notices by task, and how many follows read each task now."""

    def __init__(self) -> None:
        self.by_task: dict[str, deque[Notice]] = {}
        self.following: Counter[str] = Counter()

    def keep(self, notice: Notice) -> None:
        """Queue a notice for the follow of its task (one may start later: ``submit(follow=True)``)."""
        self.by_task.setdefault(notice.task_id, deque()).append(notice)

    def queued(self, task_id: str) -> int:
        """How many transitions of the task wait for a follow to read them."""
        return sum(isinstance(notice, m.TransitionNotice) for notice in self.by_task.get(task_id, ()))

    def discard(self, task_id: str) -> None:
        """Forget the notices of a task no follow reads."""
        if not self.following[task_id]:
            self.by_task.pop(task_id, None)

    def follow(self, task_id: str) -> deque[Notice]:
        """One more follow of the task: the queue it reads."""
        self.following[task_id] += 1
        return self.by_task.setdefault(task_id, deque())

    def unfollow(self, task_id: str) -> None:
        self.following[task_id] -= 1
        if not self.following[task_id]:
            del self.following[task_id]
            self.by_task.pop(task_id, None)

    def unfollowed_waiting(self) -> bool:
        return any(queue for task_id, queue in self.by_task.items() if task_id not in self.following)

    def take_unfollowed(self) -> tuple[Notice, ...]:
        """The notices of the tasks no follow reads, taken out in the order they came per task."""
        taken = [task_id for task_id in self.by_task if task_id not in self.following]
        return tuple(notice for task_id in taken for notice in self.by_task.pop(task_id))
