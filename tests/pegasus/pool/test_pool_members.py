"""The stage pool's core without an actor system: convention members, placement, starvation, hung workers, exit."""

from __future__ import annotations

from typing import Any

from pegasus.config import Settings
from pegasus.levels import Level
from pegasus.pool.commands import Arm, EndWorker, Fail, Inspect, Log, SendStats, StartWorker, Watch
from pegasus.pool.inputs import (
    Closing, DeadlineDue, Exited, HealthDue, Looked, MemberChanged, PlacementDue, Reported, RespawnDue, StarveDue,
    StatsAsked,
)
from pegasus.pool.placement import MAX_WORKERS_PER_MEMBER, placement
from tests.support.pool_core import ME, Pool, Spec, dispatched, of

MEMBER = "10.0.0.2:19190"


def leader(local_workers: bool = True, **spec: Any) -> Pool:
    settings = Settings().with_overrides({"convention": {"lead": True, "local_workers": local_workers,
                                                         "placement_timeout_s": 20.0}})
    return Pool(Spec(settings=settings, **{"size": 1, **spec}))


def caps(name: str | None = MEMBER, workers: Any = 2) -> dict[str, Any]:
    found = {"pegasus.llm_workers": workers, "pegasus.home": "/srv/pegasus", "Admin Port": 19190, "zone": "a"}
    return found if name is None else {**found, "pegasus.member": name}


def figures(pool: Pool) -> dict[str, Any]:
    [answer] = of(SendStats, pool.step(StatsAsked(1, "asker")))
    return answer.figures


def test_a_leader_watches_the_convention_and_places_a_members_workers_by_name() -> None:
    pool = leader()
    assert of(Watch, pool.started) == [Watch(True)]
    out = pool.step(MemberChanged(True, "admin-b", caps()))
    starts = of(StartWorker, out)
    assert [(s.index, s.requirements) for s in starts] == [(1, placement(MEMBER, "llm")), (2, placement(MEMBER, "llm"))]
    assert {str(s.settings.state.home) for s in starts} == {"/srv/pegasus"}  # they log on the member's disk
    assert [a.timer for a in of(Arm, out)] == [PlacementDue(1, 2), PlacementDue(2, 3)]
    assert [w["ready"] for w in figures(pool)["workers"]] == [True, False, False]  # usable once they report
    pool.ask("a")
    out = pool.ask("b")  # the local worker is busy; the placed ones have not reported
    assert dispatched(out) == []
    out = pool.step(Reported(1, 900, "host-b", "w2"))
    assert [log.event for log in of(Log, out)] == ["worker_placed"] and dispatched(out) == [("b", "w2", 2)]
    [local, remote] = figures(pool)["members"]
    assert (local["name"], local["local"], remote["name"], remote["wanted"], remote["workers"]) == (
        ME, True, MEMBER, 2, 2)
    assert remote["capabilities"] == {"pegasus.llm_workers": 2, "pegasus.home": "/srv/pegasus",
                                      "pegasus.member": MEMBER}


def test_a_report_from_another_address_or_slot_is_ignored() -> None:
    pool = leader()
    pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    assert pool.step(Reported(1, 900, "host-b", "someone-else")) == []
    assert pool.step(Reported(7, 900, "host-b", "w2")) == []


def tool_caps(workers: int = 1) -> dict[str, Any]:
    return {**caps(workers=0), "pegasus.tool_workers": workers}


def test_a_member_that_leaves_takes_its_workers_and_fails_their_running_tool_steps() -> None:
    pool = leader(local_workers=False, name="tool")
    pool.step(MemberChanged(True, "admin-b", tool_caps()))
    pool.step(Reported(0, 900, "host-b", "w1"))
    pool.ask("a", stage="act")
    out = pool.step(MemberChanged(False, "admin-b", tool_caps()))
    assert [(f.to, f.kind, f.error) for f in of(Fail, out)] == [
        ("requester-a", "worker_died", f"convention member {MEMBER} left the convention")]
    assert of(EndWorker, out) == [EndWorker("w1")]  # asked to exit, never killed: not our child
    assert of(StartWorker, out) == [] and figures(pool)["size"] == 0


