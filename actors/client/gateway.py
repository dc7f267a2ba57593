"""The HTTP gateway process: uvicorn serving ``pegasus.gateway``'s app over Python clients of the supervisor.

Started by the gateway keeper with the state directory in ``PEGASUS_GATEWAY_HOME``.  ``ClientBackend``
pools up to ``[http] clients`` connections (and one per event stream); tokens are read through a
read-only store connection, so the supervisor stays the only writer.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from thespian.actors import ActorSystemException

from actors import messages as m
from actors.client.client import TERMINAL_LIFECYCLE, Client
from actors.client.errors import RequestError
from actors.messages.gateway import HOME_ENV, RESTARTS_ENV
from actors.runtime.settings import read_settings
from actors.runtime.spec import SystemNotRunningError, SystemStartError
from pegasus import logs
from pegasus.config import Settings
from pegasus.dashboard.api import dashboard_routes
from pegasus.errors import PegasusError
from pegasus.gateway import NotReady, Upstream, build_app
from pegasus.requests import R
from pegasus.store.sqlite import DB_FILE
from pegasus.store.tokens import TokenReader

BORROW_S = 30.0  # a request waits this long at most for a free connection to the supervisor
WATCH_QUIET_S = 5.0  # the metrics watcher checks, after this long without a transition, that its supervisor is the same


def _translated(call: Callable[[], Any]) -> Any:
    """``call()``, the client's errors as the gateway core's: refusals ``Upstream``, no system ``NotReady``."""
    try:
        return call()
    except RequestError as exc:
        raise Upstream(exc.error_type, str(exc)) from None
    except (SystemNotRunningError, SystemStartError, ActorSystemException) as exc:
        raise NotReady(str(exc)) from None


class ClientPool:
    """Connections to the supervisor, each lent to one caller at a time (a Client is not thread-safe)."""

    def __init__(self, settings: Settings, size: int | None) -> None:
        self.settings, self.size = settings, size
        self._idle: queue.LifoQueue[Client] = queue.LifoQueue()
        self._made = 0
        self._lock = threading.Lock()

    @contextmanager
    def client(self) -> Iterator[Client]:
        client = self._borrow()
        broken = False
        try:
            yield client
        except NotReady:
            broken = True  # the system did not answer on it: a fresh connection next time
            raise
        finally:
            if broken:
                self._discard(client)
            else:
                self._idle.put(client)  # an answer, or a refusal (Upstream, WebhookRefused): the connection is fine

    def _borrow(self) -> Client:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._lock:
            make = self.size is None or self._made < self.size
            if make:
                self._made += 1
        if not make:
            try:
                return self._idle.get(timeout=BORROW_S)
            except queue.Empty:
                raise NotReady(f"all {self.size} connections to the supervisor stayed busy for {BORROW_S:g}s") from None
        try:
            return _translated(lambda: Client.connect(self.settings))
        except BaseException:
            with self._lock:
                self._made -= 1
            raise

    def _discard(self, client: Client) -> None:
        with self._lock:
            self._made -= 1
        try:
            client.close()
        except Exception:  # noqa: BLE001 - it is being thrown away
            pass

    def close(self) -> None:
        while True:
            try:
                self._idle.get_nowait().close()
            except queue.Empty:
                return
            except Exception:  # noqa: BLE001
                continue


class ClientStream:
    """One task's event stream on a connection of its own: subscribed first, then its history read."""

    def __init__(self, pool: ClientPool, task_id: str) -> None:
        self.pool, self.task_id = pool, task_id
        self._lease = pool.client()
        self.client = self._lease.__enter__()
        self._closed = False
        try:
            _translated(lambda: self.client.subscribe(task_id))
            self.history: dict[str, Any] = _translated(lambda: self.client.history(task_id))
            self.duplicates = self.client.queued(task_id)
        except BaseException as exc:
            self._end(exc)
            raise

    def notices(self, stop: threading.Event) -> Iterator[Any]:
        generation = self.client.generation
        # A replaced supervisor ends the stream: the reader reconnects with Last-Event-ID and gets, from the
        # store, what happened in between (a follow would only go on from the new subscription).
        followed = self.client.follow(self.task_id, timeout=float("inf"), subscribe=False, until=TERMINAL_LIFECYCLE,
                                      stop=lambda: stop.is_set() or self.client.generation != generation)
        while True:
            try:
                notice = _translated(lambda: next(followed))
            except StopIteration:
                return
            yield notice

    def close(self) -> None:
        self._end(None)

    def _end(self, exc: BaseException | None) -> None:
        if self._closed:
            return
        self._closed = True
        self.client.discard(self.task_id)  # late notices of this task are not the next stream's
        if exc is None:
            self._lease.__exit__(None, None, None)
        else:
            try:
                self._lease.__exit__(type(exc), exc, exc.__traceback__)
            except BaseException:  # noqa: BLE001 - the error is the caller's to raise
                pass


