"""Model per stage, cost and the context budget through a real system: llm workers talk to two local
OpenAI-compatible servers (tests/support/fake_openai.py), ``pegasus status`` and ``pegasus stats`` run as
the real command line."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.client.errors import RequestError
from actors.runtime import procs
from pegasus.llm.context import SUMMARY_PREFIX
from tests.support.fake_openai import FakeOpenAI, Reply, completion, prompt_size, tool_call
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
NO_REFLECTOR = {"reflector": False}  # these tests count and order the model's calls: no post-task reflection among them

LLM_STAGES = {"perceive", "think", "plan", "reflect", "reason"}


@pytest.fixture
def servers() -> Iterator[tuple[FakeOpenAI, FakeOpenAI]]:
    with FakeOpenAI() as default, FakeOpenAI() as strong:
        yield default, strong


def cli(client: Any, state_dir: Path, *args: str, status: int = 0) -> str:
    """``pegasus ARGS --port N`` as a user runs it, against the test's system: its stdout, or its stderr when
    it is to fail (``status``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PEGASUS_")}
    env["PEGASUS_HOME"] = str(state_dir)
    done = subprocess.run(["pegasus", *args, "--port", str(client.spec.admin_port)], env=env, cwd=state_dir,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == status, done.stdout + done.stderr
    return done.stdout if status == 0 else done.stderr


def test_stages_run_on_their_tiers_models_and_cost_shows_per_stage_task_and_system(
        pegasus, servers: tuple[FakeOpenAI, FakeOpenAI], state_dir: Path) -> None:
    """perceive on "fast" (small, priced, a prompt-cache hit), plan on "powerful" (big, another server,
    priced), think and reflect on [llm] itself (mid, no price).  Each stage's cost, the task's (with its
    two unpriced calls said) and the system's appear in status and stats, text and --json."""
    default, strong = servers
    client = pegasus(memory=NO_REFLECTOR, llm={
        "provider": "openai", "base_url": default.url, "model": "mid", "api_key_env": "", "max_retries": 0,
        "tiers": {"fast": {"model": "small"}, "powerful": {"model": "big", "base_url": strong.url}},
        "stages": {"perceive": "fast", "plan": "powerful"},
        "prices": {"small": {"input": 0.15, "cached_input": 0.075, "output": 0.6},
                   "big": {"input": 5.0, "output": 15.0}}})
    default.script(
        completion({"task_type": "math"}, prompt_tokens=1000, completion_tokens=100, cached_tokens=400),
        completion({"need_more_info": False, "approach": "use arithmetic"}),
        completion({"verdict": "complete", "assessment": "computed"}))
    strong.script(completion(tool_calls=[tool_call("arithmetic", {"expression": "6 * 7"})],
                             prompt_tokens=2000, completion_tokens=300))
    task = client.wait(client.submit("what is six times seven?", machine="classic")["task_id"], timeout=60)
    assert (task["lifecycle_state"], task["result"]) == ("done", "6 * 7 = 42"), task.get("error")
    assert [body["model"] for body in default.requests] == ["small", "mid", "mid"]
    assert [body["model"] for body in strong.requests] == ["big"]

    used = {s["stage"]: s["usage"] for s in task["stages"] if s["stage"] in LLM_STAGES}
    # 600 * 0.15 + 400 * 0.075 + 100 * 0.6 = 180 millionths of a dollar; 2000 * 5 + 300 * 15 = 14,500.
    assert (used["perceive"]["tier"], used["perceive"]["cached_tokens"], used["perceive"]["cost_usd"]) == (
        "fast", 400, 0.00018)
    assert (used["plan"]["tier"], used["plan"]["model"], used["plan"]["cost_usd"]) == ("powerful", "big", 0.0145)
    assert "cost_usd" not in used["think"] and "tier" not in used["think"]  # no price: no cost, not zero
    assert (task["usage"]["cost_usd"], task["usage"]["unpriced_calls"], task["usage"]["calls"]) == (0.01468, 2, 4)

    status = json.loads(cli(client, state_dir, "status", task["task_id"], "--json"))
    assert status["usage"] == task["usage"]
    text = cli(client, state_dir, "status", task["task_id"])
    assert "4 calls, 3,436 tokens (400 cached), $0.014680 (+ 2 unpriced calls)" in text
    assert "powerful/big" in text and "$0.014500" in text

    stats = json.loads(cli(client, state_dir, "stats", "--json"))
    assert (stats["usage"]["cost_usd"], stats["usage"]["calls"], stats["usage"]["unpriced_calls"]) == (0.01468, 4, 2)
    by_tier = {row["tier"]: row for row in stats["usage"]["models"]}
    assert (by_tier["powerful"]["model"], by_tier["powerful"]["cost_usd"]) == ("big", 0.0145)
    assert "cost_usd" not in by_tier["default"]
    assert "models:  4 calls, 3,436 tokens (400 cached), $0.014680 (+ 2 unpriced calls)" in cli(client, state_dir,
                                                                                                  "stats")


def test_a_task_on_a_tier_reaches_that_tiers_endpoint_from_every_entry_and_status_shows_it(
        pegasus, servers: tuple[FakeOpenAI, FakeOpenAI], state_dir: Path) -> None:
    """``--tier`` (CLI), ``tier=`` (Client) and ``"tier"`` (HTTP): every model call of such a task goes to the
    tier's own server, never [llm]'s; an unknown tier is refused at each entry naming the tiers; ``status``
    shows the tier and the attempts out of [retry] max_attempts (text and --json)."""
    default, strong = servers
    strong.responder = lambda body: completion({"thought": "multiply", "answer": "42"})
    llm = {"provider": "openai", "base_url": default.url, "model": "mid", "api_key_env": "", "max_retries": 0,
           "tiers": {"strong": {"model": "big", "base_url": strong.url}}}
    (state_dir / "pegasus.toml").write_text(  # the CLI's own settings match the system's (else it refuses)
        f'[llm]\nprovider = "openai"\nbase_url = "{default.url}"\nmodel = "mid"\napi_key_env = ""\nmax_retries = 0\n'
        f'[llm.tiers.strong]\nmodel = "big"\nbase_url = "{strong.url}"\n', encoding="utf-8")
    port = procs.free_port()
    client = pegasus(memory=NO_REFLECTOR, llm=llm, http={"enabled": True, "port": port})
    known = "unknown tier 'huge'; the tiers are default, strong"

    by_cli = cli(client, state_dir, "submit", "what is six times seven?", "--machine", "reason_act",
                 "--tier", "strong").strip()
    by_client = client.submit("what is six times seven?", machine="reason_act", tier="strong")["task_id"]
    token = client.token_create("tiers", "submit")["token"]
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"},
                      timeout=30) as http:
        wait_for(lambda: _answers(http), what="the gateway")
        answer = http.post("/v1/tasks", json={"text": "what is 6*7?", "machine": "reason_act", "tier": "strong"})
        assert answer.status_code == 201 and answer.json()["tier"] == "strong", answer.text
        refused = http.post("/v1/tasks", json={"text": "what is 6*7?", "tier": "huge"})
    assert refused.status_code == 400 and known in refused.json()["error"]["message"], refused.text
    with pytest.raises(RequestError, match=known):
        client.submit("what is 6*7?", tier="huge")
    assert known in cli(client, state_dir, "submit", "what is 6*7?", "--tier", "huge", status=1)

    for task_id in (by_cli, by_client, answer.json()["task_id"]):
        task = client.wait(task_id, timeout=60)
        assert (task["lifecycle_state"], task["result"], task["tier"]) == ("done", "42", "strong"), task.get("error")
    assert default.requests == [] and [body["model"] for body in strong.requests] == ["big"] * 3
    shown = json.loads(cli(client, state_dir, "status", by_cli, "--json"))
    assert (shown["tier"], shown["attempts"], shown["max_attempts"]) == ("strong", 1, 3)
    text = cli(client, state_dir, "status", by_cli)
    assert "(reason_act, priority 5, tier strong)" in text and re.search(r"attempts:\s+1 of 3", text), text


def _answers(http: httpx.Client) -> bool:
    try:
        return http.get("/healthz").status_code == 200
    except httpx.TransportError:
        return False


TEXTS = 5  # tool results the task reads, 6,000 characters (~1,500 tokens) each


def reader(body: dict[str, Any]) -> Reply:
    """The model: asks for big_text text1..text5, one a call, then answers; asked for a summary, names the
    texts it was shown (so a summary carries which were read)."""
    messages = body["messages"]
    seen = sorted(set(re.findall(r"\btext(\d)\b", json.dumps(messages))))
    if str(messages[0].get("content") or "").startswith("Summarise"):
        return completion("the texts read so far: " + " ".join(f"text{n}" for n in seen))
    if len(seen) < TEXTS:
        return completion(tool_calls=[tool_call("big_text", {"tag": f"text{len(seen) + 1}", "chars": 6000})])
    return completion({"thought": "all read", "answer": f"read {len(seen)} texts"})


def test_a_reason_act_task_outgrowing_the_window_completes_with_its_summary_in_the_history(
        pegasus, state_dir: Path) -> None:
    """The server refuses a prompt over 4,000 tokens (the tool list, memory tools included, takes ~900) with its 400, as real servers do.  Five tool
    results of ~1,500 tokens each outgrow it: older results are cut, then the earlier rounds are
    summarised by the model; every request fits, the task completes, and ``pegasus history`` and
    ``status`` show what was done."""
    window = 4000
    with FakeOpenAI(context_window=window, responder=reader) as server:
        client = pegasus(memory=NO_REFLECTOR, llm={"provider": "openai", "base_url": server.url, "model": "m", "api_key_env": "",
                              "max_retries": 0, "context_window": window, "max_output_tokens": 200},
                         tools={"plugins": ["tests.support.tools:register"]})
        task = client.wait(client.submit("read the long texts", machine="reason_act")["task_id"], timeout=60)
        assert (task["lifecycle_state"], task["result"]) == ("done", f"read {TEXTS} texts"), task.get("error")
        assert all(prompt_size(body) + body["max_tokens"] <= window for body in server.requests)
        summaries = [n for n, body in enumerate(server.requests)
                     if str(body["messages"][0]["content"]).startswith("Summarise")]
        assert summaries, "no summary was asked for"
        after = server.requests[summaries[0] + 1]["messages"]  # the stage's own call, with the summary in it
        assert any(str(m["content"]).startswith(SUMMARY_PREFIX + "the texts read so far: text1")
                   for m in after if m["role"] == "user")

        fits = [fit for s in task["stages"] if s["stage"] == "reason" for fit in s.get("context") or []]
        assert fits[0]["truncated_results"] >= 1 and "summary_by" not in fits[0]  # first only cut
        summarised = [fit for fit in fits if fit.get("summary_by") == "model"]
        assert len(summarised) == len(summaries) and summarised[0]["summarised_messages"] >= 2
        assert all(fit["fitted_tokens"] <= window - 200 < fit["estimated_tokens"] for fit in fits)
        assert all(fit["window"] == window and fit["stage"] == "reason" for fit in fits)

        history = json.loads(cli(client, state_dir, "history", task["task_id"], "--json"))
        assert [fit for entry in history["cognitive"] for fit in entry.get("context") or []] == fits
        text = cli(client, state_dir, "history", task["task_id"])
        assert "earlier messages summarised by the model" in text and "older tool results cut" in text
        assert "earlier messages summarised by the model" in cli(client, state_dir, "status", task["task_id"])
