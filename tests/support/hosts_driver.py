"""A Client inside a host's namespace, driven by the test over pipes (tests/support/netns.py).

The test process lives in the machine's own network namespace and has no route
to the test's hosts, so it talks to a leader through this process, started with
``ip netns exec <leader ns> python -m tests.support.hosts_driver``: one JSON
line in (``{"op": "submit", "args": [...], "kwargs": {...}}``), one line out
(``{"ok": result}`` or ``{"error": "..."}``).  Settings come from the
environment (``PEGASUS_HOME``, its pegasus.toml) as for the CLI.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from actors.client import Client
from pegasus import config


def serve(client: Client) -> None:
    for line in sys.stdin:
        call = json.loads(line)
        try:
            result: Any = getattr(client, call["op"])(*call.get("args", ()), **call.get("kwargs", {}))
            reply = {"ok": result}
        except Exception as exc:  # noqa: BLE001 - the test reads the reason
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        sys.stdout.write(json.dumps(reply, default=str) + "\n")
        sys.stdout.flush()


def main() -> None:
    deadline = time.monotonic() + 60
    while True:  # a leader restarting may not listen yet
        try:
            client = Client.connect(config.load(None))
            break
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    sys.stdout.write(json.dumps({"ok": "ready"}) + "\n")
    sys.stdout.flush()
    try:
        serve(client)
    finally:
        client.close()


if __name__ == "__main__":
    main()
