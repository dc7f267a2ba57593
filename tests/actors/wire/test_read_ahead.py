"""read_ahead: the messages Thespian 4.0.1's transport has read for an actor and not yet handed over, read only
on the code it was written for (elsewhere none: what a carrier holds goes at once)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import actors.wire.thespian_patches as patches
from actors.wire import read_ahead as reading
from actors.wire.read_ahead import read_ahead
from actors.wire.thespian_patches.readers import READ_AHEAD


def _actor(*messages: str) -> SimpleNamespace:
    envelopes = [SimpleNamespace(message=message) for message in messages]
    return SimpleNamespace(_myRef=SimpleNamespace(transport=SimpleNamespace(_incomingEnvelopes=envelopes)))


def test_the_messages_waiting_oldest_first_and_none_without_a_transport() -> None:
    reading.envelopes_readable.cache_clear()
    assert read_ahead(_actor("a", "b")) == ["a", "b"]
    assert read_ahead(_actor()) == [] and read_ahead(SimpleNamespace()) == []


def test_where_thespian_differs_from_the_pinned_code_none_is_read_and_the_check_warns(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    target = next(t for t in READ_AHEAD.targets if t.name == "_processReceivedEnvelope")
    monkeypatch.setattr(target, "expected", "source 0")
    monkeypatch.setattr(patches, "_warned", set())
    reading.envelopes_readable.cache_clear()
    try:
        assert read_ahead(_actor("a")) == []
    finally:
        reading.envelopes_readable.cache_clear()
    checked = patches.verify()
    assert [p.name for p in checked.skipped()] == ["read_ahead"] and not checked.refused()
    assert capsys.readouterr().err == (
        "pegasus: warning: running without the Thespian speed patch read_ahead: "
        f"TCPTransport._processReceivedEnvelope is not the code the patch was written for ({target.found()}, "
        "expected source 0) (see docs/thespian-patches.md#read-ahead)\n")