def test_an_llm_stage_whose_member_is_lost_runs_again_on_another_member() -> None:
    """A partition or a dead machine is no fault of the stage (issue 23): it goes back to the queue,
    first in line, and runs on the next worker placed; never failed, never lost."""
    pool = leader(local_workers=False)
    pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    pool.step(Reported(0, 900, "host-b", "w1"))
    assert dispatched(pool.ask("a")) == [("a", "w1", 1)]
    out = pool.step(MemberChanged(False, "admin-b", caps()))
    assert of(Fail, out) == [] and of(EndWorker, out) == [EndWorker("w1")]
    assert figures(pool)["queued"] == 1
    out = pool.step(MemberChanged(True, "admin-c", caps(name="10.0.0.3:19190", workers=1)))
    assert dispatched(pool.step(Reported(1, 901, "host-c", "w2"))) == [("a", "w2", 2)]


def test_an_llm_stage_whose_member_worker_dies_runs_again_a_bounded_number_of_times() -> None:
    """A member's worker reported dead (its member lost, often before the membership update) reruns its
    llm stage MEMBER_RERUNS times; then the stage fails, so a request that kills every worker ends."""
    from pegasus.pool.core import MEMBER_RERUNS

    pool = leader(local_workers=False)
    pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    address, pid = "w1", 900
    pool.step(Reported(0, pid, "host-b", address))
    pool.ask("a")
    for n in range(MEMBER_RERUNS + 1):
        out = pool.step(Exited(address))
        if any(isinstance(arm.timer, RespawnDue) for arm in of(Arm, out)):  # died again at once: after a pause
            out += pool.fire(out, RespawnDue)
        if n < MEMBER_RERUNS:
            assert of(Fail, out) == [], n
            address, pid = f"w{n + 2}", pid + 1
            assert dispatched(pool.step(Reported(0, pid, "host-b", address))) == [("a", address, n + 2)]
    assert [(f.to, f.kind) for f in of(Fail, out)] == [("requester-a", "worker_died")]


def test_a_local_llm_workers_death_still_fails_its_stage() -> None:
    pool = leader(size=1)
    pool.step(Reported(0, 4242, "host", "w1"))
    pool.ask("a")
    assert [f.to for f in of(Fail, pool.step(Exited("w1")))] == ["requester-a"]


def test_a_member_back_under_the_same_name_at_a_new_address_replaces_the_old_one() -> None:
    pool = leader()
    pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    assert pool.step(MemberChanged(True, "admin-b", caps(workers=1))) == []  # the same admin: nothing new
    out = pool.step(MemberChanged(True, "admin-b2", caps(workers=1)))
    assert [log.event for log in of(Log, out)] == ["member_left", "member_joined"]
    assert of(EndWorker, out) == [EndWorker("w2")] and len(of(StartWorker, out)) == 1


def test_admins_that_are_not_pegasus_members_or_offer_too_much_are_bounded() -> None:
    pool = leader()
    for bad in (caps(name=None), caps(name=ME)):
        [log] = pool.step(MemberChanged(True, "admin-x", bad))
        assert (log.level, log.event) == (Level.WARNING, "member_ignored")
    assert len(of(StartWorker, pool.step(MemberChanged(True, "admin-b", caps(workers="many"))))) == 0
    out = pool.step(MemberChanged(True, "admin-c", caps(name="10.0.0.3:1", workers=10_000)))
    assert len(of(StartWorker, out)) == MAX_WORKERS_PER_MEMBER


def test_a_member_is_heard_of_only_by_a_leader() -> None:
    pool = Pool(size=1)
    assert of(Watch, pool.started) == []
    assert pool.step(MemberChanged(True, "admin-b", caps())) == []


def test_a_worker_never_placed_is_dropped_and_counted_against_its_member() -> None:
    pool = leader(local_workers=False)
    out = pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    pool.ask("a")
    dropped = pool.fire(out, PlacementDue)
    assert of(EndWorker, dropped) == [EndWorker("w1")]
    assert figures(pool)["size"] == 0 and figures(pool)["members"][1]["failed_placements"] == 1
    assert [a.timer for a in of(Arm, dropped)] == [StarveDue(1)]  # no worker left: a waits one timeout at most
    assert pool.step(PlacementDue(0, 1)) == []  # stale: that slot is gone


