"""What a stage worker loads (actors/runtime/sharing.py, docs/memory.md): the model SDK only where model calls are
made, and there once, in the pool its workers are forked from -- not again in each worker.

The systems run in the background (``pegasus(daemon=True)``): their processes descend from a fresh
launcher, not from this test process, whose imports (another test's openai) they would otherwise
inherit.  The SDK's mark in a process is its compiled JSON parser (``jiter``, which only openai
imports here) in /proc/<pid>/maps; a process on a model endpoint that made a call must show it, so
the mark is checked as it is used.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from actors.client import Client
from actors.runtime.system import system_pids
from benchmarks.common import role_of, title_of
from tests.support.fake_openai import FakeOpenAI, completion

pytestmark = pytest.mark.integration

SDK_MARK = "/jiter/"  # openai's compiled JSON parser


def _loads_sdk(pid: int) -> bool:
    return SDK_MARK in Path(f"/proc/{pid}/maps").read_text()


def _roles(client: Client) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for pid in system_pids(client.spec):
        found.setdefault(role_of(title_of(pid)), []).append(pid)
    return found


def test_only_the_llm_pool_on_a_model_endpoint_loads_the_sdk_and_its_workers_share_it(pegasus) -> None:
    """provider openai: the llm pool loads the SDK before forking its workers (before, each worker
    loaded its own copy on its first call: ~30 MiB more PSS each); the tool pool and tool workers
    never load it."""
    with FakeOpenAI(responder=lambda body: completion({"thought": "known", "answer": "42"})) as server:
        # The pools in processes of their own: the home host runs both, so its tool workers are forked from a
        # process that loaded the SDK (they share its pages).
        client = pegasus(daemon=True, pools={"llm_workers": 2, "tool_workers": 2, "home_host": False},
                        llm={"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": ""})
        done = client.wait(client.submit("what is the answer?", machine="reason_act")["task_id"], timeout=60)
        assert (done["lifecycle_state"], done["result"]) == ("done", "42"), done.get("error")
        roles = _roles(client)
        assert len(roles["llm worker"]) == 2 and len(roles["tool worker"]) == 2, roles
        assert all(_loads_sdk(pid) for pid in roles["llm pool"] + roles["llm worker"])  # the mark is right
        assert not any(_loads_sdk(pid) for pid in roles["tool pool"] + roles["tool worker"])


def test_offline_processes_never_load_the_sdk(pegasus) -> None:
    """provider offline (the default): no process of the system loads the model SDK, after a task too.
    (A guard: true before actors/runtime/sharing.py as well.)"""
    client = pegasus(daemon=True, pools={"llm_workers": 1, "tool_workers": 1})
    done = client.wait(client.submit("what is 6 * 7?")["task_id"], timeout=60)
    assert done["lifecycle_state"] == "done", done.get("error")
    roles = _roles(client)
    assert roles["llm worker"] and roles["tool worker"], roles
    assert not any(_loads_sdk(pid) for pids in roles.values() for pid in pids)
