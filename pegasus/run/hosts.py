"""Where task runs live: which task actor a new run goes to, when another starts, when one retires.

Pure; the supervisor carries out its commands (clock passed in).  Load is each host's measured CPU
per second of wall time, so the number of hosts follows the rate of transitions, not the tasks in
flight.  A new run goes to the cool host with the fewest runs; when all are hot, another starts,
up to the ceiling.  A run never moves (docs/architecture.md, "Virtual task actors").  A host is not
retired while it holds a done task's reflection it handed out (``pegasus.run.reflections``): its
answer would go with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pegasus.bounds import timer_s

GROW_AT = 0.5  # a host busy more than half the time takes no new run while another can start
SAMPLE_S = 0.2  # shortest interval a utilisation sample covers (shorter ones are noise)
SMOOTH_S = 1.0  # utilisation is smoothed over about this long
STALE_S = 2.0  # a host that reported nothing for this long is idle, whatever its last sample said


@dataclass(frozen=True)
class StartHost:
    """Create a task actor for host ``key`` (before the run placed on it is sent)."""

    key: int


@dataclass(frozen=True)
class RetireHost:
    """Tell host ``key``'s task actor to exit: it holds no run."""

    key: int


@dataclass(frozen=True)
class WakeIn:
    """Call ``tick`` after ``seconds`` (an idle host may be retired then)."""

    seconds: float

    def __post_init__(self) -> None:  # a delay Thespian can arm whatever came before (pegasus.bounds)
        object.__setattr__(self, "seconds", timer_s(self.seconds))


HostCommand = StartHost | RetireHost | WakeIn


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


class TaskHosts:
    """The hosts of one supervisor's runs; see the module docstring."""

    def __init__(self, minimum: int = 1, maximum: int = 8, runs_per_host: int = 1000, idle_s: float = 30.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.minimum, self.maximum = minimum, max(1, maximum)
        self.runs_per_host, self.idle_s, self.clock = runs_per_host, idle_s, clock
        self.hosts: dict[int, Host] = {}
        self.placed: dict[str, int] = {}  # task -> the host of its run
        self.created = 0
        self._tick_armed = False

    # -- runs -------------------------------------------------------------------------------------
    def place(self, task_id: str, run: int) -> tuple[int, list[HostCommand]]:
        """The host for a new run of ``task_id`` (a run it had elsewhere is released first)."""
        commands = self.release(task_id)[1]
        host = self._choose()
        if host is None:
            self.created += 1
            host = self.hosts[self.created] = Host(self.created)
            commands.append(StartHost(host.key))
        host.runs[task_id] = run
        host.served += 1
        host.idle_since = None
        self.placed[task_id] = host.key
        return host.key, commands

    def host_of(self, task_id: str) -> tuple[int, int] | None:
        """(host, run) of the task's running run, or None."""
        key = self.placed.get(task_id)
        return None if key is None else (key, self.hosts[key].runs[task_id])

    def release(self, task_id: str, run: int | None = None) -> tuple[int | None, list[HostCommand]]:
        """The run stopped (or is stopped): (its host or None when it held none of this run, commands)."""
        key = self.placed.get(task_id)
        if key is None:
            return None, []
        host = self.hosts[key]
        if run is not None and host.runs[task_id] != run:
            return None, []
        del self.placed[task_id], host.runs[task_id]
        return key, self._emptied(host)

    def hold(self, key: int, task_id: str) -> None:
        """Host ``key`` holds the task's reflection (until ``unhold``)."""
        host = self.hosts.get(key)
        if host is not None:
            host.reflections.add(task_id)

    def unhold(self, key: int, task_id: str) -> list[HostCommand]:
        """Host ``key`` no longer holds the task's reflection."""
        host = self.hosts.get(key)
        if host is None or task_id not in host.reflections:
            return []
        host.reflections.discard(task_id)
        return self._emptied(host)

    def _emptied(self, host: Host) -> list[HostCommand]:
        if host.runs or host.reflections:
            return []
        if host.served >= self.runs_per_host:  # served its runs: retired now, it holds none
            del self.hosts[host.key]
            return [RetireHost(host.key)]
        host.idle_since = self.clock()
        return self._arm()

    def lost(self, key: int) -> list[tuple[str, int]] | None:
        """Host ``key`` died: forget it; the runs it held (None: not a host of ours any more)."""
        host = self.hosts.pop(key, None)
        if host is None:
            return None
        for task_id in host.runs:
            del self.placed[task_id]
        return list(host.runs.items())

    # -- load and size ------------------------------------------------------------------------------
    def report(self, key: int, cpu_s: float) -> None:
        """Host ``key`` has used ``cpu_s`` seconds of CPU so far (its reports carry it)."""
        host = self.hosts.get(key)
        if host is None:
            return
        now = self.clock()
        if host.sample is None:
            host.sample = (cpu_s, now)
            return
        cpu0, at = host.sample
        if now - at < SAMPLE_S:
            return
        rate = max(0.0, cpu_s - cpu0) / (now - at)
        host.util += min(1.0, (now - at) / SMOOTH_S) * (rate - host.util)  # a sample of SMOOTH_S or more: as it is
        host.sample = (cpu_s, now)

    def tick(self) -> list[HostCommand]:
        """Retire the hosts idle for ``idle_s`` beyond the floor; arm the next tick while one is idle."""
        self._tick_armed = False
        now = self.clock()
        commands: list[HostCommand] = []
        idle = sorted((h for h in self.hosts.values() if h.idle_since is not None), key=lambda h: h.idle_since or 0)
        for host in idle:
            if len(self.hosts) <= self.minimum:
                break
            if now - (host.idle_since or now) >= self.idle_s:
                del self.hosts[host.key]
                commands.append(RetireHost(host.key))
        return commands + self._arm()

    def load(self, host: Host) -> float:
        """Its utilisation, 0 when it has said nothing lately."""
        if host.sample is None or self.clock() - host.sample[1] > STALE_S:
            return 0.0
        return host.util

    def _choose(self) -> Host | None:
        """The host for a new run; None: start one."""
        if len(self.hosts) < min(self.minimum, self.maximum):
            return None  # up to the floor, each new run starts a host: a burst spreads before any load is known
        open_hosts = [h for h in self.hosts.values() if h.served < self.runs_per_host]
        cool = [h for h in open_hosts if self.load(h) < GROW_AT]
        if cool:
            return min(cool, key=lambda h: (len(h.runs), self.load(h), h.key))
        if len(self.hosts) < self.maximum or not self.hosts:
            return None
        return min(open_hosts or self.hosts.values(), key=lambda h: (self.load(h), len(h.runs), h.key))

    def _arm(self) -> list[HostCommand]:
        idle = any(h.idle_since is not None for h in self.hosts.values())
        if self._tick_armed or not idle or len(self.hosts) <= self.minimum:
            return []
        self._tick_armed = True
        return [WakeIn(self.idle_s)]

    def view(self) -> dict[str, int]:
        """For stats: runs held, hosts holding none, hosts created so far, hosts live."""
        return {"running": len(self.placed), "free": sum(1 for h in self.hosts.values() if not h.runs),
                "created": self.created, "hosts": len(self.hosts)}
