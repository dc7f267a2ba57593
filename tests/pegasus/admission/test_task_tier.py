"""A task's own model tier (``submit --tier``, issue 31): refused at the door when the system has no such tier,
kept with the task (its context, its TASK_CREATED row, a retry, its idempotency claim), every model stage of
the task asked of that tier's model, and its calls counted on that tier's rate budget."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from pegasus import requests as r
from pegasus.admission import Admission
from pegasus.cognitive.stages import ProcessorSets, run_stage
from pegasus.config import HttpSettings, Settings
from pegasus.errors import InvalidRequest
from pegasus.gateway.app import build_app
from pegasus.idempotency import submit_claim
from pegasus.pool.commands import Arm
from pegasus.pool.inputs import BudgetDue
from pegasus.store import Store
from pegasus.submission import check_tier
from pegasus.task import TaskFSM
from pegasus.task.models import TaskContext
from pegasus.tools.builtin import default_registry
from pegasus.views import stored_view
from tests.pegasus.gateway.test_gateway import Recorder, Tokens
from tests.support.fake_openai import FakeOpenAI, completion
from tests.support.pool_core import Pool, Spec, dispatched, of

TIERS = {"provider": "openai", "model": "mid", "api_key_env": "", "max_retries": 0,
         "tiers": {"fast": {"model": "small", "rpm": 1}, "powerful": {"model": "big"}},
         "stages": {"perceive": "fast"}}


def test_an_unknown_tier_is_refused_naming_the_tiers_and_a_known_one_overrides_every_stage() -> None:
    llm = Settings().with_overrides({"llm": TIERS}).llm
    with pytest.raises(ValueError, match=r"unknown tier 'huge'; the tiers are default, fast, powerful"):
        check_tier("huge", llm)
    for known in (None, "default", "fast", "powerful"):
        check_tier(known, llm)
    assert [llm.tier_of(stage, "powerful") for stage in ("perceive", "think", "plan")] == ["powerful"] * 3
    assert [llm.tier_of(stage) for stage in ("perceive", "think")] == ["fast", "default"]  # no task tier: as before
    with pytest.raises(InvalidRequest, match="tier"):  # not a name at all: refused before anything is sent
        r.Submit(text="hi", tier="a b")


def make(store: Any = None) -> Admission:
    ids = itertools.count(1)
    settings = Settings().with_overrides({"llm": TIERS, "retry": {"max_attempts": 2, "backoff_s": 0.0}})
    return Admission(settings, clock=lambda: 100.0, id_factory=lambda: f"t{next(ids)}", store=store)


def fail(admission: Admission, task_id: str) -> None:
    record = admission.get(task_id)
    fsm = TaskFSM.restore(record.snapshot)
    fsm.transition("TASK_CREATED")
    fsm.transition("TASK_FAILED", error="boom")
    admission.on_stopped(task_id, record.run, fsm.state, fsm.snapshot(), "exception")


def test_the_tier_stays_with_its_task_through_a_retry_and_shows_in_its_views(tmp_path: Path) -> None:
    store = Store(tmp_path / "p.db")
    admission = make(store)
    admission.submit("a", "classic", 5, {}, "cli", tier="powerful")
    admission.submit("b", "classic", 5, {}, "cli")
    assert admission.get("t1").snapshot.context.tier == "powerful" and admission.get("t1").view()["tier"] == "powerful"
    assert admission.get("t2").view()["tier"] is None
    fail(admission, "t1")
    admission.retry("t1")
    admission.wake("t1")
    assert admission.get("t1").snapshot.context.tier == "powerful"  # a fresh run, on the same tier
    # Read back from the store alone (a finished task, or with no system running): its TASK_CREATED row.
    assert stored_view("t1", store.task_row("t1"), store.transitions("t1"))["tier"] == "powerful"
    assert stored_view("t2", store.task_row("t2"), store.transitions("t2"))["tier"] is None


def test_a_key_used_again_with_another_tier_is_a_conflict_and_claims_without_a_tier_are_unchanged() -> None:
    plain = submit_claim("k", "a", "classic", 5, {})
    assert submit_claim("k", "a", "classic", 5, {}, tier=None) == plain  # keys stored before tiers still match
    assert submit_claim("k", "a", "classic", 5, {}, tier="fast").fingerprint != plain.fingerprint


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with FakeOpenAI() as default, FakeOpenAI() as strong:
        yield default, strong


def test_every_model_stage_of_a_task_on_a_tier_asks_that_tiers_model(servers: Any) -> None:
    default, strong = servers
    settings = Settings().with_overrides({"llm": {**TIERS, "base_url": default.url, "tiers": {
        "fast": {"model": "small"}, "powerful": {"model": "big", "base_url": strong.url}}}})
    sets = ProcessorSets(settings, default_registry())
    strong.script(completion({"task_type": "math"}), completion({"need_more_info": False, "approach": "x"}))
    default.script(completion({"task_type": "math"}))
    context = TaskContext(input_text="what is 6*7?", tier="powerful")
    perceive = run_stage(sets.of("powerful", "perceive"), "perceive", context, machine="classic")
    run_stage(sets.of("powerful", "think"), "think", context, machine="classic")
    run_stage(sets.of(None, "perceive"), "perceive", TaskContext(input_text="hi"), machine="classic")
    assert [body["model"] for body in strong.requests] == ["big", "big"]  # perceive too, whose own tier is fast
    assert [body["model"] for body in default.requests] == ["small"]  # a task without a tier: as configured
    assert perceive.usage is not None and perceive.usage["tier"] == "powerful"
    assert sets.of("powerful", "act") is sets.of(None, "act")  # a stage asking no model: one set


def test_the_pool_counts_a_task_tiers_calls_on_that_tiers_budget() -> None:
    pool = Pool(Spec(size=2, settings=Settings().with_overrides({"llm": TIERS})))
    assert dispatched(pool.ask("a", stage="think", tier="fast")) == [("a", "w1", 1)]
    out = pool.ask("b", stage="think", tier="fast")  # fast: one request a minute, whatever the stage
    assert dispatched(out) == [] and of(Arm, out) == [Arm(60.0, BudgetDue())]
    assert dispatched(pool.ask("c", stage="think")) == [("c", "w2", 2)]  # its own tier (default) has room


def test_the_http_body_carries_the_tier_into_the_submit_request() -> None:
    table, backend = Tokens(), Recorder()
    auth = {"Authorization": f"Bearer {table.add('admin')}"}
    with TestClient(build_app(backend, table.rows.get, HttpSettings())) as client:
        assert client.post("/v1/tasks", json={"text": "hi", "tier": "fast"}, headers=auth).status_code == 201
        refused = client.post("/v1/tasks", json={"text": "hi", "tier": "no such"}, headers=auth)
    assert backend.calls == [r.Submit(text="hi", tier="fast", source="http")]
    assert refused.status_code == 400 and "tier" in refused.json()["error"]["message"]
