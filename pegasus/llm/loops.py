"""A reply that repeats itself: where a streamed reply has written one passage over and over.

Greedy decoding lets a small model copy a block of text until ``max_tokens``; llama.cpp's repetition
penalties look back only 64 tokens, shorter than such a block, so the stream is watched instead
(pegasus.llm.stream stops it; docs/llm.md, "A reply that loops").  Pure: text in, a decision out.
"""

from __future__ import annotations

MIN_PASSAGE = 64  # characters: shorter repeats (a rule of dashes, a list's bullets) are never a loop
MAX_PASSAGE = 2000  # longer blocks are not looked for (the search stays cheap)
CHECK_EVERY = 32  # characters of new text between two looks


def loop_length(text: str, repeats: int) -> int:
    """How many characters of ``text`` are a loop: its end is one passage of MIN_PASSAGE to MAX_PASSAGE
    characters written ``repeats`` times in a row, and the copies after the first are what this returns
    (0: no loop, or ``repeats`` < 2)."""
    if repeats < 2 or len(text) < repeats * MIN_PASSAGE:
        return 0
    tail = text[-MIN_PASSAGE:]
    end = len(text) - MIN_PASSAGE  # an earlier copy of the tail ends at or before the tail begins
    lowest = max(0, len(text) - repeats * MAX_PASSAGE)
    for _ in range(4):  # the nearest few earlier copies of the tail: each a candidate passage length
        found = text.rfind(tail, lowest, end)
        if found < 0:
            return 0
        period = len(text) - MIN_PASSAGE - found
        if period * repeats <= len(text) and period <= MAX_PASSAGE and all(
                text[len(text) - (k + 1) * period:len(text) - k * period] == text[-period:]
                for k in range(1, repeats)):
            return (repeats - 1) * period
        end = found + MIN_PASSAGE - 1
    return 0


class LoopWatch:
    """A growing reply's end, looked at every CHECK_EVERY characters: ``looped`` once it is a loop.  Keeps
    only the last ``repeats`` * MAX_PASSAGE characters, so a long reply costs no more to watch."""

    def __init__(self, repeats: int) -> None:
        self.repeats = repeats
        self.looped = 0  # the characters of the copies after the first, once seen
        self._tail = ""
        self._unchecked = 0

    def add(self, text: str) -> bool:
        """Take the reply's next ``text``; whether the reply now ends in a loop."""
        if self.repeats < 2 or self.looped:
            return bool(self.looped)
        self._tail = (self._tail + text)[-self.repeats * MAX_PASSAGE:]
        self._unchecked += len(text)
        if self._unchecked >= CHECK_EVERY:
            self._unchecked = 0
            self.looped = loop_length(self._tail, self.repeats)
        return bool(self.looped)
