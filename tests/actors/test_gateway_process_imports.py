"""The HTTP gateway process (``actors.client.gateway``) is a client of the supervisor: it loads no actor.

It read its settings through the guardian's module and its environment's names through the gateway
keeper's, and so held the guardian, the supervisor, the task actor, the pools and the workers
(689 modules against 552).  Its settings come from ``actors.runtime.settings``, its environment's names
from ``actors.messages.gateway``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ACTORS = ("actors.guardian", "actors.gateway_keeper", "actors.supervisor", "actors.task_actor", "actors.pool",
          "actors.worker", "actors.mcp_host")


def test_the_gateway_process_imports_no_actor() -> None:
    probe = "import json, sys, actors.client.gateway; print(json.dumps(sorted(sys.modules)))"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120,
                          check=True)
    modules = json.loads(done.stdout)
    held = [name for name in modules if any(name == a or name.startswith(a + ".") for a in ACTORS)]
    assert held == [], held
