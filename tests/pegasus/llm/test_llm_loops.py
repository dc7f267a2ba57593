"""A reply that repeats itself (pegasus.llm.loops): a passage written over and over at its end is found
where it begins; text that only repeats a little, or in short pieces, is not a loop."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from pegasus.llm.loops import MAX_PASSAGE, MIN_PASSAGE, LoopWatch, loop_length

# The block SmolLM2-135M wrote 8 times for "echo pegasus" (the real-model test), after some prose.
BLOCK = ('{\n    "description": "This is a JSON response. You can use it as a template to create new tasks with '
         'your desired action and return them as a JSON object.",\n    "steps": [\n        {\n            '
         '"action_type": "tool_call",\n            "text": "The goal is to make this task easier."}\n},\n')
CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
prefixes = st.text(alphabet="abcdefghij .\n", max_size=200)  # never a copy of a passage
passages = st.lists(CJK, unique=True, min_size=MIN_PASSAGE, max_size=MIN_PASSAGE * 3).map("".join)


def test_the_looping_plan_of_smollm2_is_found_after_three_copies_and_not_before() -> None:
    prose = "A step may instead start a sub-task, which is nested at most 3 deep.\nYou are correct.\n"
    assert loop_length(prose + BLOCK * 2, 3) == 0
    assert loop_length(prose + BLOCK * 3, 3) == 2 * len(BLOCK)
    assert loop_length(prose + BLOCK * 3 + BLOCK[:50], 3) == 2 * len(BLOCK)  # mid-copy: the same passage, turned
    assert loop_length(prose + BLOCK * 8, 0) == loop_length(prose + BLOCK * 8, 1) == 0  # off


@settings(max_examples=40)
@given(prefix=prefixes, passage=passages, repeats=st.integers(2, 6), extra=st.integers(0, 3))
def test_a_passage_written_repeats_times_is_a_loop_and_one_copy_is_kept(prefix: str, passage: str, repeats: int,
                                                                       extra: int) -> None:
    text = prefix + passage * (repeats + extra)
    looped = loop_length(text, repeats)
    assert looped == (repeats - 1) * len(passage)
    assert text[:len(text) - looped].endswith(passage)


@settings(max_examples=40)
@given(prefix=prefixes, passage=passages, repeats=st.integers(2, 6))
def test_fewer_copies_are_no_loop(prefix: str, passage: str, repeats: int) -> None:
    assert loop_length(prefix + passage * (repeats - 1), repeats) == 0


@settings(max_examples=40)
@given(unit=st.text(min_size=1, max_size=MIN_PASSAGE - 1), copies=st.integers(1, 40))
def test_short_pieces_repeated_a_few_times_are_no_loop(unit: str, copies: int) -> None:
    """A rule of dashes, bullets, a short line written again: under MIN_PASSAGE * repeats characters in
    all, never a loop."""
    text = (unit * copies)[:3 * MIN_PASSAGE - 1]
    assert loop_length(text, 3) == 0


def test_the_watch_looks_every_few_characters_and_remembers() -> None:
    watch = LoopWatch(3)
    seen = [watch.add(BLOCK[i:i + 8]) for _ in range(4) for i in range(0, len(BLOCK), 8)]
    assert seen[-1] and not any(seen[:len(seen) * 3 // 4 - 1]) and watch.looped == 2 * len(BLOCK)
    assert watch.add("anything after") and not LoopWatch(0).add(BLOCK * 5)


def test_a_long_reply_is_watched_by_its_last_characters_only() -> None:
    """A reply of 200,000 characters before it loops is still found looping, by its end alone."""
    watch = LoopWatch(3)
    words = "".join(f"word {n} " for n in range(25_000))
    assert not any(watch.add(words[i:i + 16]) for i in range(0, len(words), 16))
    assert len(watch._tail) == 3 * MAX_PASSAGE
    assert any(watch.add(BLOCK[i:i + 8]) for _ in range(4) for i in range(0, len(BLOCK), 8))  # seen by the 4th
