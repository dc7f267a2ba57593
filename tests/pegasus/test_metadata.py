"""Task metadata: only JSON values msgpack can carry are kept; every refusal names where and why."""

from __future__ import annotations

import json

import msgpack
import pytest

from pegasus.metadata import INT64_MAX, INT64_MIN, MAX_DEPTH, check_metadata


def nested(levels: int) -> dict:
    value: dict = {}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_plain_json_metadata_is_accepted_and_measured() -> None:
    metadata = {"workspace": "/w", "tags": ["a", 1, 2.5, True, None], "n": INT64_MAX, "m": INT64_MIN,
                "deep": nested(MAX_DEPTH - 1), "é": "ü"}
    assert check_metadata(metadata, max_bytes=10_000) == len(json.dumps(metadata, ensure_ascii=False).encode())
    msgpack.packb(metadata)  # what is accepted, msgpack carries


def nested_lists(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


@pytest.mark.parametrize("metadata,message", [
    ({"n": 2**70}, r"metadata\.n: integer 1\.18e\+21 is outside the 64-bit range"),
    ({"list": [0, -(2**63) - 1]}, r"metadata\.list\[1\]: integer .* is outside the 64-bit range"),
    (nested(900), rf"metadata is nested more than {MAX_DEPTH} levels deep \(at metadata\.a\.a"),
    ({"x": nested_lists(MAX_DEPTH)}, rf"nested more than {MAX_DEPTH} levels deep \(at metadata\.x\[0\]"),
    ({"f": float("nan")}, r"metadata\.f: nan is not a JSON number"),
    ({"s": {1, 2}}, r"metadata\.s: set is not a JSON type"),
    ({"b": b"bytes"}, r"metadata\.b: bytes is not a JSON type"),
    ({"k": {3: "x"}}, r"metadata\.k: keys must be strings, got int 3"),
    ({"big": "x" * 200}, r"metadata is 21\d bytes as JSON; the limit is 100"),
    (["not", "a", "dict"], "metadata must be an object"),
])
def test_values_msgpack_cannot_carry_are_refused_by_name(metadata: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_metadata(metadata, max_bytes=100)


def test_a_very_deep_value_does_not_exhaust_the_stack() -> None:
    with pytest.raises(ValueError, match="nested more than"):
        check_metadata(nested(100_000), max_bytes=10**9)
