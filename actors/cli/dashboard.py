"""``pegasus dashboard``: the address of the running system's web dashboard, opened in a browser when there is
one (docs/dashboard.md). The token is never part of it: the page asks for it."""

from __future__ import annotations

import argparse
import os
import ssl
import urllib.error
import urllib.request
import webbrowser
from typing import Any

from actors.cli.base import EXIT_OK, emit, settings_of
from pegasus.config import HttpSettings
from pegasus.errors import PegasusError

ANY_ADDRESS = frozenset({"0.0.0.0", "::", ""})


class DashboardNotServed(PegasusError):
    """No gateway answers where the running system's settings say it listens."""


def address(http: HttpSettings) -> str:
    """The dashboard's address for a browser on this machine."""
    host = "127.0.0.1" if http.bind in ANY_ADDRESS else http.bind
    host = f"[{host}]" if ":" in host else host
    return f"{'https' if http.tls_cert else 'http'}://{host}:{http.port}/"


def _answers(url: str) -> bool:
    # Only whether the gateway is up: /healthz takes no token, and nothing secret is sent.
    context = ssl._create_unverified_context() if url.startswith("https") else None  # a self-signed cert is fine here
    try:
        with urllib.request.urlopen(url + "healthz", timeout=5, context=context) as response:
            return bool(response.status < 500)
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except (OSError, ValueError):
        return False


def dashboard(args: argparse.Namespace) -> int:
    settings = settings_of(args)
    try:  # the running system's own settings (pegasus start --http PORT writes its port there)
        from actors.runtime.settings import read_settings  # imported when used: no cost of other commands
        settings = read_settings(settings.state_dir())
    except PegasusError:
        pass
    url = address(settings.http)
    if not settings.http.enabled or not _answers(url):
        raise DashboardNotServed(f"no HTTP gateway answers at {url}: start the system with it "
                                 "(pegasus start --http PORT, or [http] enabled = true)")
    emit(args, {"url": url}, f"{url}\nlog in with a token of `pegasus token create NAME`")
    if not args.no_open and not args.json and (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
        webbrowser.open(url)
    return EXIT_OK


def add_command(sub: Any, parent: argparse.ArgumentParser) -> None:
    """``pegasus dashboard [--no-open]``."""
    p = sub.add_parser("dashboard", parents=[parent], help="the web dashboard's address (opened in a browser)",
                       description="Print the address of the running system's web dashboard and open it in a browser "
                                   "when there is a display (docs/dashboard.md).")
    p.add_argument("--no-open", action="store_true", help="print the address only")
    p.set_defaults(handler=dashboard)
