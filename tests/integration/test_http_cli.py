"""The gateway from the command line (``pegasus start --http``, ``pegasus token ...``, ``pegasus stop``) and over TLS."""

from __future__ import annotations

import json
import shutil
import socket
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from actors.runtime import procs
from actors.runtime.system import system_pids
from benchmarks.common import woken_and_ran
from tests.integration.test_http_gateway import _wait_up
from tests.support.processes import titled

pytestmark = pytest.mark.integration


def test_start_with_http_tokens_from_the_cli_and_stop_ends_the_gateway(cli: Any) -> None:
    """``pegasus start --http PORT`` returns once the API listens (CI: the README's ``curl`` right after it found
    nothing there); a token made by ``pegasus token create`` works until
    ``pegasus token revoke``; ``pegasus stop`` ends the gateway with the rest."""
    port = procs.free_port()
    started = cli("start", "--http", str(port), "--json", timeout=60)
    cli.track()
    assert started.returncode == 0, started.stderr
    assert json.loads(started.stdout)["http"] == f"127.0.0.1:{port}"
    base = f"http://127.0.0.1:{port}"
    socket.create_connection(("127.0.0.1", port), timeout=5).close()  # no wait: start returns once it listens
    cli.track()
    made = cli("token", "create", "ci", "--scope", "submit", "--json")
    assert made.returncode == 0, made.stderr
    token = json.loads(made.stdout)["token"]
    headers = {"Authorization": f"Bearer {token}"}
    created = httpx.post(base + "/v1/tasks", json={"text": "what is 2 + 3 * 4?"}, headers=headers)
    assert created.status_code == 201, created.text
    listed = cli("token", "list", "--json").stdout
    assert [row["name"] for row in json.loads(listed)] == ["ci"] and token not in listed
    assert cli("token", "revoke", "ci").returncode == 0
    assert httpx.get(base + "/v1/stats", headers=headers).status_code == 401
    gateway = procs.listener_pid(port, system_pids(cli.spec))
    assert gateway is not None
    # Idle, neither the gateway nor its keeper wakes (issue 33): counted, not timed.  Before, uvicorn's loop woke
    # every 0.1 s and the keeper looked at the gateway every 0.5 s (36 wake-ups in these 3 s).
    [keeper] = titled(cli.spec, "gateway keeper")
    before = {pid: woken_and_ran(pid)[0] for pid in (gateway, keeper)}
    time.sleep(3.0)  # the window counted, not a wait for something
    woken = {pid: woken_and_ran(pid)[0] - before[pid] for pid in before}
    assert sum(woken.values()) <= 2, woken
    assert cli("stop").returncode == 0
    assert not procs.is_alive(gateway)
    with pytest.raises(httpx.TransportError):
        httpx.get(base + "/healthz", timeout=2)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl makes the test's certificate")
def test_the_gateway_serves_https_with_the_configured_certificate(pegasus: Any, tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    port = procs.free_port()
    pegasus(http={"enabled": True, "port": port, "tls_cert": str(cert), "tls_key": str(key)})
    deadline = time.monotonic() + 60
    while True:
        try:
            response = httpx.get(f"https://127.0.0.1:{port}/healthz", verify=ssl.create_default_context(cafile=cert),
                                 timeout=5)
            break
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    assert response.status_code == 200 and response.json()["ok"] is True
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)  # no plain HTTP beside it


def test_start_refuses_an_http_port_another_program_listens_on(cli: Any) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = holder.getsockname()[1]
        result = cli("start", "--http", str(taken))
    assert result.returncode == 1 and "used by another program" in result.stderr
    assert not system_pids(cli.spec)


def test_a_model_reply_streams_as_delta_events_between_the_transitions(pegasus: Any) -> None:
    """With [llm] stream, the text a model stage writes reaches the SSE reader as ``delta`` events (no id), in
    order, adding up to the reply; the transitions keep their ids."""
    from tests.integration.test_http_gateway import _events
    from tests.support.fake_openai import FakeOpenAI, completion

    reply = {"thought": "easy", "answer": "Forty-two, streamed over HTTP."}
    port = procs.free_port()
    with FakeOpenAI() as server:
        client = pegasus(llm={"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": "",
                              "max_retries": 0}, runtime={"approval_policy": "manual"},
                         http={"enabled": True, "port": port})
        server.script(completion(reply, chunk_chars=6, chunk_delay_s=0.005))
        base = f"http://127.0.0.1:{port}"
        _wait_up(base)
        headers = {"Authorization": f"Bearer {client.token_create('sse', 'admin')['token']}"}
        with httpx.Client(base_url=base, headers=headers, timeout=60) as http:
            task_id = http.post("/v1/tasks", json={"text": "what is the answer?", "machine": "reason_act"}).json()["task_id"]
            seen = []
            with http.stream("GET", f"/v1/tasks/{task_id}/events") as response:
                for event in _events(response):
                    seen.append(event)
                    if event["data"].get("to_state") == "draft":
                        http.post(f"/v1/tasks/{task_id}/approve")
                    if event["event"] == "end":
                        break
    deltas = [e for e in seen if e["event"] == "delta"]
    assert deltas and all(e["id"] is None for e in deltas)
    assert "".join(e["data"]["text"] for e in deltas) == json.dumps(reply)
    ids = [e["id"] for e in seen if e["event"] == "transition"]
    assert ids == list(range(1, len(ids) + 1))
    assert client.get(task_id)["result"] == reply["answer"]
