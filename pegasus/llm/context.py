"""The context budget: a stage's messages made to fit the model's window before they are sent.

It estimates a request's tokens and, past ``context_window``, shrinks it in three moves, each only
when the one before did not suffice: older tool results cut, earlier tool rounds summarised
(``summarise`` is passed in), the longest messages left cut (docs/llm.md, "Context budget").  Each
fit is noted for the stage's record.  It must not call the model itself or change the system prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from pegasus.config import LLMSettings
from pegasus.llm.ratelimit import CHARS_PER_TOKEN, DEFAULT_OUTPUT_TOKENS

MESSAGE_OVERHEAD_TOKENS = 4  # role and separators of one chat message
KEEP_CHARS = 600  # what is left of an older tool result once cut
LINE_CHARS = 160  # a tool result in a mechanical summary
SUMMARISE_OVERHEAD_TOKENS = 100  # the summary call's own instructions and messages
SUMMARY_SHOWN_CHARS = 2000  # of a summary, in the stage's note
SUMMARY_PREFIX = "Summary of the earlier tool calls and their results (shortened to fit the context window):\n"
SUMMARISE_PROMPT = ("Summarise these tool calls and results for the agent that made them: keep every fact, "
                    "number, name and error it may need to finish its task; drop repetition.  Plain text, "
                    "at most {words} words.")

Summarise = Callable[[list[dict[str, Any]]], str]  # messages -> the model's text (raises on failure)


# -- estimating ------------------------------------------------------------------------------------


def _chars(value: Any) -> int:
    if value is None:
        return 0
    return len(value) if isinstance(value, str) else len(json.dumps(value, ensure_ascii=False, default=str))


def message_tokens(message: dict[str, Any]) -> int:
    chars = _chars(message.get("content")) + _chars(message.get("tool_calls"))
    return MESSAGE_OVERHEAD_TOKENS + -(-chars // CHARS_PER_TOKEN)


def request_tokens(messages: Sequence[dict[str, Any]], tools: Sequence[Any] = ()) -> int:
    """The prompt's estimated tokens: its messages and the tool schemas sent with them."""
    return sum(message_tokens(m) for m in messages) + (-(-_chars(list(tools)) // CHARS_PER_TOKEN) if tools else 0)


def prompt_limit(config: LLMSettings) -> int:
    """Tokens the prompt may take: the window less the output cap (servers count both); 0: no limit.
    A cap as large as the window leaves the prompt half of it (the endpoint will judge the cap)."""
    window = config.context_window
    if not window:
        return 0
    output = config.max_output_tokens or DEFAULT_OUTPUT_TOKENS
    return window - (output if output < window else window // 2)


# -- shrinking -------------------------------------------------------------------------------------


def cut(text: str, keep: int) -> str:
    """``text`` shortened to about ``keep`` characters: its head and tail, and what was cut between."""
    if len(text) <= keep:
        return text
    head, tail = keep * 2 // 3, keep // 3
    return f"{text[:head]}\n[... {len(text) - head - tail} characters cut to fit the context window ...]\n" + (
        text[len(text) - tail:] if tail else "")


@dataclass(frozen=True)
class Fitted:
    messages: list[dict[str, Any]]
    note: dict[str, Any] | None  # None: it fitted as it was


def _rounds(messages: list[dict[str, Any]]) -> list[tuple[int, int]]:
    """(start, end) of each tool round: an assistant message with tool calls and the tool messages after it."""
    rounds, i = [], 0
    while i < len(messages):
        if messages[i].get("role") == "assistant" and messages[i].get("tool_calls"):
            end = i + 1
            while end < len(messages) and messages[end].get("role") == "tool":
                end += 1
            rounds.append((i, end))
            i = end
        else:
            i += 1
    return rounds


def _round_lines(messages: list[dict[str, Any]], result_chars: int) -> list[str]:
    lines = []
    for message in messages:
        if message.get("role") == "assistant":
            for call in message.get("tool_calls") or []:
                function = call.get("function") or {}
                lines.append(f"- called {function.get('name')}({cut(str(function.get('arguments')), result_chars)})")
        elif message.get("role") == "tool":
            lines.append(f"  result: {cut(str(message.get('content')), result_chars)}")
        elif message.get("content"):
            lines.append(f"- {cut(str(message['content']), result_chars)}")
    return lines


def mechanical_summary(messages: list[dict[str, Any]], chars: int) -> str:
    """A line per call and result, each result cut, the whole cut to ``chars``."""
    return cut("\n".join(_round_lines(messages, LINE_CHARS)), max(chars, KEEP_CHARS))


def _fits(messages: list[dict[str, Any]], fixed: int, limit: int) -> bool:
    return fixed + request_tokens(messages) <= limit


def fit(messages: Sequence[dict[str, Any]], limit: int, *, fixed: int = 0,
        summarise: Summarise | None = None) -> Fitted:
    """``messages`` within ``limit`` prompt tokens (``fixed``: what the tools schemas take), and what was done."""
    before = fixed + request_tokens(messages)
    if not limit or before <= limit:
        return Fitted(list(messages), None)
    out = [dict(m) for m in messages]
    note: dict[str, Any] = {"limit_tokens": limit, "estimated_tokens": before}
    truncated = 0
    results = [i for i, m in enumerate(out) if m.get("role") == "tool"]
    for i in results[:-1]:  # oldest first; the newest result stays whole
        if _fits(out, fixed, limit):
            break
        if _chars(out[i].get("content")) > KEEP_CHARS:
            out[i] = {**out[i], "content": cut(str(out[i].get("content")), KEEP_CHARS)}
            truncated += 1
    note["truncated_results"] = truncated
    rounds = _rounds(out)
    if not _fits(out, fixed, limit) and len(rounds) > 1:
        start, end = rounds[0][0], rounds[-2][1]
        older = out[start:end]
        room = max(limit - fixed - request_tokens(out[:start] + out[end:]), 0) * CHARS_PER_TOKEN
        summary = _summary(older, room, limit, summarise, note)
        out[start:end] = [{"role": "user", "content": SUMMARY_PREFIX + summary}]
        note["summarised_messages"] = len(older)
    cuts = 0
    while not _fits(out, fixed, limit):
        # The longest message left but the system prompt: cut it by what is over (and a margin).
        candidates = [i for i, m in enumerate(out) if i > 0 and isinstance(m.get("content"), str)
                      and len(m["content"]) > KEEP_CHARS]
        if not candidates:
            break  # nothing more to cut: the endpoint decides
        i = max(candidates, key=lambda n: len(out[n]["content"]))
        over = (fixed + request_tokens(out) - limit) * CHARS_PER_TOKEN + 200
        out[i] = {**out[i], "content": cut(out[i]["content"], max(KEEP_CHARS, len(out[i]["content"]) - over))}
        cuts += 1
    if cuts:
        note["cut_messages"] = cuts
    note["fitted_tokens"] = fixed + request_tokens(out)
    return Fitted(out, note)


def _summary(older: list[dict[str, Any]], room_chars: int, limit: int, summarise: Summarise | None,
             note: dict[str, Any]) -> str:
    budget = max(room_chars * 3 // 4, KEEP_CHARS)  # the summary's own share of what is left
    if summarise is not None:
        words = max(budget // 8, 30)
        # What the summariser is shown must fit the same window (less its own instructions).
        shown = cut("\n".join(_round_lines(older, KEEP_CHARS * 4)),
                    max(limit - SUMMARISE_OVERHEAD_TOKENS, KEEP_CHARS // CHARS_PER_TOKEN) * CHARS_PER_TOKEN)
        try:
            text = summarise([{"role": "system", "content": SUMMARISE_PROMPT.format(words=words)},
                              {"role": "user", "content": shown}]).strip()
            if not text:
                raise ValueError("the summary was empty")
            note["summary_by"] = "model"
            note["summary"] = text[:SUMMARY_SHOWN_CHARS]
            return cut(text, budget)
        except Exception as exc:  # noqa: BLE001 - any failure of the summary call: the mechanical one
            note["summary_error"] = f"{type(exc).__name__}: {exc}"[:300]
    text = mechanical_summary(older, budget)
    note["summary_by"] = "mechanical"
    note["summary"] = text[:SUMMARY_SHOWN_CHARS]
    return text


# -- the notes of one stage ------------------------------------------------------------------------

_NOTES: ContextVar[list[dict[str, Any]] | None] = ContextVar("pegasus_context_notes", default=None)


@contextmanager
def noting() -> Iterator[list[dict[str, Any]]]:
    """Collect the fits made inside the block (run_stage opens one per stage)."""
    notes: list[dict[str, Any]] = []
    token = _NOTES.set(notes)
    try:
        yield notes
    finally:
        _NOTES.reset(token)


def fit_call(config: LLMSettings, stage: str, messages: list[dict[str, Any]], tools: Sequence[Any],
             summarise: Summarise | None) -> list[dict[str, Any]]:
    """The messages of one call of ``stage`` fitted to ``config.context_window``; a fit is noted."""
    limit = prompt_limit(config)
    if not limit:
        return messages
    fitted = fit(messages, limit, fixed=request_tokens([], tools), summarise=summarise)
    if fitted.note is not None:
        notes = _NOTES.get()
        if notes is not None:
            notes.append({"stage": stage, "window": config.context_window, **fitted.note})
    return fitted.messages
