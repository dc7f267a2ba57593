"""A real OTLP/HTTP receiver for the trace tests: OtelTap (PyPI ``oteltap``, a native receiver that decodes
with the official ``opentelemetry-proto`` messages), run as its own process on 127.0.0.1.

``python -m oteltap --port P`` prints every span it receives as one JSON line (OTLP's JSON mapping:
hex ids, ``attributes`` as key/value pairs); ``spans()`` reads them back as plain dicts.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from actors.runtime import procs
from tests.support.waiting import wait_for


def need_telemetry() -> None:
    """Skip, saying so, without the ``telemetry`` extra and the receiver (.ci/run installs them)."""
    for module, what in (("opentelemetry.sdk", "opentelemetry-sdk"),
                         ("opentelemetry.exporter.otlp.proto.http", "opentelemetry-exporter-otlp-proto-http"),
                         ("oteltap", "oteltap (the OTLP receiver)")):
        pytest.importorskip(module, reason=f"{what} is not installed: pip install -e '.[telemetry,test]'")


class Receiver:
    def __init__(self, root: Path) -> None:
        self.port = procs.free_port()
        self.out = root / "otlp-spans.ndjson"
        self._file = self.out.open("wb")
        self.process = subprocess.Popen([sys.executable, "-u", "-m", "oteltap", "--port", str(self.port)],
                                        stdout=self._file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        wait_for(lambda: b"Listening" in self.out.read_bytes() or self.process.poll() is not None, 60,
                 "the OTLP receiver to listen")
        assert self.process.poll() is None, self.out.read_text()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1/traces"

    def spans(self) -> list[dict[str, Any]]:
        spans = []
        for line in self.out.read_text().splitlines():
            if line.startswith("{"):
                span = json.loads(line)
                span["attributes"] = {a["key"]: _value(a["value"]) for a in span.get("attributes", [])}
                spans.append(span)
        return spans

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self._file.close()


def _value(value: dict[str, Any]) -> Any:
    (kind, inner), = value.items()
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [_value(v) for v in inner.get("values", [])]
    return inner
