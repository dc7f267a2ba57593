"""The incremental answer extractor (pegasus.streaming): what `pegasus run` prints while a reply is written."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pegasus.streaming import AnswerExtractor


def fed(pieces: list[str]) -> tuple[list[str], str]:
    extractor = AnswerExtractor()
    out = [extractor.feed(piece) for piece in pieces]
    return out, "".join(out)


def test_the_answer_of_a_json_reply_comes_out_as_its_pieces_arrive() -> None:
    """Each piece gives back the answer characters it completes, nothing of the other keys."""
    out, text = fed(['{"thought": "easy", "ans', 'wer": "Forty', '-two', '.", "x": 1}'])
    assert out == ["", "Forty", "-two", "."]
    assert text == "Forty-two."


def test_escapes_are_decoded_even_when_split_between_pieces() -> None:
    """\\n, \\", \\\\ and \\u escapes (a surrogate pair too), each cut in the middle."""
    reply = json.dumps({"answer": 'line 1\nline "2" \\ caf\u00e9 \U0001F600'}, ensure_ascii=True)
    for cut in range(len(reply)):
        assert fed([reply[:cut], reply[cut:]])[1] == 'line 1\nline "2" \\ caf\u00e9 \U0001F600'


def test_only_the_answer_value_counts_not_a_key_or_a_string_that_says_answer() -> None:
    _, text = fed(['{"thought": "the answer is below", "answer_count": 2, "steps": [], "answer": "yes"}'])
    assert text == "yes"
    _, nested = fed(['{"goal": "g", "steps": [{"action_type": "respond", "text": "from the plan"}]}'])
    assert nested == "from the plan"
    _, none = fed(['{"answer": null, "need_more_info": true, "question": "which one?"}'])
    assert none == ""


def test_a_code_fence_before_the_json_is_skipped_and_prose_passes_through() -> None:
    assert fed(["```js", 'on\n{"answer": "fenced"}\n```'])[1] == "fenced"
    assert fed(["  Sure! ", "17 * 23 = 391."])[1] == "Sure! 17 * 23 = 391."


def test_after_the_answer_ends_nothing_more_is_given() -> None:
    out, text = fed(['{"answer": "one"', ', "text": "two"}'])
    assert text == "one" and out[1] == ""


@given(st.text(max_size=40), st.lists(st.integers(min_value=0, max_value=200), max_size=6))
def test_any_answer_in_any_pieces_comes_out_whole(answer: str, cuts: list[int]) -> None:
    reply = json.dumps({"thought": "t", "answer": answer})
    points = sorted({min(c, len(reply)) for c in cuts})
    pieces = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)])]
    assert fed(pieces)[1] == answer


@pytest.mark.parametrize("reply", ['{"answer": "\\uZZZZ"}'])
def test_a_bad_escape_is_replaced_not_raised(reply: str) -> None:
    assert fed([reply])[1] == "\ufffd"
