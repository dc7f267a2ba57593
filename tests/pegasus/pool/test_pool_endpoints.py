"""Requests per endpoint (pegasus.pool.endpoints, issue 29): the llm pool sends a base_url at most its
limit at once and the rest wait in its queue, where no stage deadline runs.  Without an actor system."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from pegasus.config import Settings
from pegasus.pool.commands import Dispatch, Fail
from pegasus.pool.inputs import DeadlineDue
from tests.support.pool_core import Pool, Spec, dispatched, of

URL = "http://127.0.0.1:8000/v1"
SHAPE = {"structured": "json_object_schema", "tools": "native", "token_param": "max_tokens", "temperature": True,
         "reasoning_effort": False, "stream": False}
SERIAL = ((json.dumps([URL, "m", {}]), {**SHAPE, "serial": True}),)  # a worker saw the server cut a stream


def model_pool(size: int = 3, **llm: Any) -> Pool:
    config = Settings().with_overrides({"llm": {"provider": "openai", "base_url": URL, "model": "m", **llm}})
    return Pool(Spec(size=size, settings=config, timeout_s=120.0))


def running(pool: Pool) -> int:
    return len(pool.core.jobs)


def test_a_server_seen_decoding_one_at_a_time_is_sent_one_request_at_a_time() -> None:
    """Measured on SmolLM2 through llama-cpp-python: three llm workers queued on a server that decodes one
    request at a time, and stages overran their 120 s waiting behind other tasks' generations."""
    pool = model_pool()
    pool.ask("a")
    for task in "bcde":
        pool.ask(task)
    assert running(pool) == 3  # no limit yet: a worker each
    out = pool.finish(1, known=SERIAL)  # a's worker saw its stream cut: the server is serial
    assert dispatched(out) == [] and running(pool) == 2  # the two already sent finish first
    assert dispatched(pool.finish(2)) == []
    assert [t for t, _, _ in dispatched(pool.finish(3))] == ["d"] and running(pool) == 1
    assert [task for task, _, _ in dispatched(pool.finish(4))] == ["e"] and running(pool) == 1


def test_a_request_waiting_for_its_endpoint_has_no_deadline_running() -> None:
    """Its deadline starts when it leaves the pool's queue: asked 200 s ago, 100 s of them behind another
    task's stage, it still has 20 s of its 120."""
    pool = model_pool(max_concurrent=1)
    pool.ask("a")
    assert dispatched(pool.ask("b")) == []
    pool.clock.now += 100.0
    assert [t for t, _, _ in dispatched(pool.finish(1))] == ["b"]
    pool.clock.now += 100.0
    assert of(Fail, pool.step(DeadlineDue())) == []
    pool.clock.now += 21.0
    assert [f.error for f in of(Fail, pool.step(DeadlineDue()))] == ["think overran its 120s deadline"]


def test_max_concurrent_holds_an_endpoint_to_that_many() -> None:
    pool = model_pool(size=3, max_concurrent=2)
    assert len(dispatched(pool.ask("a") + pool.ask("b") + pool.ask("c") + pool.ask("d"))) == 2
    assert [t for t, _, _ in dispatched(pool.finish(1))] == ["c"]
    assert running(pool) == 2


def test_a_set_limit_wins_over_what_was_learnt() -> None:
    """max_concurrent = 2 on a server seen cutting streams: the user's figure (auto is 0)."""
    pool = model_pool(size=3, max_concurrent=2)
    pool.ask("a")
    pool.finish(1, known=SERIAL)
    assert len(dispatched(pool.ask("b") + pool.ask("c") + pool.ask("d"))) == 2


def test_a_tier_on_another_endpoint_is_not_held_by_the_first() -> None:
    pool = model_pool(size=3, max_concurrent=1, tiers={"fast": {"model": "f", "base_url": "http://127.0.0.1:9000/v1",
                                                                 "max_concurrent": 2}},
                      stages={"perceive": "fast"})
    assert len(dispatched(pool.ask("a") + pool.ask("b"))) == 1  # think: the default tier, one at a time
    assert [t for t, _, _ in dispatched(pool.ask("c", stage="perceive") + pool.ask("d", stage="perceive"))] == ["c", "d"]
    assert dispatched(pool.ask("e", stage="perceive")) == []  # the fast endpoint holds two


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 3), st.lists(st.booleans(), min_size=1, max_size=40))
def test_an_endpoint_never_holds_more_than_its_limit_and_every_request_runs(limit: int, moves: list[bool]) -> None:
    """Asks (True) and finishes (False) in any order: never more than ``limit`` sent at once, a worker
    idle only when nothing may be sent, and once all finish every request has run."""
    pool = model_pool(size=4, max_concurrent=limit)
    asked = ran = 0
    for ask in moves:
        if ask or not pool.core.jobs:
            asked += 1
            ran += len(of(Dispatch, pool.ask(f"t{asked}")))
        else:
            ran += len(of(Dispatch, pool.finish(min(pool.core.jobs))))
        assert running(pool) <= limit
        assert running(pool) == min(limit, asked - (ran - running(pool)))
    while pool.core.jobs:
        ran += len(of(Dispatch, pool.finish(min(pool.core.jobs))))
    assert ran == asked
