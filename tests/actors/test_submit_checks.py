"""Submitted metadata the store could not keep gets a clear BadRequest, and the supervisor goes on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.client import Client, RequestError
from tests.actors.test_simple_system import settings_for


@pytest.fixture
def client(tmp_path: Path) -> Iterator[Client]:
    client = Client.start(settings_for(tmp_path), timeout=10)
    try:
        yield client
    finally:
        client.close()


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


@pytest.mark.parametrize("metadata,message", [
    ({"n": 2**70}, "metadata.n: integer 1.18e+21 is outside the 64-bit range"),
    (nested(900), "metadata is nested more than 32 levels deep"),
])
def test_metadata_msgpack_cannot_carry_is_a_bad_request(client: Client, metadata: dict, message: str) -> None:
    """Issue 15: 2**70 and 900 levels of nesting gave InternalError."""
    with pytest.raises(RequestError, match=message.replace(".", r"\.").replace("+", r"\+")) as refused:
        client.submit("x", metadata=metadata)
    assert refused.value.error_type == "BadRequest"
    with pytest.raises(RequestError, match=r"task 1: metadata\.n") as refused:
        client.submit_many(["fine", {"text": "bad", "metadata": {"n": 2**70}}])
    assert refused.value.error_type == "BadRequest" and client.list() == []  # all or none
    done = client.wait(client.submit("what is 1 + 1?", metadata={"ok": [1, 2]})["task_id"], timeout=20)
    assert done["lifecycle_state"] == "done"
