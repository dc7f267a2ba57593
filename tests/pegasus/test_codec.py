"""The codec refuses what is not a Pegasus record, with a clear error."""

from __future__ import annotations

import msgpack
import pytest

from pegasus import codec
from pegasus.errors import CodecError
from pegasus.task import Plan, TaskContext


@pytest.mark.parametrize("data,message", [
    (b"\xc1garbage", "not msgpack"),
    (msgpack.packb([1, 2]), "no envelope"),
    (msgpack.packb({"pegasus": 99, "type": "Plan", "data": {}}), "unsupported record version 99"),
    (msgpack.packb({"pegasus": 1, "type": "Spaceship", "data": {}}), "unknown record type"),
    (msgpack.packb({"pegasus": 1, "type": "Plan", "data": {"goal": 3}}), "invalid Plan record"),
    ("text", "expected bytes"),
])
def test_bad_bytes_give_clear_errors(data, message: str) -> None:
    with pytest.raises(CodecError, match=message):
        codec.decode(data)


def test_truncated_record_is_refused() -> None:
    blob = codec.encode(TaskContext(input_text="a" * 100))
    with pytest.raises(CodecError):
        codec.decode(blob[:-10])


def test_expected_type_is_enforced() -> None:
    with pytest.raises(CodecError, match="expected a TaskContext"):
        codec.decode(codec.encode(Plan(goal="g")), TaskContext)
