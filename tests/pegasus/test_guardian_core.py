"""The guardian's decisions without Thespian: Locate waits for a start, a first start that failed is told,
a dead supervisor is started again (slowed down in a crash loop, named with what it died of)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pegasus.guardian import (
    KEEPER, SPECS, SUPERVISOR, TROUBLE_FRESH_S, UNEXPECTED, Answer, ChildExited, Created, Due, Exit, GuardianCore,
    Locate, Log, ReadSettings, Replied, SettingsRead, StartFailed, StartKeeper, StartSupervisor, Stop, Trouble, WakeIn,
)
from pegasus.levels import Level
from pegasus.requests.base import Reply


def of(commands: list, kind: type) -> list:
    return [c for c in commands if isinstance(c, kind)]


def up(core: GuardianCore, address: str = "sup-1", now: float = 0.0, http: bool = False) -> list:
    """Bring a supervisor up at ``address``: the commands of the Configure's answer."""
    assert of(core.step(Locate("client", f"loc-{address}", now)), ReadSettings) or core.deaths
    started = core.step(SettingsRead(now, {"settings": 1}, http_enabled=http))
    [start] = of(started, StartSupervisor)
    assert core.step(Created(SUPERVISOR, address, now)) == []
    return core.step(Replied(address, Reply(start.request_id, True, data={"pid": 42}), now))


def test_a_locate_waits_for_the_start_and_is_answered_with_where_the_supervisor_is() -> None:
    core = GuardianCore("inc")
    assert core.step(Locate("c1", "r1", 0.0)) == [ReadSettings()]
    assert core.step(Locate("c2", "r2", 0.0)) == [ReadSettings()]  # a second read is harmless: one start
    [start] = core.step(SettingsRead(0.1, {"s": 1}))
    assert start == StartSupervisor("guardian-1", {"s": 1})
    assert core.step(SettingsRead(0.1, {"s": 1})) == []  # the second read: a supervisor is coming already
    core.step(Created(SUPERVISOR, "sup", 0.1))
    assert core.step(Replied("someone", Reply("guardian-1", True), 0.2)) == []  # not the supervisor
    answered = core.step(Replied("sup", Reply("guardian-1", True, data={"pid": 7, "restored": 3}), 0.2))
    assert of(answered, Log) == [Log(Level.INFO, "supervisor_up", {"generation": 1, "restored": 3})]
    replies = {a.client: a.reply for a in of(answered, Answer)}
    assert set(replies) == {"c1", "c2"} and all(r.ok for r in replies.values())
    assert replies["c1"].data["supervisor"] == "sup" and replies["c1"].data["incarnation"] == "inc"
    assert core.pid_of("sup") == 7 and core.pid_of("other") is None
    [now] = core.step(Locate("c3", "r3", 1.0))
    assert now.reply.ok and now.reply.data["generation"] == 1 and now.reply.data["restarts"] == 0


def test_a_first_start_that_failed_is_told_to_every_locate_and_not_tried_again() -> None:
    core = GuardianCore()
    core.step(Locate("c1", "r1", 0.0))
    failed = core.step(SettingsRead(0.0, error="no settings at x"))
    assert of(failed, Log)[0].level is Level.ERROR
    [answer] = of(failed, Answer)
    assert answer.reply == Reply("r1", False, error="no settings at x", error_type="StartFailed")
    [again] = core.step(Locate("c2", "r2", 1.0))  # no new start: the same answer
    assert again.reply.error_type == "StartFailed"


def test_a_configure_refused_stops_that_supervisor() -> None:
    core = GuardianCore()
    core.step(Locate("c1", "r1", 0.0))
    [start] = core.step(SettingsRead(0.0, {}))
    core.step(Created(SUPERVISOR, "sup", 0.0))
    refused = core.step(Replied("sup", Reply(start.request_id, False, error="store locked"), 0.1))
    assert Stop("sup") in refused
    assert of(refused, Answer)[0].reply.error == "store locked"
    assert core.supervisor is None


def test_a_dead_supervisor_is_started_again_named_with_what_it_told_or_its_crash() -> None:
    core = GuardianCore()
    up(core)
    core.step(Trouble("sup-1", "disk full", 10.0))
    died = core.step(ChildExited("sup-1", 11.0, crash="KeyError"))
    [line, restart, *_] = of(died, Log)
    assert line.event == "supervisor_died" and line.fields["reason"] == "disk full" and line.fields["deaths"] == 1
    assert restart.event == "supervisor_restart" and restart.fields["restart_in_s"] == 0.0
    assert ReadSettings() in died  # the first death: at once
    up(core, "sup-2", 12.0)
    core.step(Trouble("sup-2", "old news", 12.0))
    died = core.step(ChildExited("sup-2", 12.0 + TROUBLE_FRESH_S + 1, crash="KeyError: x"))
    assert of(died, Log)[0].fields["reason"] == "KeyError: x"  # the trouble was too old to be the cause
    assert of(died, WakeIn) == [WakeIn(1.0, SUPERVISOR, 2)]  # the second in a row: after a pause
    assert core.step(Due(SUPERVISOR, 1, 50.0)) == []  # an older generation's timer
    assert core.step(Due(SUPERVISOR, 2, 50.0)) == [ReadSettings()]
    up(core, "sup-3", 51.0)
    assert of(core.step(ChildExited("sup-3", 52.0)), Log)[0].fields["reason"] == UNEXPECTED


