"""What every command shares: exit codes, printing a result or an error, the settings of
``--config``/``--port`` and a client of the running system."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from actors.cli.views import clean
from pegasus import bounds
from pegasus.errors import InvalidRequest, PegasusError

if TYPE_CHECKING:  # the client, the settings and the requests are imported by the commands that use them
    from actors.client import Client
    from pegasus import config
    from pegasus.requests import R, Request

Handler = Callable[[argparse.Namespace], int]

# 0 done, 1 failed (a task, or the command itself), 2 usage error (argparse's), 3 a task waits for
# information (blocked), 4 a task failed with an effect in doubt (effects_unknown), 130 interrupted.
EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_WAITING, EXIT_EFFECTS_UNKNOWN, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130


class UsageError(PegasusError):
    """The command line itself is wrong (exit 2); ``usage`` and ``prog`` are those of the command."""

    def __init__(self, message: str, usage: str = "", prog: str = "pegasus") -> None:
        self.usage, self.prog = usage, prog
        super().__init__(message)


def asking(request: type[Request[Any]], handler: Handler) -> Handler:
    """``handler``, a command that asks ``request`` alone, marked with it (``handler.request``): the parser
    names each such command's request class from its declaration (tests/actors/cli/test_cli_requests.py)."""
    handler.request = request  # type: ignore[attr-defined]
    handler.__name__ = request.__name__.lower()
    return handler


def count(minimum: int, maximum: int) -> Callable[[str], int]:
    """An argparse type: a whole number from ``minimum`` to ``maximum`` (a usage error names the flag)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # also past int's 4,300 digits
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{text[:40]} is out of range ({minimum} to {maximum})")
        return value
    parse.__name__ = f"integer from {minimum} to {maximum}"
    return parse


def duration(text: str) -> float:
    """An argparse type: seconds, a finite number above 0 and at most ``bounds.MAX_WAIT_S``."""
    try:
        return bounds.seconds(text, "seconds")
    except InvalidRequest as exc:
        raise argparse.ArgumentTypeError(str(exc).partition(": ")[2]) from None


def emit(args: argparse.Namespace, data: Any, text: str) -> None:
    """A command's result on stdout: ``data`` as JSON with ``--json``, else ``text``."""
    print(json.dumps(data, indent=2, default=str) if args.json else text, flush=True)


def error(message: str, error_type: str, *, as_json: bool, **extra: Any) -> None:
    """A failure on stderr: one line ``pegasus: <reason>``, or ``{"error": {"type", "message", ...}}``."""
    if as_json:
        print(json.dumps({"error": {"type": error_type, "message": message, **extra}}, default=str),
              file=sys.stderr, flush=True)
    else:
        print(f"pegasus: {clean(message)}", file=sys.stderr, flush=True)


def error_type(exc: BaseException) -> str:
    """The kind of an error: the supervisor's name for it when it refused a request, else the class name."""
    return getattr(exc, "error_type", None) or type(exc).__name__


def settings_of(args: argparse.Namespace) -> config.Settings:
    from pegasus import config
    settings = config.load(args.config)
    if getattr(args, "port", None) is not None:
        settings = settings.with_overrides({"system": {"admin_port": args.port}})
    return settings


def refuse_other_task_settings(settings: config.Settings, client: Client) -> None:
    """Refuse (PegasusError) when this command's settings differ from the running system's in what changes a
    task (the system's would be used, silently); the system's own file says what it runs with."""
    from actors.runtime.settings import SettingsUnusable, read_settings
    from pegasus import settings_mismatch
    try:
        running = read_settings(client.spec.state_dir)
    except SettingsUnusable:
        return  # a system of another Pegasus, or its file unreadable: nothing to compare with
    found = settings_mismatch.differences(settings, running)
    if found:
        raise PegasusError(settings_mismatch.refusal(found, client.spec.admin_port))


def ask(args: argparse.Namespace, request: Request[R]) -> R:
    """``request`` asked of the running system: its reply.  With none running, a read (status, history,
    tree, list) is answered from the store file, read-only; anything else, or a state directory
    with no store, is SystemNotRunningError."""
    from actors.client import Client
    from actors.runtime.system import SystemNotRunningError
    settings = settings_of(args)
    try:
        client = Client.connect(settings)
    except SystemNotRunningError as not_running:
        from pegasus.store import StoreError  # the store's modules: only when there is no system to ask
        from pegasus.store.reader import READS, StoreReader, answer_read
        if not isinstance(request, READS):
            raise
        try:
            reader = StoreReader.of_state_dir(settings.state_dir())
        except StoreError:
            raise not_running from None  # nothing to read either: the first reason stands
        try:
            return answer_read(reader, request, settings.retry.max_attempts)
        finally:
            reader.close()
    with client:
        return client.ask(request)
