"""The schedules' timer with the clock passed in: what the integration tests once slept 2.5 s and 5 s for
(a paused schedule fires nothing; slots missed while the system was down fire once inside the catch-up window
and are counted outside it), here in simulated time, with the carrier's look done by ``pegasus.triggers.schedules``."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from hypothesis import given, settings, strategies as st

from pegasus.triggers.schedules import MAX_TIMER_S
from pegasus.schedule_timer import LATE_S, Arm, Changed, Look, Looked, LookFailed, ScheduleTimer, Woken
from pegasus.triggers.schedules import ScheduleState, make_spec, resume, step
from pegasus.store.health import PROBE_S

T0 = 1_800_000_000.0  # a whole second: every-1s slots fall on whole seconds


@dataclass
class Simulated:
    """A carrier in simulated time: one schedule, its looks done with ``pegasus.triggers.schedules.step``."""

    spec: object
    state: ScheduleState
    timer: ScheduleTimer = field(default_factory=ScheduleTimer)
    fired: list[float] = field(default_factory=list)
    armed: list[Arm] = field(default_factory=list)

    def feed(self, event) -> None:
        for command in self.timer.step(event):
            if isinstance(command, Arm):
                self.armed.append(command)
            else:
                assert isinstance(command, Look)
                result = step(self.spec, self.state, command.now, running=False)
                self.state = result.state
                self.fired += [fire.slot for fire in result.fires]
                self.feed(Looked(command.now, result.wake_at))

    def run_until(self, end: float) -> None:
        """Every wakeup armed fires when its delay is up, until ``end``."""
        while self.armed:
            arm = self.armed.pop(0)
            now = arm.at + LATE_S
            if now > end:
                self.armed.insert(0, arm)
                return
            self.feed(Woken(arm.at, now))


def every_second(**options) -> Simulated:
    spec = make_spec("tick", "what is 2 + 2?", every="1s", overlap="allow_all", now=T0, **options)
    return Simulated(spec, ScheduleState(cursor=T0))


def test_every_slot_fires_once_and_a_paused_schedule_fires_nothing_however_long() -> None:
    sim = every_second()
    sim.feed(Changed(T0))
    sim.run_until(T0 + 3.5)
    assert sim.fired == [T0 + 1, T0 + 2, T0 + 3]
    sim.state = replace(sim.state, paused=True)  # pause: the next look fires nothing, arms nothing
    sim.run_until(T0 + 4.5)
    assert sim.armed == [] and sim.fired == [T0 + 1, T0 + 2, T0 + 3]
    sim.run_until(T0 + 10_000)  # time passes: no timer, no fire
    assert sim.fired == [T0 + 1, T0 + 2, T0 + 3]
    sim.state = resume(sim.state, T0 + 20.2)
    sim.feed(Changed(T0 + 20.2))
    sim.run_until(T0 + 22.5)
    assert sim.fired[3:] == [T0 + 21, T0 + 22]  # the slots that passed while paused did not fire


def test_after_a_whole_system_kill_the_missed_slots_in_the_window_fire_once_and_older_are_counted() -> None:
    sim = every_second(catchup="3s")
    sim.feed(Changed(T0))
    sim.run_until(T0 + 2.5)
    assert sim.fired == [T0 + 1, T0 + 2]
    down = ScheduleState(**{**sim.state.__dict__})  # the store's row when every process was killed
    restarted = Simulated(sim.spec, down)  # a new supervisor, 5.5 s later: its first look is at Configure
    restarted.feed(Changed(T0 + 7.5))
    assert restarted.fired == [T0 + 5, T0 + 6, T0 + 7]  # inside the 3 s window: fired once, late
    assert restarted.state.skipped == 2  # T0+3 and T0+4: older than the window, counted
    restarted.run_until(T0 + 9.5)
    assert restarted.fired == [T0 + 5, T0 + 6, T0 + 7, T0 + 8, T0 + 9]  # none twice


def test_a_stale_wakeup_changes_nothing_and_an_earlier_timer_is_kept() -> None:
    timer = ScheduleTimer()
    assert timer.step(Looked(T0, T0 + 60)) == [Arm(T0 + 60, 60 + LATE_S)]
    assert timer.step(Looked(T0 + 1, T0 + 90)) == []  # the one for T0+60 still pending
    assert timer.step(Looked(T0 + 2, T0 + 30)) == [Arm(T0 + 30, 28 + LATE_S)]  # earlier: armed
    assert timer.step(Woken(T0 + 60, T0 + 60)) == []  # replaced: stale
    assert timer.step(Woken(T0 + 30, T0 + 30)) == [Look(T0 + 30)]
    assert timer.armed is None


def test_a_store_that_takes_no_writes_is_looked_at_again_after_a_probe() -> None:
    timer = ScheduleTimer()
    assert timer.step(Changed(T0, writable=False)) == [Arm(T0 + PROBE_S, PROBE_S + LATE_S)]
    assert timer.step(Woken(T0 + PROBE_S, T0 + PROBE_S)) == [Look(T0 + PROBE_S)]
    assert timer.step(LookFailed(T0 + PROBE_S)) == [Arm(T0 + 2 * PROBE_S, PROBE_S + LATE_S)]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["looked", "woken", "changed", "failed"]),
                          st.floats(0, 1e6), st.one_of(st.none(), st.floats(-1e9, 1e12))), max_size=30))
def test_at_most_one_timer_is_armed_and_never_for_a_negative_or_overlong_delay(events) -> None:
    timer, now = ScheduleTimer(), T0
    for kind, later, at in events:
        now += later
        event = {"looked": Looked(now, at), "woken": Woken(timer.armed or now, now), "changed": Changed(now),
                 "failed": LookFailed(now)}[kind]
        for command in timer.step(event):
            if isinstance(command, Arm):
                assert command.at == timer.armed and 0 < command.delay_s <= MAX_TIMER_S + LATE_S  # the policy cap, simulated clock
