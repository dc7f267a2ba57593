"""Scenario: the HTTP gateway beside the Python client -- submit rate and event delivery latency.

One system (offline cognition, manual approval) with ``[http] enabled``.  Submit rate: tasks submitted one
after another, by ``Client.submit`` and by ``POST /v1/tasks`` (httpx, one kept-alive connection).  Delivery:
a task is submitted (a draft), its follower starts (``Client.follow`` or ``GET /v1/tasks/{id}/events``), then
another client approves it; a transition's latency is its arrival at the follower less its timestamp (made
by the supervisor or the task actor: one host, one clock).  Nothing is asserted as a time limit.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import datetime
from typing import Any

import httpx

from actors import messages as m
from actors.client import Client
from actors.runtime.procs import free_port
from benchmarks.common import check, pegasus_system, percentile, state_dir

NAME = "http"
TEXT = "what is 2 + 3 * 4?"


def _age_ms(timestamp: str) -> float:
    return (time.time() - datetime.fromisoformat(timestamp).timestamp()) * 1000.0


def _wait_up(base: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=5).status_code == 200:
                return
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
        time.sleep(0.05)


def _submit_rates(client: Client, http: httpx.Client, tasks: int) -> tuple[float, float]:
    began = time.perf_counter()
    for _ in range(tasks):
        client.submit(TEXT)
    python_rate = tasks / (time.perf_counter() - began)
    began = time.perf_counter()
    for _ in range(tasks):
        response = http.post("/v1/tasks", json={"text": TEXT})
        if response.status_code != 201:
            raise RuntimeError(f"submit answered {response.status_code}: {response.text}")
    return python_rate, tasks / (time.perf_counter() - began)


def _python_latencies(client: Client, approver: Client) -> list[float]:
    task_id = client.submit(TEXT)["task_id"]
    client.subscribe(task_id)
    threading.Timer(0.05, approver.approve, (task_id,)).start()
    return [_age_ms(notice.timestamp) for notice in client.follow(task_id, timeout=60, subscribe=False)
            if isinstance(notice, m.TransitionNotice) and notice.to_state != "draft"]


def _sse_latencies(http: httpx.Client, approver: Client) -> list[float]:
    task_id = http.post("/v1/tasks", json={"text": TEXT}).json()["task_id"]
    ages: list[float] = []
    with http.stream("GET", f"/v1/tasks/{task_id}/events") as response:
        data, kind = None, None
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = line[6:]
            elif line.startswith("event: "):
                kind = line[7:]
            elif not line and data is not None:
                received = json.loads(data)
                if kind == "end":
                    break
                if kind == "transition":
                    if received["to_state"] == "draft":
                        approver.approve(task_id)
                    else:
                        ages.append(_age_ms(received["timestamp"]))
                data, kind = None, None
    return ages


def run(quick: bool) -> dict[str, Any]:
    submits, followed = (30, 3) if quick else (300, 30)
    port = free_port()
    with state_dir() as state, pegasus_system(state, {
            "runtime": {"approval_policy": "manual"}, "http": {"enabled": True, "port": port}}) as system:
        client = system.client
        base = f"http://127.0.0.1:{port}"
        token = client.token_create("bench", "admin")["token"]
        _wait_up(base)
        approver = Client.connect(client.settings)
        try:
            with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
                http.get("/v1/stats")  # the gateway's first connection to the supervisor
                python_rate, http_rate = _submit_rates(client, http, submits)
                python_ms: list[float] = []
                sse_ms: list[float] = []
                for _ in range(followed):
                    python_ms += _python_latencies(client, approver)
                    sse_ms += _sse_latencies(http, approver)
        finally:
            approver.close()
    figures = {"submits": submits, "tasks_followed": followed, "python_submit_per_s": round(python_rate, 1),
               "http_submit_per_s": round(http_rate, 1),
               "python_delivery_p50_ms": round(percentile(python_ms, 50), 3),
               "sse_delivery_p50_ms": round(percentile(sse_ms, 50), 3),
               "python_delivery_p99_ms": round(percentile(python_ms, 99), 3),
               "sse_delivery_p99_ms": round(percentile(sse_ms, 99), 3)}
    gap = figures["sse_delivery_p50_ms"] - figures["python_delivery_p50_ms"]
    checks = [
        check("submit rate, Python client (one at a time)", figures["python_submit_per_s"], "tasks/s"),
        check("submit rate, POST /v1/tasks (one at a time)", figures["http_submit_per_s"], "tasks/s"),
        check("transition delivery p50, Client.follow", figures["python_delivery_p50_ms"], "ms"),
        check("transition delivery p50, SSE", figures["sse_delivery_p50_ms"], "ms"),
        check("SSE p50 less the Python client's", round(gap, 3), "ms", "<= 1", gap <= 1.0),
    ]
    return {"figures": figures, "checks": checks, "notes": [
        "http: one system, offline cognition; submits one after another (Python client, then httpx on one kept-alive "
        "connection); delivery = arrival at the follower less the transition's timestamp (one host, one clock)."]}
