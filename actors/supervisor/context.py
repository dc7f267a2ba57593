"""What every row of the supervisor reads and writes: one typed object, given to each handler.

The carrier (``actors.supervisor.carrier``) builds it with the actor's own
operations (send, a timer, a child) and keeps nothing else; the handlers are
plain functions of it.  The pure cores it holds decide: ``Admission`` (tasks),
``StoreHealth`` (the store), ``ScheduleTimer`` (when schedules are looked at),
``Supervision`` (children's deaths), ``PostReflections`` (post-task reflections).
"""

from __future__ import annotations

import dataclasses

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from thespian.actors import ActorAddress

from actors import messages as m
from actors.supervisor.task_actors import TaskActors
from pegasus import logs
from pegasus.admission import Admission, TransitionNotice
from pegasus.admission.reflections import PostReflections
from pegasus.config import Settings
from pegasus.memory.recall import CurrentIdentity
from pegasus.memory.vectors import Backfill, Breaker
from pegasus.pool.looks import LookIn, PoolLooks, Work
from pegasus.schedule_timer import ScheduleTimer
from pegasus.store import Store
from pegasus.store.health import StoreHealth
from pegasus.supervision import ChildSpec, Exceeded, Restart, Supervision
from pegasus.task import TaskSnapshot

if TYPE_CHECKING:  # a type only: structlog loads through pegasus.logs (what it leaves out: there)
    from structlog.typing import FilteringBoundLogger as Log  # pegasus.logs.get


def specs(restart_pause_max_s: float = 5.0) -> dict[str, ChildSpec]:
    """What the death of each kind of child means; a dead pool's pauses double from a tenth of
    ``restart_pause_max_s`` ([pools] restart_pause_max_s) to it."""
    then_s, max_s = restart_pause_max_s / 10, restart_pause_max_s
    return {
        "pool": ChildSpec(Restart.PERMANENT, intensity=5, period_s=60.0, then_s=then_s, max_s=max_s, stable_s=30.0),
        # The pools in the home host: its runs' own crashes (out of memory, a native library) kill them too, so
        # past the intensity they start again slowly instead of ending the supervisor.
        "hosted_pool": ChildSpec(Restart.PERMANENT, intensity=5, period_s=60.0, when_exceeded=Exceeded.SLOW_DOWN,
                                 then_s=then_s, max_s=max_s, stable_s=30.0),
        "task_actor": ChildSpec(Restart.TEMPORARY),
    }


SPECS = specs()

Send = Callable[[ActorAddress, object], None]
Wake = Callable[[float, object], None]  # (seconds, payload): the payload comes back in a WakeupMessage
Rows = dict[type, Callable[..., object]]  # message class -> its row (a plain function of the Context)


@dataclass
class Pools:
    """The two stage pools as the supervisor knows them."""

    address: dict[str, ActorAddress] = field(default_factory=dict)
    config: dict[str, m.PoolConfig] = field(default_factory=dict)
    pid: dict[str, int] = field(default_factory=dict)
    looks: PoolLooks = field(default_factory=PoolLooks)  # for a stopped pool (SIGSTOP), while work is in flight
    requests: dict[tuple[str, str], tuple[str, m.StageRequest]] = field(default_factory=dict)  # sent again if one dies
    dead: dict[str, ActorAddress] = field(default_factory=dict)  # each pool's last death counted, until it restarts

    def places(self) -> list[ActorAddress]:
        """Each process the pools run in, once (a home host runs both: pegasus/pool/home.py)."""
        places: list[ActorAddress] = []
        for address in self.address.values():
            if address not in places:
                places.append(address)
        return places


@dataclass
class FullTextOnly:
    """Recalls (or memory.search steps) answered by full text alone, and why the last of them was."""

    count: int = 0
    error: str | None = None


@dataclass
class Vectors:
    """Embedding vectors as the supervisor knows them (``actors.supervisor.vectors``)."""

    # A recall or a memory.search step waiting for its query's vector, by (task id, its embed request's
    # token: a recall's is its run's, a search's negative), with its sender.
    waits: dict[tuple[str, int], tuple[Any, ActorAddress]] = field(default_factory=dict)
    backfill: Backfill | None = None  # made once embeddings are configured (at the first restore)
    breaker: Breaker = field(default_factory=Breaker)
    recall: FullTextOnly = field(default_factory=FullTextOnly)
    search: FullTextOnly = field(default_factory=FullTextOnly)
    searches: int = 0  # memory.search steps that asked for a vector (their tokens: -1, -2, ...)


