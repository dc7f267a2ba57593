"""LiteLLM's proxy, really (issue 29): a real ``litellm --config`` on 127.0.0.1 between Pegasus and its
models, each case run through a real Pegasus system with the shipped defaults but for the model.

- ``prose``: a mock model answering every request in prose: both machines finish (prose is an answer).
- ``upstream``: a provider behind the proxy (the fake OpenAI server, scripted): its 429 reaches Pegasus
  with the provider's Retry-After as ``llm_provider-retry-after``; the stage runs again no sooner, and
  after ``llm.max_retries`` it fails as RateLimited (exit_reason retry_exhausted) in 1 + max_retries requests.
- ``hung``: a provider that takes the connection and never answers: with llm.timeout_s 60 and 2 retries
  the stage fails inside its pools.llm_timeout_s, naming the model's timeout, not the pool's "overran".

LiteLLM would change packages of ours (rich, cryptography), so it lives in its own venv: .ci/run makes
it at ~/.cache/pegasus-ci/litellm (or set PEGASUS_LITELLM to a ``litellm`` executable); without it
these tests skip, saying so.
"""

from __future__ import annotations

import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from tests.support.waiting import not_answering
from tests.support.fake_openai import FakeOpenAI, completion, http_error

pytestmark = pytest.mark.integration

VERSION = "1.108.7"
VENV = Path.home() / ".cache" / "pegasus-ci" / "litellm"
KEY_ENV, KEY = "PEGASUS_TEST_LITELLM_KEY", "sk-pegasus-test-0123456789abcdef"  # the proxy's master key
QUESTION = "what is 17 * 23?"
PROSE = "17 * 23 = 391."
CONFIG = """\
model_list:
  - model_name: prose
    litellm_params: {{model: openai/prose, api_key: none, mock_response: "{prose}"}}
  - model_name: upstream
    litellm_params: {{model: openai/upstream, api_key: none, api_base: "{upstream}"}}
  - model_name: hung
    litellm_params: {{model: openai/hung, api_key: none, api_base: "{hung}"}}
litellm_settings: {{telemetry: false}}
router_settings: {{num_retries: 0}}  # the retries are Pegasus's (LiteLLM's own: ~8 s per mock 429)
general_settings: {{master_key: {key}}}
"""


def litellm() -> Path:
    path = Path(os.environ.get("PEGASUS_LITELLM") or VENV / "bin" / "litellm")
    if not os.access(path, os.X_OK):
        pytest.skip(f"LiteLLM's proxy is not installed at {path}: python -m venv {VENV} && "
                    f"{VENV}/bin/pip install 'litellm[proxy]=={VERSION}' (.ci/run does; it would change "
                    "packages of ours in the main environment)")
    return path


def wait_ready(url: str, proxy: subprocess.Popen[bytes], log: Path, timeout: float = 180.0) -> None:
    failed = not_answering(f"{url}/health/liveliness", proxy, log, "LiteLLM's proxy", timeout)
    if failed:
        pytest.fail(failed)


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory, upstream: FakeOpenAI) -> Iterator[str]:
    """The proxy's base_url; its config in a tmp dir; the hung provider a socket that is never read."""
    executable = litellm()
    folder = tmp_path_factory.mktemp("litellm")
    with socket.socket() as hung:  # closed before the proxy is stopped (below)
        hung.bind(("127.0.0.1", 0))
        hung.listen(16)  # connections wait in the backlog: accepted by the kernel, never answered
        config = folder / "config.yaml"
        config.write_text(CONFIG.format(prose=PROSE, upstream=upstream.url, key=KEY,
                                        hung=f"http://127.0.0.1:{hung.getsockname()[1]}/v1"), encoding="utf-8")
        port = procs.free_port()
        log = folder / "proxy.log"
        env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # its price list from the package, not the network
        with log.open("wb") as out:
            server = subprocess.Popen([str(executable), "--config", str(config), "--host", "127.0.0.1",
                                       "--port", str(port)], stdout=out, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, env=env, cwd=folder)
        url = f"http://127.0.0.1:{port}"
        try:
            wait_ready(url, server, log)
            yield f"{url}/v1"
        finally:
            # Uvicorn's shutdown waits for every request in flight, and the hung case's never ends while its
            # provider holds the connection (15 s, then SIGKILL): reset it first, so the proxy exits at once.
            hung.close()
            server.terminate()
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait(timeout=15)


