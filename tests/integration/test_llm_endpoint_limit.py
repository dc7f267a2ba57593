"""``[llm] max_concurrent`` through a real system (pegasus.pool.endpoints): three llm workers, three tasks at
once, and an endpoint held to one request at a time is sent one request at a time, every task done."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from tests.support.fake_openai import FakeOpenAI
from tests.support.model_like import ModelLike

pytestmark = pytest.mark.integration
DELAY_S = 0.3  # each reply's wait at the server: a request sent while another is answered arrives sooner


def test_an_endpoint_held_to_one_request_is_sent_one_at_a_time(pegasus) -> None:
    model = ModelLike()

    def slow(body: dict[str, Any]) -> dict[str, Any]:
        return {**model(body), "delay_s": DELAY_S}

    with FakeOpenAI(responder=slow) as server:
        client = pegasus(memory={"reflector": False}, pools={"llm_workers": 3, "tool_workers": 1},
                         llm={"provider": "openai", "base_url": server.url, "model": "m", "api_key_env": "",
                              "max_concurrent": 1})
        ids = [client.submit("what is 17 * 23?", machine="reason_act")["task_id"] for _ in range(3)]
        tasks = [client.wait(task_id, timeout=120) for task_id in ids]
        assert [t["lifecycle_state"] for t in tasks] == ["done"] * 3, [t.get("error") for t in tasks]
        arrivals = list(server.arrivals)
    assert len(arrivals) >= 6  # two calls a task
    # Each request came after the one before was answered (a lower bound: load only widens the gaps).
    assert min(later - earlier for earlier, later in pairwise(arrivals)) >= DELAY_S, arrivals
