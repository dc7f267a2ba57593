"""The task actors' placement and sizing policy (pegasus.run.hosts): ``step(input) -> [command]``, the clock
in the inputs (``Policy`` below: the old per-event calls over ``step``, on a clock the test moves)."""

from __future__ import annotations

from pegasus.run.hosts import (
    GROW_AT, SAMPLE_S, STALE_S, Freed, Hold, Home, HostLost, Lost, Place, Placed, Release, Report, RetireHost,
    StartHost, TaskHosts, Tick, Unhold, WakeIn,
)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0


class Policy:
    """``TaskHosts`` stepped as its carrier does, each call on the test's clock."""

    def __init__(self, clock: Clock, **kwargs) -> None:
        self.core, self.clock = TaskHosts(**kwargs), clock

    def place(self, task_id: str, run: int) -> tuple[int, list]:
        *commands, placed = self.core.step(Place(task_id, run, self.clock.now))
        assert isinstance(placed, Placed)
        return placed.key, commands

    def release(self, task_id: str, run: int | None = None) -> tuple[int | None, list]:
        commands = self.core.step(Release(task_id, run, self.clock.now))
        if not commands:
            return None, []
        assert isinstance(commands[0], Freed)
        return commands[0].key, commands[1:]

    def report(self, key: int, cpu_s: float) -> None:
        assert self.core.step(Report(key, cpu_s, self.clock.now)) == []

    def hold(self, key: int, task_id: str) -> None:
        assert self.core.step(Hold(key, task_id)) == []

    def unhold(self, key: int, task_id: str) -> list:
        return self.core.step(Unhold(key, task_id, self.clock.now))

    def lost(self, key: int) -> list[tuple[str, int]] | None:
        commands = self.core.step(Lost(key))
        return list(commands[0].runs) if commands and isinstance(commands[0], HostLost) else None

    def tick(self) -> list:
        return self.core.step(Tick(self.clock.now))

    def host_of(self, task_id: str) -> tuple[int, int] | None:
        return self.core.host_of(task_id)

    def view(self) -> dict[str, int]:
        return self.core.view()



def hosts(**kwargs) -> tuple[Policy, Clock]:
    clock = Clock()
    return Policy(clock, **kwargs), clock


_cpu: dict[tuple[int, int], float] = {}


def busy(policy: Policy, clock: Clock, key: int, util: float) -> None:
    """Host ``key`` reports its CPU time having used ``util`` of the last second."""
    slot = (id(policy), key)
    if slot not in _cpu:
        _cpu[slot] = 0.0
        policy.report(key, 0.0)
    clock.now += 1.0
    _cpu[slot] += util
    policy.report(key, _cpu[slot])
    clock.now += SAMPLE_S / 2  # fresh: not stale


def test_the_first_run_starts_a_host_and_idle_hosts_take_many_runs() -> None:
    """Tasks waiting on stages cost a host nothing: 500 runs share the one host while it stays cool."""
    policy, _ = hosts(maximum=4)
    key, commands = policy.place("t0", 1)
    assert commands == [StartHost(key)]
    for n in range(1, 500):
        assert policy.place(f"t{n}", 1) == (key, [])
    assert policy.view() == {"running": 500, "free": 0, "created": 1, "hosts": 1}


def test_a_host_grows_only_when_every_host_is_hot_and_never_past_the_ceiling() -> None:
    policy, clock = hosts(maximum=2)
    first, _ = policy.place("a", 1)
    busy(policy, clock, first, GROW_AT + 0.2)
    second, commands = policy.place("b", 1)
    assert second != first and commands == [StartHost(second)]
    busy(policy, clock, second, 0.1)
    assert policy.place("c", 1)[0] == second  # the cool one, though both hold a run
    busy(policy, clock, second, 0.9)
    busy(policy, clock, first, 0.7)
    third = policy.place("d", 1)
    assert third == (first, [])  # at the ceiling: the least busy, no new process
    assert policy.view()["hosts"] == 2


def test_a_new_run_goes_to_the_cool_host_with_the_fewest_runs() -> None:
    policy, clock = hosts(maximum=3)
    first, _ = policy.place("a", 1)
    busy(policy, clock, first, 0.9)
    second, _ = policy.place("b", 1)
    policy.place("c", 1)  # second: the only cool one
    busy(policy, clock, first, 0.1)  # both cool now; first holds fewer runs
    assert policy.place("d", 1)[0] == first


