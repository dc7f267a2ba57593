"""docs/prometheus.yml and docs/pegasus-alerts.yml pass ``promtool check``; Debian's ``prometheus``, started by the
test with that config (its own port and data directory, the bearer token in a private file), scrapes a real
gateway and answers over its HTTP API with the gateway's series and the alert rules loaded.  Skipped, saying
so, without Debian's prometheus package."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from actors.runtime import procs
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration
DOCS = Path(__file__).resolve().parents[2] / "docs"


def _tools() -> None:
    if shutil.which("promtool") is None or shutil.which("prometheus") is None:
        pytest.skip("promtool or prometheus missing (Debian's prometheus package): the scrape config was not checked")


def _config(folder: Path, token: str, target: str) -> Path:
    """The documented config beside its rules and a token file, pointed at ``target``, scraping every second."""
    for name in ("prometheus.yml", "pegasus-alerts.yml"):
        shutil.copy(DOCS / name, folder / name)
    (folder / "pegasus-read.token").write_text(token + "\n")
    (folder / "pegasus-read.token").chmod(0o600)
    config = folder / "prometheus.yml"
    text = config.read_text().replace("127.0.0.1:8780", target).replace("15s", "1s")
    config.write_text(text)
    return config


def test_the_documented_config_and_rules_check_and_a_real_prometheus_scrapes_the_gateway(
        pegasus, tmp_path: Path) -> None:
    _tools()
    port = procs.free_port()
    client = pegasus(http={"enabled": True, "port": port})
    base = f"http://127.0.0.1:{port}"
    config = _config(tmp_path, client.token_create("prometheus", "read")["token"], f"127.0.0.1:{port}")
    for command in (["promtool", "check", "config", str(config)],
                    ["promtool", "check", "rules", str(tmp_path / "pegasus-alerts.yml")]):
        checked = subprocess.run(command, capture_output=True, text=True, timeout=60)
        assert checked.returncode == 0, checked.stdout + checked.stderr
    assert client.wait(client.submit("what is 2 + 2?")["task_id"], timeout=60)["lifecycle_state"] == "done"

    web = procs.free_port()
    with (tmp_path / "prometheus.log").open("wb") as log:
        prometheus = subprocess.Popen(
            ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
             f"--web.listen-address=127.0.0.1:{web}"], stdout=log, stderr=subprocess.STDOUT)
    try:
        api = f"http://127.0.0.1:{web}/api/v1"

        def query(expr: str) -> list[dict]:
            try:
                answer = httpx.get(f"{api}/query", params={"query": expr}, timeout=10)
            except httpx.TransportError:
                return []
            if answer.status_code != 200:  # 503 "Service Unavailable" (text) until its storage is ready
                return []
            return list(answer.json().get("data", {}).get("result", []))

        done = wait_for(lambda: query('pegasus_task_outcomes_total{outcome="done",machine="classic"} >= 1'),
                        timeout=90, what="prometheus to scrape the gateway")
        assert done[0]["metric"]["job"] == "pegasus"
        assert query('up{job="pegasus"}')[0]["value"][1] == "1"
        assert query("pegasus_build_info") and query("process_resident_memory_bytes")
        rules = httpx.get(f"{api}/rules", timeout=10).json()["data"]["groups"]
        assert {rule["name"] for group in rules for rule in group["rules"]} >= {"PegasusTasksFailing", "PegasusDown"}
        assert httpx.get(base + "/healthz", timeout=10).status_code == 200
    finally:
        prometheus.terminate()
        try:
            prometheus.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prometheus.kill()
            prometheus.wait(timeout=30)
