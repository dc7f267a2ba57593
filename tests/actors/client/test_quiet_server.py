"""The quiet server stands in for uvicorn's loop only on the uvicorn it was written for (actors/client/quiet_server.py):
every pinned fingerprint is the installed uvicorn's, the test extra pins its version, and another version, changed code
or a setting only the tick serves gives uvicorn's own server after a warning.  (The gateway on a changed uvicorn,
through real processes: tests/integration/test_quiet_server.py.)"""

from __future__ import annotations

import configparser
import re
from pathlib import Path

import pytest
import uvicorn

from actors.client import quiet_server
from actors.wire.thespian_patches.base import Target

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("target", quiet_server.TARGETS, ids=[t.label for t in quiet_server.TARGETS])
def test_every_pinned_fingerprint_is_the_installed_uvicorns(target: Target) -> None:
    assert target.found() == target.expected


def test_the_test_extra_pins_the_uvicorn_the_quiet_server_is_written_for_and_users_get_any() -> None:
    cfg = configparser.ConfigParser()
    cfg.read(REPO / "setup.cfg")
    def uvicorns(lines: str) -> list[str]:
        return [line.strip() for line in lines.splitlines() if line.strip().startswith("uvicorn")]
    assert uvicorns(cfg["options.extras_require"]["test"]) == [f"uvicorn=={quiet_server.PINNED}"]
    assert uvicorns(cfg["options"]["install_requires"]) == ["uvicorn>=0.29"]
    assert uvicorn.__version__ == quiet_server.PINNED


@pytest.fixture(autouse=True)
def _pristine_uvicorn(monkeypatch: pytest.MonkeyPatch) -> None:
    """uvicorn as imported: sse_starlette (which the MCP client imports, in this process through other tests)
    replaces ``Server.handle_exit`` on import; a gateway, which never imports it, sees uvicorn's own."""
    for target in quiet_server.TARGETS:
        monkeypatch.setattr(target.owner, target.name, target.original)


def test_a_handle_exit_replaced_by_another_library_gets_uvicorns_own_server_after_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sse_starlette.sse  # replaces Server.handle_exit as it is imported (the MCP SDK imports it)
    monkeypatch.setattr(uvicorn.Server, "handle_exit", sse_starlette.sse.AppStatus.handle_exit)
    chosen, warned = _chosen(uvicorn.Config(app=None))
    assert type(chosen) is uvicorn.Server
    assert warned == [f"Server.handle_exit was replaced by something other than Pegasus (see {quiet_server.DOCS})"]


def _chosen(config: uvicorn.Config) -> tuple[uvicorn.Server, list[str]]:
    warned: list[str] = []
    return quiet_server.server(config, warned.append), warned


def test_the_pinned_uvicorn_gets_the_quiet_server_silently() -> None:
    chosen, warned = _chosen(uvicorn.Config(app=None))
    assert type(chosen) is quiet_server.QuietServer and warned == []


def test_another_version_changed_code_or_a_tick_setting_gets_uvicorns_own_server_after_a_warning(
        monkeypatch: pytest.MonkeyPatch) -> None:
    see = f" (see {quiet_server.DOCS})"
    with monkeypatch.context() as patched:
        patched.setattr(quiet_server.TARGETS[0], "expected", "source 0")
        chosen, warned = _chosen(uvicorn.Config(app=None))
        assert type(chosen) is uvicorn.Server
        assert warned == [f"Server.main_loop is not the code the patch was written for "
                          f"({quiet_server.TARGETS[0].found()}, expected source 0){see}"]
    with monkeypatch.context() as patched:
        patched.setattr(uvicorn, "__version__", "0.55.0")
        assert _chosen(uvicorn.Config(app=None))[1] == [
            f"uvicorn 0.55.0 is installed; the quiet server is written for {quiet_server.PINNED}{see}"]
    chosen, warned = _chosen(uvicorn.Config(app=None, limit_max_requests=10))
    assert type(chosen) is uvicorn.Server
    assert warned == [f"limit_max_requests and callback_notify are the tick's to serve{see}"]


def test_the_warning_points_to_a_section_of_the_docs() -> None:
    path, anchor = quiet_server.DOCS.split("#")
    headings = re.findall(r"^#+ (.+)$", (REPO / path).read_text(), flags=re.MULTILINE)
    assert anchor in {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