class ClientBackend:
    """The gateway core's ``Backend``: requests asked through Python clients, on pooled connections."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.requests = ClientPool(settings, settings.http.clients)
        self.streams = ClientPool(settings, None)  # the app caps open streams ([http] max_streams)
        self.log = logs.get("gateway")
        self._watcher: threading.Thread | None = None
        self._observers: list[tuple[Callable[[dict[str, Any]], None], bool]] = []

    def ask(self, request: m.Request[R]) -> R:
        with self.requests.client() as client:
            return _translated(lambda: client.ask(request))

    def ready(self) -> dict[str, Any]:
        with self.requests.client() as client:
            located = _translated(client.locate)
            store = _translated(client.store_status)
        return {"generation": located.get("generation"), "restarts": located.get("restarts"), "store": store,
                **located.get("children", {}),
                **({} if store["state"] not in ("damaged", "replaced") else {"ok": False})}

    def open_stream(self, task_id: str) -> ClientStream:
        return ClientStream(self.streams, task_id)

    def watch(self, observe: Callable[[dict[str, Any]], None], *, whole: bool = False) -> None:
        """Every task's transitions from now on, for the metrics (stage latencies: each one's ``detail``) and the
        dashboard's events (``whole``): one thread, one connection; the first call returns once it is subscribed."""
        self._observers.append((observe, whole))
        if self._watcher is None:
            subscribed = threading.Event()
            self._watcher = threading.Thread(target=self._watch, args=(subscribed,), name="watch", daemon=True)
            self._watcher.start()
            subscribed.wait(WATCH_QUIET_S)

    def _watch(self, subscribed: threading.Event) -> None:
        while True:
            try:
                client = Client.connect(self.settings)
                client.subscribe(None)
                subscribed.set()
                generation, quiet_since = client.generation, time.monotonic()
                while True:
                    message = client.asys.listen(1.0)
                    if isinstance(message, m.TransitionNotice):
                        for observe, whole in list(self._observers):
                            observe(asdict(message) if whole else message.detail)
                        quiet_since = time.monotonic()
                    elif time.monotonic() - quiet_since >= WATCH_QUIET_S:
                        quiet_since = time.monotonic()
                        client.locate()
                        if client.generation != generation:
                            client.subscribe(None)
                            generation = client.generation
            except (PegasusError, ActorSystemException, OSError) as exc:
                self.log.warning("metrics_watch_failed", error=str(exc))
                time.sleep(1.0)


def serve(settings: Settings, state_dir: Path) -> None:
    """Run the gateway until the process is told to stop."""
    import uvicorn

    from actors.client import quiet_server

    http = settings.http
    backend = ClientBackend(settings)
    tokens = TokenReader(state_dir / DB_FILE)
    app = build_app(backend, tokens.lookup, http, parts=(dashboard_routes,),  # the web dashboard at /
                    max_attempts=settings.retry.max_attempts)
    app.state.gateway.metrics.restarts = int(os.environ.get(RESTARTS_ENV, "0") or 0)
    config = uvicorn.Config(app, host=http.bind, port=http.port, ssl_certfile=http.tls_cert or None,
                            ssl_keyfile=http.tls_key or None, log_config=None, access_log=False, lifespan="off",
                            timeout_graceful_shutdown=1, server_header=False)
    log = logs.get("gateway")
    log.info("gateway_listening", bind=http.bind, port=http.port, tls=bool(http.tls_cert))
    try:
        quiet_server.server(config, _warn_loud_loop).run()  # uvicorn's, without its tick where that is sure
    finally:
        tokens.close()
        backend.requests.close()


def _warn_loud_loop(why: str) -> None:
    """One line in logs/gateway.log (the gateway's stderr), as a Thespian speed patch left out says."""
    print(f"pegasus: warning: the gateway runs uvicorn's own loop (a wake-up every 0.1 s): {why}", file=sys.stderr,
          flush=True)


def main() -> None:
    from setproctitle import setproctitle

    from actors.runtime import titles

    state_dir = Path(os.environ[HOME_ENV])
    settings = read_settings(state_dir)
    logs.configure_from(settings)
    setproctitle(titles.title("http gateway", state_dir))
    serve(settings, state_dir)