def test_with_no_worker_at_all_a_request_fails_after_its_timeout_unless_one_comes() -> None:
    """Regression (a leader without workers): a starved stage fails after one timeout, never hangs."""
    pool = leader(local_workers=False)
    out = pool.ask("a")
    assert of(Arm, out) == [Arm(30.0, StarveDue(1))]
    [fail] = of(Fail, pool.fire(out, StarveDue))
    assert (fail.to, fail.kind, fail.error) == ("requester-a", "timeout", "no llm worker in the convention for 30s")

    out = pool.ask("b")
    joined = pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    assert pool.fire(out, StarveDue) == []  # a worker is being placed: b waits its turn
    assert dispatched(pool.step(Reported(0, 900, "host-b", "w1"))) == [("b", "w1", 1)]
    assert of(Arm, joined)


def test_a_remote_worker_past_its_deadline_is_asked_to_exit_never_killed() -> None:
    pool = leader(local_workers=False)
    pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    pool.step(Reported(0, 900, "host-b", "w1"))
    out = pool.fire(pool.ask("a"), DeadlineDue)
    assert of(EndWorker, out) == [EndWorker("w1")]  # kill_pid None: its pid means nothing here
    assert [s.requirements for s in of(StartWorker, out)] == [placement(MEMBER, "llm")]


def busy_local(name: str = "llm") -> tuple[Pool, list[Any]]:
    pool = Pool(Spec(name=name, size=1, prefetch=0))
    pool.step(Reported(0, 4242, "host", "w1"))
    return pool, pool.ask("a") + pool.ask("b")


def test_a_busy_local_worker_is_looked_at_and_one_stopped_twice_in_a_row_is_replaced() -> None:
    pool, out = busy_local()
    looks = pool.fire(out, HealthDue)
    assert looks == [Inspect((4242,))]
    assert [a.timer for a in of(Arm, pool.step(Looked({4242: "T"})))] == [HealthDue()]  # once: maybe a moment
    pool.step(HealthDue())
    assert of(EndWorker, pool.step(Looked({4242: "S"}))) == []  # running again: the count starts over
    pool.step(Looked({4242: "t"}))
    out = pool.step(Looked({4242: "T"}))
    assert [log.event for log in of(Log, out)][0] == "worker_hung"
    assert of(EndWorker, out) == [EndWorker("w1", kill_pid=4242)]
    assert of(Fail, out) == []  # an llm stage has no side effect: it runs again, first in line
    assert dispatched(out) == [("a", "w2", 2)]


def test_a_hung_tool_workers_running_step_fails_and_is_never_rerun() -> None:
    pool, out = busy_local("tool")
    pool.step(Looked({4242: "T"}))
    out = pool.step(Looked({4242: "T"}))
    assert [(f.to, f.kind) for f in of(Fail, out)] == [("requester-a", "worker_died")]
    assert dispatched(out) == [("b", "w2", 2)]


def test_health_looks_stop_when_no_local_worker_is_busy_and_one_timer_is_pending() -> None:
    pool, out = busy_local()
    assert len([a for a in of(Arm, out) if isinstance(a.timer, HealthDue)]) == 1
    pool.finish(1)
    pool.finish(2)
    assert pool.step(HealthDue()) == []  # idle: not armed again until a stage starts
    assert [a.timer for a in of(Arm, pool.ask("c")) if isinstance(a.timer, HealthDue)] == [HealthDue()]


def test_on_exit_every_worker_is_ended_a_busy_local_one_killed_and_none_replaced() -> None:
    pool = leader(size=2)
    pool.step(Reported(0, 4242, "host", "w1"))
    pool.step(MemberChanged(True, "admin-b", caps(workers=1)))
    pool.ask("a")
    out = pool.step(Closing())
    assert out == [Watch(False), EndWorker("w1", kill_pid=4242, shutdown=True), EndWorker("w2", shutdown=True),
                   EndWorker("w3", shutdown=True)]
    out = pool.step(Exited("w1"))
    assert of(StartWorker, out) == [] and [f.to for f in of(Fail, out)] == ["requester-a"]
    assert pool.step(HealthDue()) == []
