"""Where task runs live: which task actor a new run goes to, when another starts, when one retires.

``step(input) -> [command]``, never raising, the clock in the inputs (carried out by
actors/supervisor/task_actors.py).  Load is each host's measured CPU per second of wall time, so the
number of hosts follows the rate of transitions, not the tasks in flight.  A new run goes to the cool
host with the fewest runs; when all are hot, another starts, up to the ceiling.  A run never moves
(docs/architecture.md, "Virtual task actors").  Not retired: a host holding a done task's reflection it handed
out (``pegasus.run.reflections``), its answer would go with it; the home host, where the pools run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pegasus.bounds import timer_s
from pegasus.core_error import Log, error_log

GROW_AT = 0.5  # a host busy more than half the time takes no new run while another can start
SAMPLE_S = 0.2  # shortest interval a utilisation sample covers (shorter ones are noise)
SMOOTH_S = 1.0  # utilisation is smoothed over about this long
STALE_S = 2.0  # a host that reported nothing for this long is idle, whatever its last sample said


# -- inputs ------------------------------------------------------------------------------------
# Those made per run or report (on the supervisor's hot path) are slotted and not frozen: a frozen
# dataclass's __init__ sets each field through object.__setattr__, about twice the cost.
@dataclass(slots=True)
class Place:
    """A new run of ``task_id`` (a run it had elsewhere is released first): ``Placed`` says where."""

    task_id: str
    run: int
    now: float


@dataclass(slots=True)
class Release:
    """The run stopped (``run`` None: whichever it has): ``Freed`` says which host held it."""

    task_id: str
    run: int | None
    now: float


@dataclass(slots=True)
class Report:
    """Host ``key`` has used ``cpu_s`` seconds of CPU so far (its reports carry it)."""

    key: int
    cpu_s: float
    now: float


@dataclass(frozen=True, slots=True)
class Hold:
    """Host ``key`` handed the task's reflection out: it holds it until ``Unhold``."""

    key: int
    task_id: str


@dataclass(frozen=True, slots=True)
class Unhold:
    """Host ``key`` no longer holds the task's reflection."""

    key: int
    task_id: str
    now: float


@dataclass(frozen=True, slots=True)
class Home:
    """The pools need a home: ``Placed`` names the home host (after its ``StartHost``, when it is new)."""

    now: float


@dataclass(frozen=True, slots=True)
class Lost:
    """Host ``key``'s task actor died: ``HostLost`` gives back its runs."""

    key: int


@dataclass(frozen=True, slots=True)
class Tick:
    """The timer a ``WakeIn`` armed fired: idle hosts may be retired."""

    now: float


HostInput = Place | Release | Report | Hold | Unhold | Home | Lost | Tick


# -- commands ----------------------------------------------------------------------------------
@dataclass(slots=True)
class Placed:
    """The run goes to host ``key`` (after its ``StartHost``, when one came first)."""

    key: int


@dataclass(slots=True)
class Freed:
    """The released run was on host ``key`` (before a ``RetireHost`` of it)."""

    key: int


@dataclass(frozen=True, slots=True)
class HostLost:
    """Host ``key`` is forgotten; the runs it held (task, run)."""

    key: int
    runs: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class StartHost:
    """Create a task actor for host ``key`` (before the run placed on it is sent)."""

    key: int


@dataclass(frozen=True, slots=True)
class RetireHost:
    """Tell host ``key``'s task actor to exit: it holds no run."""

    key: int


@dataclass(frozen=True)
class WakeIn:
    """Step ``Tick`` after ``seconds`` (an idle host may be retired then)."""

    seconds: float

    def __post_init__(self) -> None:  # a delay Thespian can arm whatever came before (pegasus.bounds)
        object.__setattr__(self, "seconds", timer_s(self.seconds))


HostCommand = Placed | Freed | HostLost | StartHost | RetireHost | WakeIn | Log


@dataclass
class Host:
    """One task actor: the runs it holds (task -> run), the reflections it holds, the runs it served,
    its utilisation."""

    key: int
    runs: dict[str, int] = field(default_factory=dict)
    reflections: set[str] = field(default_factory=set)
    served: int = 0
    util: float = 0.0
    sample: tuple[float, float] | None = None  # (its CPU seconds, our clock) at the last sample
    idle_since: float | None = None
    home: bool = False  # the pools run in it: never retired


