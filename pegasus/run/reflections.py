"""The post-task reflections a task actor hands to the llm pool itself: those of the runs it saw done.

Pure; ``pegasus.run.host.RunHost`` holds one.  It has the context, so the supervisor is spared a message
each way and a pickled context a task: it counts, decides and writes the answer, reported in the next
batch (``pegasus.admission.reflections``).  At most ``limit`` are out (the rest wait here, never filling
the pool's queue), ``WAIT_LIMIT`` wait; beyond that, with gates (a completed run is not yet done) or
the reflector off, the done report says no and the supervisor hands it out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from pegasus.config import Settings
from pegasus.run.commands import SendStage, TaskStopped
from pegasus.task.names import CognitiveState, PoolName, StageName

WAIT_LIMIT = 256  # done contexts a task actor keeps waiting for the pool (each a few KiB)


def limit_for(settings: Settings) -> int:
    """Reflections one task actor may have out at once (the supervisor's own limit: the llm pool's size);
    0 when its runs' completion is not their task's done (gates) or nothing is reflected."""
    if not settings.memory.reflector or settings.verification.gates:
        return 0
    return max(1, settings.pools.llm_workers)


@dataclass
class HeldReflections:
    """The reflections this task actor handed out (task -> its request) and those waiting to go."""

    limit: int = 0
    out: dict[str, SendStage] = field(default_factory=dict)
    waiting: deque[SendStage] = field(default_factory=deque)

    def take(self, stopped: TaskStopped, token: int) -> SendStage | None:
        """A run stopped: its reflection's request (to go with ``token``) when this actor hands it out,
        queued (``release`` says when it goes); None when the supervisor does."""
        if (self.limit <= 0 or stopped.state != CognitiveState.COMPLETED or stopped.children
                or len(self.waiting) >= WAIT_LIMIT or stopped.task_id in self.out):
            return None
        snapshot = stopped.snapshot
        stage = SendStage(PoolName.LLM, stopped.task_id, stopped.run, token, StageName.POST_REFLECT,
                          snapshot.machine, snapshot.context, priority=snapshot.priority)
        self.waiting.append(stage)
        return stage

    def answered(self, task_id: str, token: int) -> bool:
        """Whether an answer is to a reflection out from here (no longer out then)."""
        held = self.out.get(task_id)
        if held is None or held.token != token:
            return False
        del self.out[task_id]
        return True

    def release(self) -> list[SendStage]:
        """The waiting requests that go now (under ``limit``), in order."""
        going = []
        while self.waiting and len(self.out) < self.limit:
            stage = self.waiting.popleft()
            self.out[stage.task_id] = stage
            going.append(stage)
        return going

    def clear(self) -> None:
        self.out.clear()
        self.waiting.clear()