def test_a_host_that_said_nothing_lately_counts_as_idle() -> None:
    policy, clock = hosts(maximum=2)
    first, _ = policy.place("a", 1)
    busy(policy, clock, first, 0.95)
    clock.now += STALE_S + 1
    assert policy.place("b", 1) == (first, [])


def test_an_idle_host_above_the_floor_is_retired_after_idle_s_and_the_floor_stays() -> None:
    policy, clock = hosts(minimum=1, maximum=3, idle_s=30.0)
    first, _ = policy.place("a", 1)
    busy(policy, clock, first, 0.9)
    second, _ = policy.place("b", 1)
    assert policy.release("a", 1) == (first, [WakeIn(30.0)])
    assert policy.release("b", 1) == (second, [])  # the timer is armed already
    clock.now += 10
    assert policy.tick() == [WakeIn(30.0)]  # not idle long enough: looked at again later
    clock.now += 25
    assert policy.tick() == [RetireHost(first)]  # the longest idle goes; the floor (one) stays
    assert policy.view() == {"running": 0, "free": 1, "created": 2, "hosts": 1}
    clock.now += 100
    assert policy.tick() == []


def test_a_host_retires_once_it_has_served_its_runs_and_holds_none() -> None:
    policy, _ = hosts(runs_per_host=2)
    first, _ = policy.place("a", 1)
    assert policy.place("b", 1) == (first, [])
    second, commands = policy.place("c", 1)  # first has served its two: a fresh host takes the next
    assert second != first and commands == [StartHost(second)]
    assert policy.release("a", 1) == (first, [])  # b still runs there
    assert policy.release("b", 1) == (first, [RetireHost(first)])


def test_a_host_holding_a_reflection_it_handed_out_is_neither_retired_nor_idle_until_the_answer() -> None:
    """Its answer would go with it (pegasus.run.reflections): the host waits for it, then retires."""
    policy, clock = hosts(runs_per_host=1, minimum=1, maximum=3, idle_s=30.0)
    first, _ = policy.place("a", 1)
    policy.hold(first, "a")  # the run's done report says its reflection went from there
    assert policy.release("a", 1) == (first, [])  # served its run, but holds the reflection
    second, commands = policy.place("b", 1)
    assert second != first and commands == [StartHost(second)]  # served: takes no new run meanwhile
    assert policy.unhold(first, "other") == []  # not one it holds
    assert policy.unhold(first, "a") == [RetireHost(first)]
    policy.hold(second, "b")
    assert policy.release("b", 1) == (second, [])
    clock.now += 100
    assert policy.tick() == []  # not idle while it holds one
    assert policy.unhold(second, "b") == [RetireHost(second)]
    assert policy.unhold(second, "b") == []  # retired: nothing more


def test_release_of_another_run_changes_nothing_and_a_new_run_replaces_the_old() -> None:
    policy, _ = hosts()
    key, _ = policy.place("a", 1)
    assert policy.release("a", 2) == (None, [])
    assert policy.host_of("a") == (key, 1)
    policy.place("a", 2)  # a restart: the earlier run is released first
    assert policy.host_of("a") == (key, 2) and policy.view()["running"] == 1
    assert policy.release("missing") == (None, [])


def test_a_dead_host_gives_back_its_runs_and_is_forgotten() -> None:
    policy, clock = hosts(maximum=2)
    first, _ = policy.place("a", 1)
    policy.place("b", 3)
    busy(policy, clock, first, 0.9)
    second, _ = policy.place("c", 1)
    assert sorted(policy.lost(first) or []) == [("a", 1), ("b", 3)]
    assert policy.lost(first) is None  # told twice (or a retired one): nothing
    assert policy.host_of("a") is None and policy.host_of("c") == (second, 1)
    policy.report(first, 5.0)  # a late report of the dead host: ignored
    assert policy.place("a", 2)[0] == second


def test_runs_spread_over_the_floor_before_any_load_is_known() -> None:
    """A burst is placed before any host reports: with a floor of 3 it lands on three processes."""
    policy, _ = hosts(minimum=3, maximum=8)
    keys = [policy.place(f"t{n}", 1)[0] for n in range(9)]
    assert sorted(keys) == [1, 1, 1, 2, 2, 2, 3, 3, 3] and policy.view()["hosts"] == 3


