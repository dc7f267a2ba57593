"""What followers see of a model's reply while it is written: ``TextDelta``, and the answer inside it.

``TextDelta`` is one batch of a stage's streamed text, worker -> task actor -> supervisor ->
subscribers, never stored (the reply itself comes with the stage's result; a late subscriber gets
only what follows).  ``AnswerExtractor`` reads such text as it comes and gives back what a person
wants to see: the answer string of a JSON reply, decoded as it arrives, or the prose.  Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

ANSWER_KEYS = ("answer", "text")  # reason's {"answer"}; a classic plan's respond step {"text"}
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


@dataclass(frozen=True)
class TextDelta:
    """Streamed text of one llm stage of a task's run: piece ``seq`` (from 1) of the stage's
    request ``token``, written by its model call ``call`` (from 1: a reply that was fed back is
    asked again).  Not stored, not replayed (see the module docstring)."""

    task_id: str
    token: int
    stage: str
    seq: int
    text: str
    run: int = 0
    call: int = 1

    def __repr__(self) -> str:  # Thespian formats every message it sends: keep it short
        return f"TextDelta(task_id={self.task_id!r}, stage={self.stage!r}, seq={self.seq}, chars={len(self.text)})"


class AnswerExtractor:
    """Feed it a reply's text in pieces (``feed``); each call answers the answer text the piece completes.

    JSON (the reply starts with ``{``, a code fence before it allowed): the first string
    value of a key in ``keys``, at any depth, escapes decoded (a ``\\u`` escape split
    between pieces is kept until it is whole).  Anything else is prose: given back as is.
    """

    def __init__(self, keys: tuple[str, ...] = ANSWER_KEYS) -> None:
        self.keys = keys
        self.mode: str | None = None  # None until the first non-blank character: "json" or "prose"
        self.head = ""  # text before the mode is known (blanks, a code fence)
        self.done = False  # the answer string has ended
        self._stack: list[str] = []
        self._in_string = self._is_key = self._capture = False
        self._expect_key = False
        self._key: list[str] = []
        self._last_key = ""
        self._value_key: str | None = None  # the key whose value comes next
        self._escape: str | None = None  # an escape begun ("\\", "\\u00")
        self._high: str | None = None  # a high surrogate waiting for its low half

    def feed(self, text: str) -> str:
        if self.mode is None:
            text = self._start(text)
        if self.mode == "prose":
            return text
        return "".join(self._json(ch) for ch in text) if self.mode == "json" and not self.done else ""

    def _start(self, text: str) -> str:
        self.head += text
        stripped = self.head.lstrip()
        if stripped.startswith("```"):
            newline = stripped.find("\n")
            if newline < 0:
                return ""  # the fence's line is not complete yet
            stripped = stripped[newline + 1:].lstrip()
        if not stripped or stripped in ("`", "``"):
            return ""
        self.mode = "json" if stripped[0] == "{" else "prose"
        rest, self.head = (stripped if self.mode == "json" else self.head.lstrip()), ""
        return rest

    def _json(self, ch: str) -> str:
        if self.done:
            return ""
        if self._in_string:
            return self._string(ch)
        if ch == '"':
            self._in_string, self._key = True, []
            self._is_key = self._expect_key and bool(self._stack) and self._stack[-1] == "{"
            self._capture = not self._is_key and self._value_key in self.keys
            self._value_key = None
        elif ch in "{[":
            self._stack.append(ch)
            self._expect_key, self._value_key = ch == "{", None
        elif ch in "}]":
            if self._stack:
                self._stack.pop()
            self._expect_key, self._value_key = False, None
        elif ch == ",":
            self._expect_key = bool(self._stack) and self._stack[-1] == "{"
        elif ch == ":":
            self._expect_key, self._value_key = False, self._last_key
        elif not ch.isspace():
            self._value_key = None  # a number, true, false, null
        return ""

    def _string(self, ch: str) -> str:
        if self._escape is not None:
            self._escape += ch
            decoded = self._escaped()
            return "" if decoded is None else self._char(decoded)
        if ch == "\\":
            self._escape = ""
            return ""
        if ch == '"':
            self._in_string = False
            if self._is_key:
                self._last_key = "".join(self._key)
            elif self._capture:
                self._capture, self.done = False, True
            return ""
        return self._char(ch)

    def _escaped(self) -> str | None:
        """The character an escape stands for once it is whole (None: more to come)."""
        escape = self._escape or ""
        if escape[0] != "u":
            self._escape = None
            return _ESCAPES.get(escape[0], escape[0])
        if len(escape) < 5:
            return None
        self._escape = None
        try:
            code = int(escape[1:], 16)
        except ValueError:
            return "\ufffd"
        if 0xD800 <= code < 0xDC00:
            self._high = chr(code)
            return ""
        if 0xDC00 <= code < 0xE000 and self._high is not None:
            high, self._high = ord(self._high), None
            return chr(0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00))
        return chr(code)

    def _char(self, ch: str) -> str:
        if self._is_key:
            self._key.append(ch)
            return ""
        return ch if self._capture else ""
