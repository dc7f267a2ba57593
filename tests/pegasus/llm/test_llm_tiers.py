"""Model per stage (``[llm.tiers]``, ``[llm.stages]``) and cost (``[llm.prices]``): the settings, the
processors against two local model servers, each tier's rate budget in the pool, the cost arithmetic."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pegasus import config
from pegasus.cognitive.stages import processors_for, run_stage
from pegasus.config import ModelPrice, Settings
from pegasus.errors import ConfigError
from pegasus.llm.budget import LlmBudget
from pegasus.llm.cost import call_cost, cost_text, usage_sum
from pegasus.llm.usage import UsageMeter
from pegasus.pool.commands import Arm
from pegasus.pool.inputs import BudgetDue
from pegasus.task.models import TaskContext
from pegasus.views import usage_total, usage_view
from tests.support.fake_openai import FakeOpenAI, completion, http_error
from tests.support.pool_core import Pool, Spec, dispatched, of

TIERED = """
[llm]
provider = "openai"
model = "mid"
api_key_env = ""
rpm = 0
[llm.tiers.fast]
model = "small"
rpm = 1
[llm.tiers.powerful]
model = "big"
base_url = "http://127.0.0.1:9/v1"
context_window = 64000
price = {input = 5.0, output = 15.0}
[llm.stages]
perceive = "fast"
reflect = "fast"
plan = "powerful"
[llm.prices.small]
input = 0.15
cached_input = 0.075
output = 0.6
"""


# -- settings ------------------------------------------------------------------------------------


def test_tiers_map_stages_to_models_and_inherit_the_rest_of_llm() -> None:
    llm = config.parse(TIERED).llm
    assert [llm.tier_of(s) for s in ("perceive", "think", "plan", "reflect", "reason")] == [
        "fast", "default", "powerful", "fast", "default"]
    fast, powerful = llm.tier("fast"), llm.tier("powerful")
    assert (fast.model, fast.rpm, fast.base_url, fast.api_key_env) == ("small", 1, "", "")
    assert (powerful.model, powerful.base_url, powerful.context_window) == ("big", "http://127.0.0.1:9/v1", 64000)
    assert llm.tier("default") is llm
    assert llm.price("fast") == ModelPrice(input=0.15, cached_input=0.075, output=0.6)
    assert llm.price("powerful") == ModelPrice(input=5.0, output=15.0)  # its own price
    assert llm.price("default") is None  # "mid" has no price: no cost


def test_the_tier_example_in_docs_llm_md_is_a_valid_configuration() -> None:
    text = (Path(__file__).resolve().parents[3] / "docs" / "llm.md").read_text(encoding="utf-8")
    example = text.split("**Model per stage (tiers).**")[1].split("```toml")[1].split("```")[0]
    llm = config.parse(example).llm
    assert [llm.tier(llm.tier_of(s)).model for s in ("perceive", "think", "reflect")] == [
        "gpt-4o-mini", "gpt-4o", "llama3.1"]
    assert llm.price("fast") is not None and llm.price("local") is None


def test_existing_configs_run_every_stage_on_the_one_model() -> None:
    llm = config.parse('[llm]\nprovider = "openai"\nmodel = "m"').llm
    assert {llm.tier_of(s) for s in ("perceive", "think", "plan", "reflect", "reason")} == {"default"}
    assert llm.tier("default") is llm and (llm.tiers, llm.stages, llm.prices) == ({}, {}, {})


@pytest.mark.parametrize("text,error", [
    ('[llm.stages]\nplan = "huge"', r"llm: .*stages\.plan: unknown tier 'huge'; the tiers are default"),
    ('[llm.tiers.fast]\nmodel = "s"\n[llm.stages]\nplan = "fats"', r"unknown tier 'fats'; the tiers are default, fast"),
    ('[llm.stages]\nact = "default"', r"stages: 'act' is not a model stage"),
    ('[llm.tiers.default]\nmodel = "s"', r"'default' is \[llm\] itself"),
    ('[llm.tiers.fast]\nrpm = 1', r"llm\.tiers\.fast\.model"),
    ('[llm.prices.m]\ninput = -1\noutput = 1', r"llm\.prices\.m\.input"),
])
def test_a_stage_naming_an_unknown_tier_is_a_clear_config_error(text: str, error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        config.parse(text)


# -- cost arithmetic -----------------------------------------------------------------------------


def test_a_call_costs_its_tokens_at_the_models_prices() -> None:
    """1,000 prompt tokens of which 200 cached, 500 output, at 2.50 / 1.25 / 10.00 USD per million:
    800 * 2.5 + 200 * 1.25 + 500 * 10 = 7,250 millionths of a dollar."""
    usage = {"prompt_tokens": 1000, "cached_tokens": 200, "completion_tokens": 500, "total_tokens": 1500}
    price = ModelPrice(input=2.5, cached_input=1.25, output=10.0)
    assert call_cost(usage, price) == 0.00725
    assert call_cost(usage, ModelPrice(input=2.5, output=10.0)) == 0.0075  # no cached price: charged as input
    assert call_cost(usage, None) is None  # no price: no cost, not zero
    assert call_cost({"prompt_tokens": 10, "cached_tokens": 99}, price) == round(10 * 1.25 / 1e6, 8)  # cached <= prompt


def test_a_stage_and_a_task_sum_their_calls_cost_and_say_what_was_unpriced() -> None:
    meter = UsageMeter()
    meter.add({"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110, "cached_tokens": 40}, "m", 0.001)
    meter.add({"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55}, "m", 0.0005, "fast")
    stage = meter.as_dict()
    assert stage == {"prompt_tokens": 150, "completion_tokens": 15, "total_tokens": 165, "calls": 2, "model": "m",
                     "cached_tokens": 40, "cost_usd": 0.0015, "tier": "fast"}
    unpriced = UsageMeter()
    unpriced.add({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}, "x")
    assert "cost_usd" not in (unpriced.as_dict() or {})
    stages = [{"stage": "plan", "usage": stage}, {"stage": "act"}, {"stage": "reflect", "usage": unpriced.as_dict()}]
    total = usage_total(stages)
    assert total == {"prompt_tokens": 151, "completion_tokens": 16, "total_tokens": 167, "calls": 3,
                     "cached_tokens": 40, "cost_usd": 0.0015, "unpriced_calls": 1}
    assert cost_text(total) == "$0.001500 (+ 1 unpriced calls)"
    assert usage_total([{"stage": "reflect", "usage": unpriced.as_dict()}]) == {
        "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "calls": 1}  # no price anywhere: no cost
    assert cost_text(usage_sum([])) == ""


def test_the_system_total_sums_every_model() -> None:
    rows = [{"model": "big", "tier": "powerful", "calls": 2, "prompt_tokens": 10, "cached_tokens": 0,
             "completion_tokens": 4, "total_tokens": 14, "cost_usd": 0.25, "unpriced_calls": 0},
            {"model": "mid", "tier": "default", "calls": 1, "prompt_tokens": 5, "cached_tokens": 0,
             "completion_tokens": 1, "total_tokens": 6, "cost_usd": None, "unpriced_calls": 1}]
    view = usage_view(rows)
    assert {k: view[k] for k in ("calls", "total_tokens", "cost_usd", "unpriced_calls")} == {
        "calls": 3, "total_tokens": 20, "cost_usd": 0.25, "unpriced_calls": 1}
    assert "cost_usd" not in view["models"][1]


# -- the processors: each stage on its tier's server and model -------------------------------------


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with FakeOpenAI() as default, FakeOpenAI() as strong:
        yield default, strong


def tiered(default: FakeOpenAI, strong: FakeOpenAI) -> Settings:
    return Settings().with_overrides({"llm": {
        "provider": "openai", "base_url": default.url, "model": "mid", "api_key_env": "", "max_retries": 0,
        "tiers": {"fast": {"model": "small"}, "powerful": {"model": "big", "base_url": strong.url}},
        "stages": {"perceive": "fast", "plan": "powerful"},
        "prices": {"small": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
                   "big": {"input": 5.0, "output": 15.0}}}})


def test_each_stage_asks_its_tiers_model_and_reports_tier_tokens_and_cost(servers: Any) -> None:
    default, strong = servers
    processors = processors_for(tiered(default, strong))
    context = TaskContext(input_text="what is 6*7?")
    default.script(completion({"task_type": "math"}, prompt_tokens=1000, completion_tokens=100, cached_tokens=400),
                   completion({"need_more_info": False, "approach": "multiply"}, prompt_tokens=20, completion_tokens=5))
    strong.script(completion({"goal": "g", "steps": [{"action_type": "respond", "text": "42"}]},
                             prompt_tokens=2000, completion_tokens=300))
    perceive = run_stage(processors, "perceive", context, machine="classic")
    think = run_stage(processors, "think", context, machine="classic")
    plan = run_stage(processors, "plan", context, machine="classic")
    assert [body["model"] for body in default.requests] == ["small", "mid"]
    assert [body["model"] for body in strong.requests] == ["big"]
    # 600 * 0.15 + 400 * 0.075 + 100 * 0.6 = 180 millionths; 2000 * 5 + 300 * 15 = 14,500 millionths.
    assert perceive.usage == {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100, "calls": 1,
                              "model": "small", "cached_tokens": 400, "cost_usd": 0.00018, "tier": "fast"}
    assert think.usage == {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25, "calls": 1,
                           "model": "mid"}  # the default tier's model has no price: no cost, not zero
    assert plan.usage is not None and (plan.usage["cost_usd"], plan.usage["tier"]) == (0.0145, "powerful")
    assert usage_total([{"usage": u} for u in (perceive.usage, think.usage, plan.usage)])["cost_usd"] == 0.01468


# -- each tier's rate budget in the llm pool ---------------------------------------------------------


def test_each_tier_has_its_own_budget_and_a_429_pauses_only_its_tier() -> None:
    clock = [0.0]
    settings = Settings().with_overrides({"llm": {"provider": "openai", "model": "mid", "rpm": 0,
                                                  "tiers": {"fast": {"model": "small", "rpm": 1}},
                                                  "stages": {"perceive": "fast"}}})
    budget = LlmBudget.for_pool("llm", settings, lambda: clock[0])
    assert budget is not None
    assert budget.admit(TaskContext(), 1, "perceive") == 0.0
    assert budget.admit(TaskContext(), 2, "perceive") == 60.0  # the fast tier's one request a minute
    assert budget.admit(TaskContext(), 2, "think") == 0.0  # the default tier is not held by it
    assert budget.settle(2, {"retry_after_s": 5.0}, requeues=0) is True  # the default tier got a 429
    assert budget.admit(TaskContext(), 3, "think") == 5.0
    assert budget.admit(TaskContext(), 3, "perceive") == 60.0  # the fast tier: only its own budget
    clock[0] = 61.0
    assert budget.admit(TaskContext(), 3, "perceive") == 0.0


def test_the_pool_passes_a_tier_with_room_over_one_that_waits_and_keeps_each_tiers_order() -> None:
    settings = Settings().with_overrides({"llm": {"provider": "openai", "model": "mid",
                                                  "tiers": {"fast": {"model": "small", "rpm": 1}},
                                                  "stages": {"perceive": "fast"}}})
    pool = Pool(Spec(size=2, settings=settings))
    assert dispatched(pool.ask("a", stage="perceive")) == [("a", "w1", 1)]
    out = pool.ask("b", stage="perceive") + pool.ask("c", stage="perceive")
    assert dispatched(out) == [] and of(Arm, out) == [Arm(60.0, BudgetDue())]  # fast: one a minute
    assert dispatched(pool.ask("d", stage="think")) == [("d", "w2", 2)]  # the default tier does not wait
    pool.finish(1, usage={"total_tokens": 9})
    pool.finish(2, usage={"total_tokens": 9})
    out = pool.fire(out, BudgetDue)
    assert dispatched(out) == [("b", "w1", 3)]  # fast's order kept: b before c


def test_the_budget_estimate_of_a_call_is_at_most_its_tiers_window() -> None:
    huge = TaskContext(input_text="x" * 400_000)
    unbounded = LlmBudget.for_pool("llm", Settings().with_overrides(
        {"llm": {"provider": "openai", "model": "m", "tpm": 10_000}}))
    bounded = LlmBudget.for_pool("llm", Settings().with_overrides(
        {"llm": {"provider": "openai", "model": "m", "tpm": 10_000, "context_window": 8000}}))
    assert unbounded is not None and bounded is not None
    unbounded.admit(huge, 1)
    bounded.admit(huge, 1)
    assert unbounded.limiter.used(0.0)[1] > 100_000 and bounded.limiter.used(0.0)[1] == 8000


def test_a_tiered_server_error_names_the_tiers_endpoint(servers: Any) -> None:
    default, strong = servers
    strong.script(http_error(400, "model 'big' not found"))
    with pytest.raises(Exception, match="model 'big' not found"):
        run_stage(processors_for(tiered(default, strong)), "plan", TaskContext(input_text="x"), machine="classic")
    assert default.requests == []


def test_the_store_keeps_every_stages_usage_per_model_and_tier_for_stats(tmp_path: Path) -> None:
    """A stage's usage commits with its transition; priced stages add cost, unpriced ones count as such."""
    from pegasus.store import Store

    store = Store(tmp_path / "p.db")
    priced = {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100, "calls": 1, "model": "small",
              "cached_tokens": 400, "cost_usd": 0.00018, "tier": "fast"}
    unpriced = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18, "calls": 2, "model": "mid"}
    for usage in (priced, priced, unpriced, None):
        detail = {"stage": "perceive", "ok": True, **({"usage": usage} if usage else {})}
        store.cognitive_transition("t1", 1, "classic", "idle", "perceiving", "X", detail, None, None)
    rows = {row["tier"]: row for row in store.usage_totals()}
    assert rows["fast"] == {"model": "small", "tier": "fast", "calls": 2, "prompt_tokens": 2000, "cached_tokens": 800,
                            "completion_tokens": 200, "total_tokens": 2200, "cost_usd": 0.00036, "unpriced_calls": 0,
                            "estimated_calls": 0}
    assert (rows["default"]["calls"], rows["default"]["cost_usd"], rows["default"]["unpriced_calls"]) == (2, None, 2)
    total = usage_view(store.usage_totals())
    assert (total["calls"], total["cost_usd"], total["unpriced_calls"]) == (4, 0.00036, 2)
    store.close()


def test_usage_the_server_did_not_report_stays_estimated_in_stats_with_its_cost_unknown(tmp_path: Path) -> None:
    """llama-cpp-python streams no usage: the store's totals keep the "estimated" mark into stats, and a
    cost is never shown as 0 for calls whose tokens are a guess (issue 29)."""
    from pegasus.store import Store

    store = Store(tmp_path / "p.db")
    guessed = {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320, "calls": 2, "model": "smollm2",
               "estimated_calls": 2}
    for _ in range(2):
        store.cognitive_transition("t1", 1, "classic", "idle", "perceiving", "X", {"stage": "think", "usage": guessed},
                                   None, None)
    total = usage_view(store.usage_totals())
    assert total["estimated_calls"] == 4 and total["models"][0]["estimated_calls"] == 4
    assert "cost_usd" not in total and "cost_usd" not in total["models"][0]
    store.close()