class TaskHosts:
    """The hosts of one supervisor's runs; see the module docstring."""

    def __init__(self, minimum: int = 1, maximum: int = 8, runs_per_host: int = 1000, idle_s: float = 30.0) -> None:
        self.minimum, self.maximum = minimum, max(1, maximum)
        self.runs_per_host, self.idle_s = runs_per_host, idle_s
        self.hosts: dict[int, Host] = {}
        self.placed: dict[str, int] = {}  # task -> the host of its run
        self.created = 0
        self.home: int | None = None  # the key of the home host, while it lives
        self._tick_armed = False

    def step(self, event: HostInput) -> list[HostCommand]:
        try:
            if isinstance(event, Place):
                return self._place(event)
            if isinstance(event, Release):
                return self._release(event.task_id, event.run, event.now)
            if isinstance(event, Report):
                self._report(event)
            elif isinstance(event, Hold):
                if (host := self.hosts.get(event.key)) is not None:
                    host.reflections.add(event.task_id)
            elif isinstance(event, Unhold):
                return self._unhold(event)
            elif isinstance(event, Home):
                return self._home(event.now)
            elif isinstance(event, Lost):
                return self._lost(event.key)
            elif isinstance(event, Tick):
                return self._tick(event.now)
        except Exception as exc:  # noqa: BLE001 - placement must never take the supervisor down; nothing is decided
            return [error_log("task_hosts", event, exc)]
        return []

    def host_of(self, task_id: str) -> tuple[int, int] | None:
        """(host, run) of the task's running run, or None."""
        key = self.placed.get(task_id)
        return None if key is None else (key, self.hosts[key].runs[task_id])

    # -- runs -------------------------------------------------------------------------------------
    def _place(self, event: Place) -> list[HostCommand]:
        task_id = event.task_id
        commands = self._release(task_id, None, event.now)[1:] if task_id in self.placed else []  # not its Freed
        host = self._choose(event.now)
        if host is None:
            self.created += 1
            host = self.hosts[self.created] = Host(self.created)
            commands.append(StartHost(host.key))
        host.runs[task_id] = event.run
        host.served += 1
        host.idle_since = None
        self.placed[task_id] = host.key
        commands.append(Placed(host.key))
        return commands

    def _home(self, now: float) -> list[HostCommand]:
        if self.home is not None:
            return [Placed(self.home)]
        if self.hosts and len(self.hosts) >= self.maximum:  # at the ceiling: one of them becomes the home
            host = min(self.hosts.values(), key=lambda h: (len(h.runs), h.key))
            host.home, self.home = True, host.key
            return [Placed(host.key)]
        self.created += 1
        host = self.hosts[self.created] = Host(self.created, home=True, idle_since=now)
        self.home = host.key
        return [StartHost(host.key), Placed(host.key)]

    def _release(self, task_id: str, run: int | None, now: float) -> list[HostCommand]:
        key = self.placed.get(task_id)
        if key is None:
            return []
        host = self.hosts[key]
        if run is not None and host.runs[task_id] != run:
            return []
        del self.placed[task_id], host.runs[task_id]
        return [Freed(key), *self._emptied(host, now)]

    def _unhold(self, event: Unhold) -> list[HostCommand]:
        host = self.hosts.get(event.key)
        if host is None or event.task_id not in host.reflections:
            return []
        host.reflections.discard(event.task_id)
        return self._emptied(host, event.now)

    def _emptied(self, host: Host, now: float) -> list[HostCommand]:
        if host.runs or host.reflections:
            return []
        if host.served >= self.runs_per_host and not host.home:  # served its runs: retired now, it holds none
            del self.hosts[host.key]
            return [RetireHost(host.key)]
        host.idle_since = now
        return self._arm()

    def _lost(self, key: int) -> list[HostCommand]:
        host = self.hosts.pop(key, None)
        if host is None:
            return []  # not a host of ours any more (retired)
        if self.home == key:
            self.home = None
        for task_id in host.runs:
            del self.placed[task_id]
        return [HostLost(key, tuple(host.runs.items()))]

    # -- load and size ------------------------------------------------------------------------------
    def _report(self, event: Report) -> None:
        host = self.hosts.get(event.key)
        if host is None:
            return
        now, cpu_s = event.now, event.cpu_s
        if host.sample is None:
            host.sample = (cpu_s, now)
            return
        cpu0, at = host.sample
        if now - at < SAMPLE_S:
            return
        rate = max(0.0, cpu_s - cpu0) / (now - at)
        host.util += min(1.0, (now - at) / SMOOTH_S) * (rate - host.util)  # a sample of SMOOTH_S or more: as it is
        host.sample = (cpu_s, now)

    def _tick(self, now: float) -> list[HostCommand]:
        """Retire the hosts idle for ``idle_s`` beyond the floor; arm the next tick while one is idle."""
        self._tick_armed = False
        commands: list[HostCommand] = []
        idle = sorted((h for h in self.hosts.values() if h.idle_since is not None), key=lambda h: h.idle_since or 0)
        for host in idle:
            if len(self.hosts) <= self.minimum:
                break
            if now - (host.idle_since or now) >= self.idle_s and not host.home:
                del self.hosts[host.key]
                commands.append(RetireHost(host.key))
        return commands + self._arm()

    @staticmethod
    def load(host: Host, now: float) -> float:
        """Its utilisation, 0 when it has said nothing lately."""
        return host.util if _fresh(host, now) else 0.0

    def _choose(self, now: float) -> Host | None:
        """The host for a new run; None: start one."""
        if len(self.hosts) < min(self.minimum, self.maximum):
            return None  # up to the floor, each new run starts a host: a burst spreads before any load is known
        load = self.load
        open_hosts = [h for h in self.hosts.values() if h.served < self.runs_per_host or h.home]
        cool = [h for h in open_hosts if load(h, now) < GROW_AT]
        if cool:
            # The home host first while it is cool and says so (silent, a busy one looks idle): its runs reach
            # the pools without a message.
            return min(cool, key=lambda h: (not (h.home and _fresh(h, now)), len(h.runs), load(h, now), h.key))
        if len(self.hosts) < self.maximum or not self.hosts:
            return None
        return min(open_hosts or self.hosts.values(), key=lambda h: (load(h, now), len(h.runs), h.key))

    def _arm(self) -> list[HostCommand]:
        idle = any(h.idle_since is not None and not h.home for h in self.hosts.values())
        if self._tick_armed or not idle or len(self.hosts) <= self.minimum:
            return []
        self._tick_armed = True
        return [WakeIn(self.idle_s)]

    def view(self) -> dict[str, int]:
        """For stats: runs held, hosts holding none, hosts created so far, hosts live."""
        return {"running": len(self.placed), "free": sum(1 for h in self.hosts.values() if not h.runs),
                "created": self.created, "hosts": len(self.hosts)}


def _fresh(host: Host, now: float) -> bool:
    """It reported within ``STALE_S``."""
    return host.sample is not None and now - host.sample[1] <= STALE_S
