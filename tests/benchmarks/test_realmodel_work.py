"""The realmodel benchmark compares equal work (issue 30): its ratio once set 6,245 completion tokens
through Pegasus against 2,311 straight, where the server cut the straight streams short.  Only replies
answered whole are sent straight, one at a time when the server decodes one at a time."""

from __future__ import annotations

import json

from benchmarks.realmodel import _tokens, serial

STREAM = "text/event-stream"


def _stream(*chunks: dict) -> bytes:
    return b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"


def _piece(text: str, finish: str | None = None) -> dict:
    return {"choices": [{"delta": {"content": text}, "finish_reason": finish}]}


def test_a_stream_cut_short_is_not_whole() -> None:
    assert _tokens(_stream(_piece("4"), _piece("2"), _piece("", "stop")), STREAM) == (2, True)
    assert _tokens(_stream(_piece("4"), _piece("2")), STREAM) == (2, False)  # [DONE] without a finish_reason
    body = json.dumps({"usage": {"completion_tokens": 7}}).encode()
    assert _tokens(body, "application/json") == (7, True)


def test_a_cut_stream_says_the_server_is_serial() -> None:
    whole = {"status": 200, "whole": True}
    assert not serial([whole, {"status": 500, "whole": False}])  # a refusal is not a cut
    assert serial([whole, {"status": 200, "whole": False}])