def test_the_core_never_raises_and_decides_nothing_on_a_malformed_input() -> None:
    core = TaskHosts()
    assert core.step(Place("t", 1, 0.0)) == [StartHost(1), Placed(1)]
    assert core.step(Report(1, "much", 1.0)) == []  # type: ignore[arg-type]
    [error] = core.step(Report(1, 2.0, 2.0))  # its arithmetic fails inside: nothing decided, nothing raised, but said
    assert error.event == "task_hosts_error" and error.fields["input_type"] == "Report"
    assert core.step(object()) == []  # type: ignore[arg-type]
    assert core.host_of("t") == (1, 1)


def test_the_home_host_takes_runs_is_never_retired_and_a_new_one_follows_its_death() -> None:
    """The pools run in the home host (pegasus.pool.home): made once, before any run, it takes runs like any
    other, is kept past its runs and its idle time, and once it died the next ``Home`` makes another."""
    policy, clock = hosts(minimum=1, runs_per_host=2, idle_s=10.0)
    assert policy.core.step(Home(clock.now)) == [StartHost(1), Placed(1)]
    assert policy.core.step(Home(clock.now)) == [Placed(1)]  # both pools: one home
    assert policy.place("t1", 1) == (1, []) and policy.place("t2", 1) == (1, [])
    assert policy.release("t1") == (1, []) and policy.release("t2") == (1, [])  # served its 2: kept, no timer
    clock.now += 60.0
    assert not any(isinstance(c, RetireHost) for c in policy.tick())
    assert policy.place("t3", 1)[0] == 1  # still taking runs
    assert policy.lost(1) == [("t3", 1)]
    assert policy.core.step(Home(clock.now)) == [StartHost(2), Placed(2)]


def test_new_runs_go_to_the_cool_home_host_first_so_a_burst_leaves_no_lasting_split() -> None:
    """Once a burst started a second host, runs went to whichever held fewer (half of them on the four-message
    path for as long as the load lasted); the home host takes them while it is cool."""
    policy, clock = hosts(maximum=2)
    assert policy.core.step(Home(clock.now)) == [StartHost(1), Placed(1)]
    busy(policy, clock, 1, 0.9)
    assert policy.place("a", 1) == (2, [StartHost(2)])  # the home is hot: another host
    busy(policy, clock, 1, 0.1)
    busy(policy, clock, 2, 0.1)
    assert [policy.place(task, 1)[0] for task in ("b", "c", "d", "e")] == [1, 1, 1, 1]


def test_the_home_host_made_at_the_ceiling_is_one_of_the_hosts_not_one_more() -> None:
    """The home host died and its pools start again after the runs it lost were placed up to the ceiling: the
    host with the fewest runs becomes the home, no host past ``maximum``."""
    policy, clock = hosts(maximum=2)
    assert policy.core.step(Home(clock.now)) == [StartHost(1), Placed(1)]
    policy.place("a", 1)
    assert policy.lost(1) == [("a", 1)]
    assert policy.place("a", 2) == (2, [StartHost(2)])
    busy(policy, clock, 2, 0.9)
    assert policy.place("b", 1) == (3, [StartHost(3)])
    assert policy.place("c", 1) == (3, [])  # 2 is hot
    assert policy.view()["hosts"] == 2
    assert policy.core.step(Home(clock.now)) == [Placed(2)]  # the one with fewer runs, no third host
    assert policy.view()["hosts"] == 2
    assert policy.core.step(Home(clock.now)) == [Placed(2)]


def test_a_home_host_that_said_nothing_lately_is_not_preferred() -> None:
    """A home host too busy to report looks idle (stale): preferred as well, it took every new run."""
    policy, clock = hosts(maximum=2)
    policy.core.step(Home(clock.now))
    busy(policy, clock, 1, 0.9)
    policy.place("a", 1)  # the home is hot: host 2 starts
    policy.place("b", 1)
    busy(policy, clock, 2, 0.1)
    clock.now += STALE_S + 0.1
    busy(policy, clock, 2, 0.1)  # 2 fresh and cool; the home silent
    assert [policy.place(task, 1)[0] for task in ("c", "d")] == [1, 1]  # the home holds none yet: fewest runs
    assert policy.place("e", 1)[0] == 1 and policy.place("f", 1)[0] == 2  # 2 each: the fresh one's turn comes
