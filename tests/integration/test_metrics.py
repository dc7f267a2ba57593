"""/metrics of a real system, scraped over HTTP with a bearer token while tasks go through success, a 429, a
failure, a retry, a killed worker, a killed gateway, a killed task actor and webhook deliveries: the counters
move as they should, those from the store survive a gateway restart, and ``promtool check metrics`` passes on
the scrape (skipped, saying so, without Debian's prometheus)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from actors.runtime import procs
from actors.runtime.system import system_pids
from pegasus.triggers.webhooks import sign
from tests.support.fake_openai import FakeOpenAI, completion, http_error
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(base: str, token: str) -> tuple[str, Samples]:
    response = httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=30)
    assert response.status_code == 200, response.text
    return response.text, {(s.name, tuple(sorted(s.labels.items()))): s.value
                           for family in text_string_to_metric_families(response.text) for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), -1.0)


def promtool_check(text: str) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool missing (Debian's prometheus package): the scrape was not checked")
    checked = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert checked.returncode == 0 and not checked.stdout.strip(), checked.stdout + checked.stderr


def test_metrics_move_with_successes_failures_retries_429s_killed_workers_and_webhooks(
        pegasus, tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        port = procs.free_port()
        client = pegasus(memory={"reflector": False}, retry={"backoff_s": 0.0},
                         runtime={"default_machine": "reason_act"}, http={"enabled": True, "port": port},
                         llm={"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": "",
                              "max_retries": 1})  # one re-queue after a 429
        base, token = f"http://127.0.0.1:{port}", client.token_create("scraper", "read")["token"]
        wait_for(lambda: _up(base), what="the gateway")
        text, before = scrape(base, token)
        assert value(before, "pegasus_task_outcomes_total", machine="reason_act", outcome="failed") == 0
        assert value(before, "pegasus_model_requests_total", tier="default", status="rate_limited") == 0
        assert value(before, "pegasus_restarts_total", kind="supervisor") == 0  # the guardian's view
        assert value(before, "pegasus_restarts_total", kind="gateway") == 0  # its keeper's, through the env
        assert value(before, "pegasus_restarts_total", kind="task_actor") == 0

        def run(*replies: Any) -> dict[str, Any]:
            server.script(*replies)
            return client.wait(client.submit("what is the answer?")["task_id"], timeout=60)

        assert run(http_error(429, "slow down", {"Retry-After": "0.2"}), completion({"answer": "42"}))["result"] == "42"
        failed = run(completion('{"thought": "no'), completion('{"thought": "no answer"}'))
        assert (failed["lifecycle_state"], failed["exit_reason"]) == ("failed", "exception")
        _, after_failure = scrape(base, token)
        assert value(after_failure, "pegasus_tasks_failed", machine="reason_act", exit_reason="exception") == 1
        server.script(completion({"answer": "at last"}))
        client.retry(failed["task_id"])
        assert client.wait(failed["task_id"], timeout=60)["result"] == "at last"

        worker = wait_for(lambda: next((w for w in client.stats()["pools"]["llm"]["workers"] if w.get("pid")), None),
                          what="an llm worker's pid")
        os.kill(worker["pid"], signal.SIGKILL)
        wait_for(lambda: value(scrape(base, token)[1], "pegasus_restarts_total", kind="worker") >= 1,
                 what="the killed worker counted as restarted")

        secret = tmp_path / "hook.secret"
        secret.write_bytes(b"hook secret\n")
        secret.chmod(0o600)
        client.webhook_add("hook", "say {word}", secret)
        body = json.dumps({"word": "hello"}).encode()
        server.script(completion({"answer": "hello"}))
        signed = {"X-Hub-Signature-256": sign(b"hook secret", body), "X-GitHub-Delivery": "d-1",
                  "Content-Type": "application/json"}
        created = httpx.post(base + "/v1/webhooks/hook", content=body, headers=signed, timeout=30)
        assert created.status_code == 201, created.text
        assert httpx.post(base + "/v1/webhooks/hook", content=body, headers={**signed, "X-Hub-Signature-256": sign(
            b"guess", body), "X-GitHub-Delivery": "d-2"}, timeout=30).status_code == 401
        assert client.wait(created.json()["task_id"], timeout=60)["result"] == "hello"

        text, after = scrape(base, token)
        expected = {("pegasus_task_outcomes_total", (("machine", "reason_act"), ("outcome", "done"))): 3,
                    ("pegasus_task_outcomes_total", (("machine", "reason_act"), ("outcome", "failed"))): 1,
                    ("pegasus_task_retries_total", (("machine", "reason_act"),)): 1,
                    ("pegasus_task_duration_seconds_count", (("machine", "reason_act"),)): 4,  # every end
                    ("pegasus_task_queue_wait_seconds_count", (("machine", "reason_act"),)): 3,
                    ("pegasus_model_requests_total", (("status", "rate_limited"), ("tier", "default"))): 1,
                    ("pegasus_model_requests_total", (("status", "error"), ("tier", "default"))): 1,
                    ("pegasus_model_requests_total", (("status", "ok"), ("tier", "default"))): 3,
                    ("pegasus_webhook_deliveries_total", (("result", "created"),)): 1,
                    ("pegasus_webhook_deliveries_total", (("result", "refused"),)): 1}
        assert {key: after.get(key) for key in expected} == expected
        assert value(after, "pegasus_tasks_failed", machine="reason_act", exit_reason="exception") == -1  # retried
        assert value(after, "pegasus_model_calls_total", model="test-model", tier="default") >= 4
        assert value(after, "pegasus_stage_seconds_count", stage="reason", pool="llm", tier="default") >= 4
        assert any(name == "process_resident_memory_bytes" for name, _ in after)
        assert any(name == "pegasus_build_info" for name, _ in after)

        # Killed, the gateway comes back (its keeper); what the store counts is still there, the rest starts at 0.
        gateway = procs.listener_pid(port, system_pids(client.spec))
        assert gateway is not None
        procs.kill_all({gateway: procs.read_stat(gateway).starttime}, grace=0)  # type: ignore[union-attr]
        wait_for(lambda: procs.listener_pid(port, system_pids(client.spec)) not in (None, gateway) and _up(base),
                 what="the gateway back")
        _, restarted = scrape(base, token)
        assert {key: restarted.get(key) for key in expected if "webhook" not in key[0]} == \
            {key: count for key, count in expected.items() if "webhook" not in key[0]}
        assert value(restarted, "pegasus_webhook_deliveries_total", result="created") == 0
        assert value(restarted, "pegasus_restarts_total", kind="gateway") == 1

        # A task actor SIGKILLed mid-run: counted, and its run goes on elsewhere from its checkpoint.
        server.script(completion({"answer": "late"}, delay_s=2.0), completion({"answer": "again"}))
        held = client.submit("what is the answer?")["task_id"]
        actor = wait_for(lambda: client.get(held).get("actor_pid"), what="the task actor's pid")
        os.kill(actor, signal.SIGKILL)
        assert client.wait(held, timeout=60)["lifecycle_state"] == "done"
        wait_for(lambda: value(scrape(base, token)[1], "pegasus_restarts_total", kind="task_actor") == 1,
                 what="the killed task actor counted")
        promtool_check(text)


def _up(base: str) -> bool:
    try:
        return httpx.get(base + "/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False
