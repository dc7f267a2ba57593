"""A worker core driven as its carrier drives it (actors/worker.py), with a hand-moved clock and string
addresses: no actor system."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, TypeVar

from pegasus.config import Settings
from pegasus.worker.commands import Answer, FindHost, Run, SetUp, WorkerCommand
from pegasus.worker.core import WorkerCore
from pegasus.worker.inputs import AnswerLeft, Configured, HostFound, Loaded, Ran, Requested, WorkerInput

POOL = "pool"
IDENTITY = {"pid": 4242, "host": "box", "member": None, "admin_port": 19000}
STREAMING = {"llm": {"stream": True, "provider": "openai", "model": "m"}, "system": {"base": "multiprocTCPBase"}}
C = TypeVar("C")


@dataclass(frozen=True)
class Ask:
    """A stage request as the core reads it."""

    task_id: str
    token: int = 1
    stage: str = "act"
    run: int = 0
    step_index: int | None = None
    idempotency_key: str | None = None
    journal_to: Any = None
    context: Any = None


@dataclass(frozen=True)
class Job:
    """A pool job (Work) as the core reads it."""

    job: int
    request: Ask
    reply_to: Any = "requester"
    timeout_s: float = 0.0
    known: tuple[tuple[str, dict[str, Any]], ...] = ()
    through_pool: bool = False
    held: bool = False
    move_after_s: float = 0.0


@dataclass(frozen=True)
class Result:
    """A stage's result as the core reads it."""

    name: str
    worker: dict[str, Any] = field(default_factory=dict)


def plan_step(tool: str, args: Any = None, index: int = 0) -> Any:
    """A task context whose plan has one tool-call step."""
    step = SimpleNamespace(index=index, action_type="tool_call", action_params={"tool": tool, "args": args or {}})
    return SimpleNamespace(plan=SimpleNamespace(steps=[step]))


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Worker:
    """``step`` carries out what only the carrier can, as it does, at once: SetUp -> Loaded, FindHost ->
    HostFound at ``host-1``, ``host-2``...; Run -> Ran with ``run(request)`` (when ``runs``; otherwise the
    Run is left for the test to answer); Answer -> AnswerLeft, as for an answer written whole at once (when
    ``answers_leave``; otherwise the test says when it has left)."""

    def __init__(self, settings: Settings | None = None, *, machine: frozenset[str] = frozenset(),
                 effects: dict[str, str] | None = None, runs: bool = True,
                 run: Callable[[Any], Result] | None = None, configure: bool = True,
                 answers_leave: bool = True) -> None:
        self.clock, self.wall = Clock(), Clock(1_700_000_000.0)
        self.core = WorkerCore(IDENTITY, self.clock, self.wall)
        self.machine, self.effects = machine, effects or {}
        self.runs, self.run = runs, run or (lambda request: Result(f"ran {request.task_id}"))
        self.answers_leave = answers_leave
        self.hosts = 0
        self.started: list[WorkerCommand] = []
        if configure:
            self.started = self.step(Configured(POOL, "tool", 1, settings or Settings()))

    def step(self, event: WorkerInput) -> list[WorkerCommand]:
        done: list[WorkerCommand] = []
        for command in self.core.step(event):
            done.append(command)
            if isinstance(command, SetUp):
                done += self.step(Loaded(self.machine, self.effects.get))
            elif isinstance(command, FindHost):
                self.hosts += 1
                done += self.step(HostFound(f"host-{self.hosts}"))
            elif isinstance(command, Run) and self.runs:
                done += self.step(Ran(command.job, self.run(command.request), 0.002))
            elif isinstance(command, Answer) and self.answers_leave:
                done += self.step(AnswerLeft(command.job))
        return done

    def ask(self, job: int, task_id: str | None = None, **fields: Any) -> list[WorkerCommand]:
        reply_to = fields.pop("reply_to", "requester")
        timeout_s, known = fields.pop("timeout_s", 0.0), fields.pop("known", ())
        through_pool, held = fields.pop("through_pool", False), fields.pop("held", False)
        move_after_s = fields.pop("move_after_s", 1.0 if held else 0.0)
        return self.step(Requested(Job(job, Ask(task_id or f"t{job}", **fields), reply_to, timeout_s, known,
                                       through_pool, held, move_after_s), POOL))


def of(kind: type[C], commands: list[WorkerCommand]) -> list[C]:
    return [c for c in commands if isinstance(c, kind)]