def test_a_locate_after_a_death_starts_one_at_once_and_a_failure_then_says_not_running() -> None:
    core = GuardianCore()
    up(core)
    core.step(ChildExited("sup-1", 1.0))
    assert core.step(Locate("c", "r", 1.5)) == [ReadSettings()]
    failed = core.step(SettingsRead(1.5, error="settings gone"))
    assert of(failed, Answer)[0].reply.error_type == "SystemNotRunning"
    assert of(failed, WakeIn) or ReadSettings() in failed  # tried again, as supervision says


def test_a_start_the_carrier_could_not_carry_out_is_told_first_and_tried_again_after_a_death() -> None:
    """Configuring logging or creating the supervisor raised: not stuck configuring with every Locate queued."""
    core = GuardianCore()
    core.step(Locate("c1", "r1", 0.0))
    core.step(SettingsRead(0.0, {}))
    failed = core.step(StartFailed("OSError: no log dir", 0.0))
    assert of(failed, Answer)[0].reply.error_type == "StartFailed" and "no log dir" in core.error
    assert core.configuring is None
    core = GuardianCore()
    up(core)
    core.step(ChildExited("sup-1", 1.0))
    core.step(SettingsRead(1.0, {}))
    core.step(Locate("c", "r", 1.1))  # waits for the start in flight
    failed = core.step(StartFailed("RuntimeError: no process", 1.2))
    assert of(failed, Answer)[0].reply.error_type == "SystemNotRunning"
    [timer] = of(failed, WakeIn)  # tried again, slowed down, as after a death
    assert core.step(Due(SUPERVISOR, timer.generation, 3.0)) == [ReadSettings()]
    assert of(core.step(SettingsRead(3.0, {})), StartSupervisor)


def test_a_locate_waits_out_a_crash_loops_pause() -> None:
    """Clients Locate often: the pause between restarts holds while they do (answered once one is up)."""
    core, now = GuardianCore(), 0.0
    up(core, "sup-0")
    for n in range(1, 9):  # deaths 0.5 s apart: pauses 0 (the first), then 1, 2, 4, 8, 30 s
        now += 0.5
        timers = of(core.step(ChildExited(f"sup-{n - 1}", now)), WakeIn)
        if n == 1:
            assert not timers
        else:
            [timer] = timers
            assert core.step(Locate("poller", f"r{n}", now + 0.1)) == []  # no start before the timer
            now += timer.seconds
            assert core.step(Due(SUPERVISOR, timer.generation, now)) == [ReadSettings()]
        answered = up(core, f"sup-{n}", now)
        assert n == 1 or {a.client for a in of(answered, Answer)} == {"client", "poller"}


def test_the_gateway_keeper_starts_with_the_first_supervisor_and_again_when_it_dies() -> None:
    core = GuardianCore()
    assert StartKeeper() in up(core, http=True)
    core.step(Created(KEEPER, "keeper-1", 0.0))
    died = core.step(ChildExited("keeper-1", 5.0))
    assert of(died, Log)[0].event == "gateway_keeper_died" and StartKeeper() in died
    core.step(Created(KEEPER, "keeper-2", 5.0))
    assert StartKeeper() not in core.step(ChildExited("sup-1", 6.0))  # the keeper lives on


def test_exit_stops_both_children_and_nothing_starts_again() -> None:
    core = GuardianCore()
    up(core, http=True)
    core.step(Created(KEEPER, "keeper", 0.0))
    assert core.step(Exit()) == [Stop("sup-1"), Stop("keeper")]
    assert core.step(ChildExited("sup-1", 1.0)) == [] and core.step(ChildExited("keeper", 1.0)) == []
    assert core.step(Locate("c", "r", 2.0)) == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(min_value=0.0, max_value=5.0), min_size=1, max_size=20))
def test_a_crash_loop_is_slowed_down_never_given_up(gaps: list[float]) -> None:
    """Any run of deaths: every one is followed by a start (at once or by a timer), never by nothing."""
    core, now = GuardianCore(), 0.0
    up(core, "sup-0")
    for n, gap in enumerate(gaps, start=1):
        now += gap
        died = core.step(ChildExited(f"sup-{n - 1}", now))
        timers = of(died, WakeIn)
        assert ReadSettings() in died or timers
        assert all(t.seconds <= SPECS[SUPERVISOR].max_s for t in timers)  # the pause asked for, not a time taken
        if timers:
            assert core.step(Due(SUPERVISOR, timers[0].generation, now)) == [ReadSettings()]
        core.step(SettingsRead(now, {}))
        core.step(Created(SUPERVISOR, f"sup-{n}", now))
        core.step(Replied(f"sup-{n}", Reply(core.configuring or "", True), now))
    assert core.deaths == len(gaps)


def test_the_core_never_raises() -> None:
    core = GuardianCore()
    [error] = core.step(Replied("x", None, 0.0))  # type: ignore[arg-type]  # a malformed input: nothing decided
    assert error.event == "guardian_core_error" and error.fields["input_type"] == "Replied"