@dataclass
class Context:
    """The supervisor's state and the actor's operations; see the module docstring."""

    send: Send
    wake: Wake
    create: Callable[[type], ActorAddress]  # a child actor (forked with the garbage collector frozen)
    exit: Callable[[], None]  # tell this actor to exit (ActorExitRequest to itself)
    task_actors: TaskActors
    log: Log
    settings: Settings | None = None
    store: Store | None = None
    admission: Admission | None = None
    store_health: StoreHealth = field(default_factory=StoreHealth)
    timer: ScheduleTimer = field(default_factory=ScheduleTimer)
    supervision: Supervision = field(default_factory=lambda: Supervision(SPECS))
    pools: Pools = field(default_factory=Pools)
    vectors: Vectors = field(default_factory=Vectors)
    post: PostReflections | None = None  # made at Configure (its limit is the llm pool's size)
    stopped: dict[str, TaskSnapshot] = field(default_factory=dict)  # a run's last snapshot while its end is admitted
    # a run's full checkpoint at completed, within its TaskReports: the archive's context, not dumped again
    completed: dict[str, bytes] = field(default_factory=dict)
    # while a run's end is admitted: the task actor that hands its reflection out (TaskStopped.reflecting)
    reflecting: dict[str, ActorAddress] = field(default_factory=dict)
    run_started: dict[tuple[str, int], int] = field(default_factory=dict)  # (task, run) -> when placed, ns: its span
    subscribers: list[tuple[ActorAddress, str | None]] = field(default_factory=list)
    pending_suspend: dict[str, list[tuple[ActorAddress, str]]] = field(default_factory=dict)
    # stats ask id -> the requests it answers (client, request id) and the pools' figures so far
    pending_stats: dict[int, tuple[list[tuple[ActorAddress, str]], dict[str, Any]]] = field(default_factory=dict)
    asked: int = 0  # the last stats ask id
    # stats requests that asked the pools, and those answered by an ask already under way (stats' "stats_asks")
    stats_asks: dict[str, int] = field(default_factory=lambda: {"asked": 0, "shared": 0})
    identity: CurrentIdentity = field(default_factory=CurrentIdentity)  # identity.md's text, read when it changed
    schedules_quarantined: dict[str, str] = field(default_factory=dict)  # name -> error, as the store said last
    parent: ActorAddress | None = None  # the guardian (it sent Configure)
    told_trouble_at: float = 0.0
    giving_up: bool = False
    exiting: bool = False  # told to exit: nothing is handled any more
    pid: int = field(default_factory=os.getpid)
    find_mcp_host: Callable[[], ActorAddress] | None = None  # the machine's MCP host (its global name)
    mcp: dict[str, dict[str, Any]] | None = None  # its servers as its last listing showed them (stats)

    # The configured supervisor: every row but Configure runs only once these are set (actors.supervisor.replies).
    @property
    def configured(self) -> tuple[Settings, Store, Admission]:
        assert self.settings is not None and self.store is not None and self.admission is not None
        return self.settings, self.store, self.admission

    def notify(self, notice: TransitionNotice | m.TextDelta) -> None:
        for address, task_id in self.subscribers:
            if task_id is None or task_id == notice.task_id:
                self.send(address, notice)

    def to_pool(self, name: str, request: m.StageRequest) -> None:
        """The supervisor's own stage requests (gates, reflections): kept until answered, sent again to a new pool."""
        if request.pool != name:  # a home host runs both pools: the request names its own
            request = dataclasses.replace(request, pool=name)
        self.pools.requests[(request.task_id, request.stage)] = (name, request)
        self.send(self.pools.address[name], request)
        self.pools_in_use()

    def pools_in_use(self) -> None:
        """Work a pool could hold up began: the looks for a stopped pool go on (``pegasus.pool.looks``)."""
        for look in logs.emitted(self.log, self.pools.looks.step(Work())):
            if isinstance(look, LookIn):
                self.wake(look.seconds, m.PoolsCheck())

    def answered_by_pool(self, task_id: str, stage: str, token: int | None = None) -> None:
        held = self.pools.requests.get((task_id, stage))
        if held is not None and (token is None or held[1].token == token):
            del self.pools.requests[(task_id, stage)]