def start(pegasus: Any, proxy: str, model: str, **sections: Any) -> Any:
    """A Pegasus system on one of the proxy's models, with the shipped defaults otherwise."""
    return pegasus(memory={"reflector": False}, **sections,
                   llm={"provider": "openai", "base_url": proxy, "model": model, "api_key_env": KEY_ENV})


def test_each_litellm_case_of_issue_29_ends_as_described(pegasus, proxy: str, upstream: FakeOpenAI,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """One test, one proxy (its start is most of the time: ~25 s), a system per case, each stopped before the
    next starts on the same port and state directory."""
    monkeypatch.setenv(KEY_ENV, KEY)
    cases = ((prose_finishes_both_machines, "prose", {}),
             (a_429_waits_out_retry_after_then_fails_as_rate_limited, "upstream", {}),
             (a_hung_provider_fails_naming_the_models_timeout, "hung", {"pools": {"llm_timeout_s": 10.0}}))
    for case, model, sections in cases:
        client = start(pegasus, proxy, model, **sections)
        try:
            case(client, upstream)
        finally:
            client.close()


def prose_finishes_both_machines(client: Any, upstream: FakeOpenAI) -> None:
    for machine in ("classic", "reason_act"):
        task = client.wait(client.submit(QUESTION, machine=machine)["task_id"], timeout=120)
        assert (task["lifecycle_state"], task["state"]) == ("done", "completed"), (machine, task.get("error"))
        assert "391" in str(task["result"]), task["result"]
        degraded = [note for s in task["stages"] for note in (s.get("usage") or {}).get("degraded", [])]
        assert degraded, task["stages"]  # the record says the stage read prose


def a_429_waits_out_retry_after_then_fails_as_rate_limited(client: Any, upstream: FakeOpenAI) -> None:
    upstream.requests.clear()
    upstream.arrivals.clear()
    upstream.script(http_error(429, "slow down", {"Retry-After": "1"}), completion({"answer": "391"}))
    done = client.wait(client.submit(QUESTION, machine="reason_act")["task_id"], timeout=120)
    assert (done["lifecycle_state"], done["result"]) == ("done", "391"), done.get("error")
    assert len(upstream.requests) == 2  # LiteLLM sent each once; Pegasus once more, after Retry-After
    assert upstream.arrivals[1] - upstream.arrivals[0] >= 1.0

    retries = 2  # [llm] max_retries, shipped
    upstream.script(*[http_error(429, "slow down", {"Retry-After": "1"})] * (retries + 1))
    limited = client.wait(client.submit(QUESTION, machine="reason_act")["task_id"], timeout=120)
    assert (limited["lifecycle_state"], limited["exit_reason"]) == ("failed", "retry_exhausted"), limited
    assert limited["error"].startswith("reason stage failed: RateLimited: ") and "429" in limited["error"]
    assert len(upstream.requests) == 2 + retries + 1  # 1 + max_retries, not 12
    gaps = [b - a for a, b in zip(upstream.arrivals[2:], upstream.arrivals[3:])]
    assert all(gap >= 1.0 for gap in gaps), gaps


def a_hung_provider_fails_naming_the_models_timeout(client: Any, upstream: FakeOpenAI) -> None:
    """llm.timeout_s 60 x 3 attempts (shipped) inside a 10 s pools.llm_timeout_s: fitted, not overrun."""
    task = client.wait(client.submit(QUESTION, machine="reason_act")["task_id"], timeout=120)
    assert (task["lifecycle_state"], task["exit_reason"]) == ("failed", "timeout"), task
    assert "llm.timeout_s = 60s" in task["error"] and "pools.llm_timeout_s" in task["error"], task["error"]
    assert "overran" not in task["error"]
