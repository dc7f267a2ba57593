"""A host of many task runs, as a pure core: ``RunHost.step(input) -> list[HostCommand]``.

A task actor (``actors/task_actor.py``) holds many runs, each a ``TaskRun`` kept between two messages
(made once from its ``RunSnapshot``; a run is a value only where it leaves the process: its reports).  This core
keeps the held runs, each run's unanswered stage request, the pool addresses and the highest token issued, steps
one run per input and turns its commands into addressed sends; reports of several activations leave together
(``pegasus.run.report_batch``).  A done run's post-task reflection is handed out from here when it can be
(``pegasus.run.reflections``).  Never raises; the clock, the ids and the pid are passed in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any, ClassVar

from pegasus.levels import Level
from pegasus.run import inputs as run_inputs
from pegasus.run import report_rules
from pegasus.run.commands import Abandon, AskRecall, Command, Log, Reflected, SendStage, TaskStopped, TaskTransitioned
from pegasus.run.core import EffectOf, TaskRun
from pegasus.run.host_io import (
    Abandoned, Address, AskPool, CarryingFailed, Closing, Delivered, Drop, Handled, HostCommand, HostInput,
    LogLine, Messages, PoolReplaced, Report, Reports, ReportsDue, Start, Tell, Unsent, WakeAfter,
)
from pegasus.run.inputs import Answered, MemoriesRecalled, RunInput, Streamed, SuspendAsked
from pegasus.run.reflections import HeldReflections
from pegasus.run.report_batch import ReportBatch
from pegasus.run.report_rules import holdable
from pegasus.run.snapshot import RunSnapshot
from pegasus.streaming import TextDelta
from pegasus.task.events import new_id, utc_now
from pegasus.task.fsm import Clock, IdFactory
from pegasus.task.names import PoolName, StageName

__all__ = [  # the core, and its inputs and commands (``pegasus.run.host_io``) named here for its carriers
    "HOLD_RUNS", "REPORT_BOUND_S", "REPORT_HOLD_S", "Abandoned", "Address", "AskPool", "CarryingFailed", "Closing",
    "Delivered", "Drop", "Handled", "HostCommand", "HostInput", "LogLine", "Messages", "PoolReplaced", "Report",
    "Reports", "ReportsDue", "RunHost", "Start", "Tell", "Unsent", "WakeAfter",
]
DEAD_POOLS_KEPT = 8  # replaced pools remembered: a StartTask sent before a replacement may still name one
HOLD_RUNS = 8  # runs waiting for their stages from which a message surely comes soon: transitions and ends may wait
# ... this long after the batch before (pegasus.run.report_batch): at L = 50 ms each answer arrives alone, and a
# TaskReports per stage or end cost the supervisor a wake-up and a commit.  The task actor's; RunHost's default is 0.
REPORT_HOLD_S = 0.3
# A held report asks for a timer this long (one at a time): should the messages stop coming (a model's minutes),
# it still leaves within about the hold and this; while they come, the first after the hold carries it.
REPORT_BOUND_S = 0.35


_TOLD = (AskRecall, TextDelta)


class RunHost:
    """The runs one task actor holds; see the module docstring."""

    def __init__(self, *, pid: int = 0, clock: Clock = utc_now, ids: IdFactory = new_id,
                 report_hold_s: float = 0.0, report_bound_s: float = REPORT_BOUND_S, debug: bool = False) -> None:
        self.pid, self.clock, self.ids = pid, clock, ids
        self.debug = debug  # the carrier writes debug lines: the runs make theirs (``TaskRun.debug``)
        self.supervisor: Address = None
        self.token = 0  # the highest token issued here
        self.runs: dict[str, TaskRun] = {}  # task -> its run, between two inputs
        self.asked: dict[str, AskPool] = {}  # task -> its unanswered stage request (sent again if its pool dies)
        self.pools: dict[str, Address] = {}
        self.dead_pools: list[Address] = []
        self.effect_of: EffectOf = _unknown
        self.last: tuple[str, int] | None = None  # (task, run) this step activated
        self.previous: tuple[str, int] | None = None  # (task, run) the step before activated
        # Reports made and not yet sent; transitions and unwaited ends may wait report_hold_s while HOLD_RUNS runs
        # wait, and at most about report_bound_s more should no message come.
        self.batch = ReportBatch(hold_s=report_hold_s, holdable=holdable, bounded=holdable, bound_s=report_bound_s)
        self.reflections = HeldReflections()  # done runs' post-task reflections handed out from here
        self.report_most = 0  # a report's bytes one message can carry (``frames``); 0: any

    def frames(self, max_frame_bytes: int) -> None:
        """Messages of at most ``max_frame_bytes``: a batch closes at half (its sizes are estimates, never below
        pickle's); a run whose single report would not fit cannot report, and is abandoned (restarted, then failed)."""
        self.batch.max_bytes, self.report_most = max_frame_bytes // 2, max_frame_bytes - report_rules.FRAME_SPARE_BYTES

    def step(self, event: HostInput) -> list[HostCommand]:
        """Apply one input; the commands to carry out, in order.  Never raises: a run whose
        activation raised is forgotten and reported abandoned; the others go on."""
        self.previous, self.last = self.last, None
        try:
            return self._HANDLERS[type(event)](self, event)
        except Exception as exc:  # noqa: BLE001
            fields = {"input": type(event).__name__, **({"task_id": self.last[0]} if self.last else {})}
            return [LogLine(Log(Level.ERROR, "task_actor_error", fields, exc)),
                    *self._failed(f"{type(exc).__name__}: {exc}", self.last)]

    # -- inputs ------------------------------------------------------------------------------------
    def _start(self, start: Start) -> list[HostCommand]:
        known, self.supervisor = self.pools, start.supervisor
        # Memory steps run where the store is: the supervisor.
        self.pools = {PoolName.LLM: start.llm_pool, PoolName.TOOL: start.tool_pool, PoolName.MEMORY: start.supervisor}
        for name in (PoolName.LLM, PoolName.TOOL):  # sent before a pool was replaced: it names the dead one
            if self.pools[name] in self.dead_pools and name in known:
                self.pools[name] = known[name]
        self.effect_of = start.effect_of
        self.reflections.limit = start.reflections
        self._forget(start.task_id)  # an earlier run of the task held here is over: this one replaces it
        state = RunSnapshot(start.task, start.run, start.max_iterations, start.generation, start.journal, self.token,
                            inbox=start.inbox, recall_k=start.recall_k, identity=start.identity, awaited=start.awaited)
        run = TaskRun(state, effect_of=self.effect_of, clock=self.clock, ids=self.ids, pid=self.pid, debug=self.debug)
        return self._activate(start.task_id, run, start.started)

    def _answered(self, event: Answered) -> list[HostCommand]:
        answer = event.answer
        if answer.stage == StageName.POST_REFLECT and self.reflections.answered(answer.task_id, answer.token):
            reflected = Reflected(answer.task_id, answer.ok, answer.payload, answer.error, answer.error_kind)
            reflected, size = report_rules.fitted(reflected, self.report_most)
            return [*self._join(reflected, size, lazy=True), *self._reflect()]
        held, out = self._current(answer.task_id, answer.token, "stale_result_dropped", stage=answer.stage)
        if held is None:
            return out
        self.asked.pop(answer.task_id, None)
        return self._activate(answer.task_id, held, event)

    def _recalled(self, event: MemoriesRecalled) -> list[HostCommand]:
        held, out = self._current(event.answer.task_id, event.answer.token, "stale_recall_dropped")
        return out if held is None else self._activate(event.answer.task_id, held, event)

    def _streamed(self, event: Streamed) -> list[HostCommand]:
        delta = event.delta
        held = self.runs.get(delta.task_id)  # passed on without activating the run
        if held is None or not held.current(delta.task_id, delta.token):
            return []
        return [*self._reports(self.batch.before_other()), Tell(self.supervisor, replace(delta, run=held.run))]

    def _suspend_asked(self, event: SuspendAsked) -> list[HostCommand]:
        held = self.runs.get(event.task_id)  # None: a run that is over (the request crossed its stop)
        return [] if held is None else self._activate(event.task_id, held, event)

    def _messages(self, event: Messages) -> list[HostCommand]:
        held = self.runs.get(event.task_id)
        if held is None or held.run != event.run:  # over: the supervisor gives them to the next run
            return []
        return self._activate(event.task_id, held, run_inputs.MessagesSent(event.task_id, event.inbox))

    def _drop(self, event: Drop) -> list[HostCommand]:
        held = self.runs.get(event.task_id)
        if held is not None and held.run == event.run:
            self._forget(event.task_id)
        return []

    def _pool_replaced(self, event: PoolReplaced) -> list[HostCommand]:
        """What the dead pool was asked and never answered is asked of the new one, token and all
        (a model stage runs again; an effectful step asks the journal first: never twice)."""
        if event.sender != self.supervisor:
            return []
        self.dead_pools = [*self.dead_pools[-(DEAD_POOLS_KEPT - 1):], event.dead]
        self.pools[event.name] = event.address
        again: list[HostCommand] = []
        if event.name == PoolName.LLM:  # the reflections out from here, too
            again += [AskPool(event.address, stage, None) for stage in self.reflections.out.values()]
        for task_id, asked in list(self.asked.items()):
            held = self.runs.get(task_id)
            if asked.stage.pool != event.name or held is None or not held.current(task_id, asked.stage.token):
                continue
            self.asked[task_id] = replace(asked, to=event.address)
            again.append(self.asked[task_id])
        return [*again, LogLine(Log(Level.WARNING, "pool_replaced", {"pool": event.name,
                                                                 "requests_sent_again": len(again)}))]

    def _carrying_failed(self, event: CarryingFailed) -> list[HostCommand]:
        return self._failed(event.reason, self.previous)

    def _unsent(self, event: Unsent) -> list[HostCommand]:
        gap = report_rules.runs_of(event.reports)
        self.batch.drop(lambda report: report_rules.run_of(report) in gap)
        lost = [(task, run) for task, run in dict.fromkeys([*gap, *event.runs])  # held here, or ended: unrecorded
                if task not in self.runs or self.runs[task].run == run]
        return [out for pair in lost for out in self._failed(event.reason, pair)]

    def _closing(self, event: Closing) -> list[HostCommand]:
        self.runs.clear()
        self.asked.clear()
        self.reflections.clear()
        return self._reports(self.batch.before_other())

    def _handled(self, event: Handled) -> list[HostCommand]:
        out = self._reports(self.batch.handled(event.more_read, idle=not self.runs, now=self._busy(event.now)))
        return out + self._timer()

    def _delivered(self, event: Delivered) -> list[HostCommand]:
        out = self._reports(self.batch.delivered(event.more_read, idle=not self.runs, now=self._busy(event.now)))
        return out + self._timer()

    def _reports_due(self, event: ReportsDue) -> list[HostCommand]:
        self.batch.woken()
        return []

    def _timer(self) -> list[HostCommand]:
        seconds = self.batch.wake_after()
        return [] if seconds is None else [WakeAfter(seconds)]

    def _busy(self, now: float | None) -> float | None:
        """``now`` while enough runs wait for stages that a message comes soon to carry what is held."""
        return now if len(self.asked) >= HOLD_RUNS else None

    def _join(self, report: Any, size: int, lazy: bool = False) -> list[HostCommand]:
        """``report`` (``size`` bytes) into the batch: what is held goes first if together they would pass its bytes,
        and the batch goes if it is full."""
        first = self._reports(self.batch.room_for(size))
        return first + self._reports(self.batch.add((report,), lazy=lazy, size=size))

    def _reports(self, reports: Reports) -> list[HostCommand]:
        if not reports or self.supervisor is None:
            return []
        return [Report(self.supervisor, reports, self.batch.sent_waited)]

    # -- activation --------------------------------------------------------------------------------
    def _current(self, task_id: str, token: int, stale: str, **fields: Any) -> tuple[TaskRun | None,
                                                                                      list[HostCommand]]:
        """The run an answer is for, or None and a log line when it is for no run held here, or a stale one."""
        held = self.runs.get(task_id)
        if held is None or not held.current(task_id, token):
            line = Log(Level.INFO, stale, {"task_id": task_id, "token": token,
                                       "current": held.token if held is not None else None, **fields})
            return None, [LogLine(line)]
        return held, []

    def _activate(self, task_id: str, run: TaskRun, event: RunInput) -> list[HostCommand]:
        """One activation: one input stepped, its commands addressed, the run kept as it is for the next one
        (not passivated to a snapshot and restored: nothing outside reads it between two inputs) -- or
        forgotten when it stopped or cannot go on."""
        self.last = (task_id, run.run)
        commands = run.step(event)
        self.token = max(self.token, run.token)
        out, abandon = self._address(run, commands)
        if abandon is not None or run.stopped:
            self._forget(task_id)
            if abandon is not None:
                out += self._abandoned(task_id, run.run, abandon)
        else:
            self.runs[task_id] = run
        return out

    def _address(self, run: TaskRun, commands: list[Command]) -> tuple[list[HostCommand], str | None]:
        """The run's commands as sends: stage requests first (the next stage waits for no report or log
        line), then the log lines; the reports join the batch (``Report`` when it is full; the held
        reports go before a message to the supervisor); last, a done run's reflection if it goes now.
        Also why the run is abandoned, if it is."""
        first: list[HostCommand] = []
        then: list[HostCommand] = []
        reports: list[Any] = []
        abandon = None
        who = (run.task_id, run.fsm.machine.name, run.run) if run.unreadable is None else None
        for command in commands:
            if isinstance(command, SendStage):
                ask = AskPool(self.pools[command.pool], command, self.supervisor if command.journal else None)
                self.asked[command.task_id] = ask
                first.append(ask)
            elif isinstance(command, Log):
                then.append(LogLine(command, who))
            elif isinstance(command, (TaskTransitioned, TaskStopped)):
                reports.append(command)
            elif isinstance(command, _TOLD):  # recall: answered by the task actor from the store, or the supervisor
                first += [*self._reports(self.batch.before_other()), Tell(self.supervisor, command)]
            elif isinstance(command, Abandon):
                abandon = command.reason
        if reports:
            reports, sizes, too_large = report_rules.fitting(reports, self.report_most)
            abandon = too_large or abandon
            for report, size in zip(reports, sizes, strict=True):  # one by one: a batch closes between them
                then += self._join(self._reflecting(report), size)
        return first + then + self._reflect(), abandon

    def _reflecting(self, stopped: Any) -> Any:
        """The run's end as reported: ``reflecting`` when its reflection goes from here (queued now)."""
        if not isinstance(stopped, TaskStopped) or self.reflections.take(stopped, self.token + 1) is None:
            return stopped
        self.token += 1
        return replace(stopped, reflecting=True)

    def _reflect(self) -> list[HostCommand]:
        """The reflections that go now (at most ``limit`` out: the rest wait here)."""
        pool = self.pools.get(PoolName.LLM)
        if pool is None:  # (never: a run was started here, which names the pools)
            return []
        return [AskPool(pool, stage, None) for stage in self.reflections.release()]

    def _failed(self, reason: str, last: tuple[str, int] | None) -> list[HostCommand]:
        if last is None:
            return []
        task_id, run = last
        self._forget(task_id)
        return self._abandoned(task_id, run, reason)

    def _abandoned(self, task_id: str, run: int, reason: str) -> list[HostCommand]:
        if self.supervisor is None:
            return []
        return [*self._reports(self.batch.before_other()), Abandoned(self.supervisor, task_id, run, reason)]

    def _forget(self, task_id: str) -> None:
        self.runs.pop(task_id, None)
        self.asked.pop(task_id, None)

    _HANDLERS: ClassVar[dict[type, Callable[[RunHost, Any], list[HostCommand]]]] = {
        Start: _start, Answered: _answered, MemoriesRecalled: _recalled, Streamed: _streamed,
        SuspendAsked: _suspend_asked, Messages: _messages, Drop: _drop, PoolReplaced: _pool_replaced,
        CarryingFailed: _carrying_failed, Unsent: _unsent, Closing: _closing, Handled: _handled, Delivered: _delivered,
        ReportsDue: _reports_due,
    }


def _unknown(tool: str) -> None:
    return None

