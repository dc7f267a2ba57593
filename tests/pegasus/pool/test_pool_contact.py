"""A leader's pool pings its idle workers on members: round trips and last contact (pegasus/pool/contact.py),
and a member's worker that stops hearing from its pool knows it is an orphan."""

from __future__ import annotations

from typing import Any

import pytest

from pegasus.config import ConventionSettings, Settings
from pegasus.pool.commands import Arm, Ping, SendStats
from pegasus.pool.contact import Contact, PoolWatch, merged, orphan_after_s, ping_period_s
from pegasus.pool.inputs import MemberChanged, PingDue, Pong, Reported, StatsAsked
from pegasus.views import members_view
from tests.support.pool_core import Pool, Spec, of

MEMBER = "10.0.0.2:19190"


def leader(size: int = 1) -> Pool:
    settings = Settings().with_overrides({"convention": {"lead": True, "reregistration_period_s": 2.0}})
    return Pool(Spec(settings=settings, size=size))


def member_row(pool: Pool, name: str = MEMBER) -> dict[str, Any]:
    [answer] = of(SendStats, pool.step(StatsAsked(1, "asker")))
    return next(m for m in answer.figures["members"] if m["name"] == name)


def test_a_leader_pings_only_the_idle_ready_workers_on_members_and_times_their_answers() -> None:
    pool = leader(size=1)
    [arm] = [a for a in of(Arm, pool.started) if isinstance(a.timer, PingDue)]
    assert arm.delay_s == 2.0  # the pace of Thespian's own check-ins
    pool.step(MemberChanged(True, "admin-b", {"pegasus.member": MEMBER, "pegasus.llm_workers": 2}))
    # Ready: pinged at once (its check for a dead pool is armed even if it is busy at every PingDue); w3 never
    # reported; the local one is never pinged.
    assert of(Ping, pool.step(Reported(1, 901, "host-b", "w2"))) == [Ping("w2", 100.0)]
    assert of(Ping, pool.step(Reported(0, 900, "host", "w1"))) == []
    out = pool.step(PingDue())
    assert of(Ping, out) == [Ping("w2", 100.0)]
    assert [a.timer for a in of(Arm, out)] == [PingDue()]  # armed again
    pool.clock.now += 0.004
    pool.step(Pong("w2", 100.0))
    contact = member_row(pool)["contact"]
    assert contact["rtt_ms"] == pytest.approx(4.0) and contact["answers"] == 1 and contact["pings"] == 2
    assert contact["last_contact"] == 1_700_000_000.0
    pool.ask("a")
    pool.ask("b")  # both workers busy: none is pinged (its answer would time the stage)
    assert of(Ping, pool.step(PingDue())) == []


def test_a_pong_from_an_unknown_address_is_ignored_and_the_local_admin_has_no_contact() -> None:
    pool = leader()
    assert pool.step(Pong("nobody", 1.0)) == []
    assert member_row(pool, "leader:19000")["contact"] is None


def test_round_trips_keep_last_average_min_max_and_several_pools_merge() -> None:
    contact = Contact()
    for rtt, wall in ((0.002, 10.0), (0.010, 11.0), (0.004, 12.0)):
        contact.sent()
        contact.answered(rtt, wall)
    view = contact.view()
    assert (view["rtt_ms"], view["rtt_min_ms"], view["rtt_max_ms"]) == (4.0, 2.0, 10.0)
    assert view["rtt_avg_ms"] == pytest.approx(((2 * 0.8 + 10 * 0.2) * 0.8 + 4 * 0.2))
    other = Contact()
    other.answered(0.001, 13.0)
    both = merged([view, other.view()])
    assert (both["rtt_min_ms"], both["rtt_max_ms"], both["last_contact"], both["answers"]) == (1.0, 10.0, 13.0, 4)
    rows = members_view({"llm": {"members": [{"name": MEMBER, "address": "x", "local": False, "capabilities": {},
                                              "joined": 1.0, "workers": 1, "contact": view}]},
                         "tool": {"members": [{"name": MEMBER, "address": "x", "local": False, "capabilities": {},
                                               "joined": 1.0, "workers": 0, "contact": other.view()}]}})
    assert rows[0]["contact"]["last_contact"] == 13.0 and rows[0]["workers"] == {"llm": 1, "tool": 0}


def test_a_member_worker_unpinged_while_idle_for_a_few_detection_times_is_an_orphan() -> None:
    convention = ConventionSettings(reregistration_period_s=3.0, registration_miss_max=2)
    after = orphan_after_s(convention)
    assert after == 27.0 and ping_period_s(convention) == 3.0
    watch = PoolWatch(after)
    assert not watch.orphaned(1000.0, idle=True)  # never pinged: a local worker, dies with its pool
    assert watch.pinged(0.0) and not watch.pinged(1.0)  # the first ping arms the check, once
    assert not watch.orphaned(27.0, idle=True) and watch.orphaned(28.1, idle=True)
    assert not watch.orphaned(100.0, idle=False)  # busy in a long stage: not silence
    watch.touch(100.0)  # the stage ended
    assert not watch.orphaned(110.0, idle=True)
    assert watch.check_period_s == 9.0
