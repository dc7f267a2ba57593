"""What one worker learns about an endpoint, its pool knows: on a strict endpoint (refusing tools,
response_format, max_tokens and temperature, each worded as OpenAI words it), a system of three llm
workers pays for each refused parameter once, not once per worker process, also with its pool
stuttering as under load (what reaches it meanwhile read in one go)."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.support.processes import titled
from tests.support.waiting import wait_for
from tests.support.fake_openai import FakeOpenAI, Quirks, refusal
from tests.support.model_like import ModelLike

pytestmark = pytest.mark.integration
STRICT = Quirks(refuse_tools="openai", refuse_response_format="all", reasoning=True)
REFUSABLE = ("tools", "response_format", "max_tokens", "temperature")


def carried(body: dict[str, Any], parameter: str) -> bool:
    if parameter == "temperature":
        return body.get("temperature", 1) != 1  # a reasoning model takes only its default
    return parameter in body


@contextmanager
def stuttering(pid: int) -> Iterator[None]:
    """``pid`` stopped 30 ms in every 40: a worker's word and the requester's next request pile up and are
    read in one go, in either order (under load they were, and the next stage went out without the word)."""
    done = threading.Event()

    def signal_it(sig: signal.Signals) -> None:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            done.set()

    def run() -> None:
        while not done.is_set():
            signal_it(signal.SIGSTOP)
            done.wait(0.03)
            signal_it(signal.SIGCONT)
            done.wait(0.01)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        signal_it(signal.SIGCONT)


def llm_pool_pid(client: Any) -> int:
    def alone() -> list[int] | None:
        found = titled(client.spec, "llm pool")
        return found if len(found) == 1 else None

    # A worker just forked carries its pool's title until it sets its own: wait until the pool is alone.
    [pid] = wait_for(alone, what="one process titled llm pool")
    return pid


def test_a_strict_endpoint_is_paid_for_once_per_parameter_across_the_pools_workers(pegasus) -> None:
    """Three llm workers share one task's stages (each goes to the next idle worker); after the first
    refusal of each parameter no request carries it, whichever worker sends it, the pool stuttering."""
    with FakeOpenAI(responder=ModelLike(STRICT), quirks=STRICT) as server:
        # The pools in processes of their own: the llm pool's is stuttered (the home host would stop the runs too).
        client = pegasus(memory={"reflector": False}, pools={"llm_workers": 3, "tool_workers": 1, "home_host": False},
                         llm={"provider": "openai", "base_url": server.url, "model": "strict", "api_key_env": "",
                              "max_retries": 0})
        with stuttering(llm_pool_pid(client)):
            for machine in ("classic", "reason_act"):
                task = client.wait(client.submit("what is 17 * 23?", machine=machine)["task_id"], timeout=60)
                assert (task["lifecycle_state"], task["state"]) == ("done", "completed"), task.get("error")
        requests = list(server.requests)
        ladder = client.stats()["pools"]["llm"]["ladder"]  # what the pool knows, for pegasus stats --json
    assert ladder == {f"strict at {server.url}": "structured_output=prompted, tool_calls=prompted, "
                                                 "token_limit_param=max_completion_tokens, temperature omitted"}
    late = {}
    for parameter in REFUSABLE:
        # The first refusals of this very parameter (one parameter is refused at a time; response_format's
        # types in a row: json_schema, json_object with a schema, json_object), then no request carries it.
        refused = [parameter in str(refusal(body, STRICT) or "") for body in requests]
        end = refused.index(True)
        while end + 1 < len(requests) and refused[end + 1]:
            end += 1
        late[parameter] = sum(1 for body in requests[end + 1:] if carried(body, parameter))
    assert late == dict.fromkeys(REFUSABLE, 0), (late, len(requests))


def test_a_pool_reports_no_endpoint_only_its_starters_process_learnt(pegasus, monkeypatch: pytest.MonkeyPatch) -> None:
    """A system's workers are forked from the process that starts it: what that process learnt of an
    endpoint (an application's own model calls; in the suite, an earlier test's) is not the pool's.
    It was: a test's ladder showed another test's smollm2 endpoint beside its own."""
    from pegasus.llm import ladder
    from pegasus.llm.capabilities import Shape

    key = json.dumps(["http://127.0.0.1:9/v1", "inherited", {}])
    monkeypatch.setitem(ladder.KNOWN, key, Shape())
    monkeypatch.setitem(ladder._LEARNED, key, Shape())
    client = pegasus(memory={"reflector": False}, pools={"llm_workers": 2, "tool_workers": 1})
    task = client.wait(client.submit("what is 17 * 23?")["task_id"], timeout=60)
    assert task["lifecycle_state"] == "done", task.get("error")
    assert client.stats()["pools"]["llm"]["ladder"] == {}
