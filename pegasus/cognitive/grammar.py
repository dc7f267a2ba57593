"""The request grammar of the offline processors: intents and entities in plain text.

``perceive_text(text)`` finds, in text order, tool requests (arithmetic, list a
directory, read a file, count lines/words/characters, echo, sleep, and
``call TOOL {json args}`` for any registered tool; ``in parallel: A; B`` asks for a sub-task per part) and entities (numbers,
expressions, paths, quoted text).  Pure; every pattern runs in linear time.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from pegasus.tools.builtin import is_expression

# -- the request grammar --------------------------------------------------------------
_QUOTE = re.compile(r'"([^"]*)"|“([^”]*)”|`([^`]*)`|(?<!\w)\'([^\'\n]+)\'(?!\w)')
_QPH = r"⟦\d+⟧_*"  # a masked quotation, as long as the quotation it hides
_PATH = (r"(?:(?<![\w./~\-])(?=[\w.\-~/]*[A-Za-z_~])(?:(?:~|\.{1,2})?/[\w.\-~/]*[\w~/]"
         r"|[\w\-]+(?:/[\w.\-]*[\w\-])+/?|[\w\-]+(?:\.[\w\-]+)*\.[A-Za-z]\w{0,7}(?!\w)|\.[A-Za-z][\w.\-]*\w)"
         r"|(?<![\w./])\.{1,2}(?![\w./]))")
_FILLER = (r"(?:me|us|the|a|an|file|files|contents?|of|text|in|inside|under|to|and|then|it|this|that"
           r"|directory|dir|folder|all|entries|everything)")
_BARE = rf"(?!{_FILLER}\b)[\w.\-~/]*\w[\w.\-~/]*"
_STRONG = rf"(?P<target>{_QPH}|{_PATH}|{_BARE})"  # after read/cat/list: any token names a file
_WEAK = rf"(?P<target>{_QPH}|{_PATH})"  # after show/print: only what looks like a path
_UNIT = r"\b(?:words?|lines?|char(?:acter)?s?|letters?)\b"
_VERB = (r"(?:compute|calculate|evaluate|what\s+is|what's|count|how\s+many|read|cat|open|show|display"
         r"|print|view|list|ls|sleep|wait|pause|echo|say|repeat)\b")
_READ_FILLER = r"(?:\s+(?:me|us|the|file|contents?|of|text))*\s+"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(rx, re.I)) for name, rx in (
    ("sleep", r"\b(?:sleep|wait|pause)\s+(?:for\s+)?(?P<num>\d+(?:\.\d+)?|\.\d+)\s*"
              r"(?P<unit>ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)?(?!\w)"),
    ("count", rf"(?:\bcount\b(?P<u1>(?:\s*(?:,|&|\band\b|\bthe\b|\ball\b|\bnumber\b|\bof\b|{_UNIT}))*)"
              rf"|\bhow\s+many\b(?P<u2>(?:\s*(?:,|&|\band\b|{_UNIT}))+)(?:\s+(?:are|is|there))*"
              rf"|\b(?P<u3>{_UNIT})\s+count\b)\s+(?:in|of|for)\s+(?:the\s+)?(?:(?:file|text|string)\s+)?{_STRONG}"),
    ("read_file", rf"\b(?:read|cat|open)\b{_READ_FILLER}{_STRONG}"),
    ("read_file", rf"\b(?:show|display|print|view)\b{_READ_FILLER}{_WEAK}"),
    ("list_dir", r"\b(?:list|ls)\b(?:\s+-\w+)*(?:\s+(?:me|the|all|of|files?|entries|contents?|directory|dir"
                 rf"|folder|in|inside|under|everything))*(?:\s+(?:-\w+\s+)*{_STRONG})?"),
    ("list_dir", r"\b(?:files?|entries)\s+(?:are\s+)?(?:in|inside|under)\s+(?:the\s+)?"
                 rf"(?:(?:directory|dir|folder)\s+)?{_STRONG}"),
))
_ECHO = re.compile(r"\b(?:echo|say|repeat)\b[:,]?\s+(?=\S)", re.I)
_ECHO_END = re.compile(rf"\s*[;\n]|(?:[.!?]?\s+(?:and\s+then|and|then|also)\s+|[.!?]\s+|,\s*(?:and\s+|then\s+)?)"
                       rf"(?={_VERB})",
                       re.I)
_CLAUSE_START = re.compile(r"(?:^|[;,.:!?\n]|\b(?:and|then|also|please|now))$", re.I)
_MATH_WORDS = re.compile(r"\b(?:compute|calculate|evaluate|eval|what\s+is|what's|whats|how\s+much|solve)\b", re.I)
_WORD_OPS = re.compile(r"(?<=[\d)])\s+(plus|minus|times|multiplied\s+by|divided\s+by|over|mod(?:ulo)?"
                       r"|to\s+the\s+power\s+of)\s+(?=[\d(.\-])", re.I)
_OPS = {"plus": "+", "minus": "-", "times": "*", "multiplied": "*", "divided": "/", "over": "/",
        "mod": "%", "modulo": "%", "to": "**"}
# Starts only where a run of prefix characters starts, and never backtracks: linear on any input.
_EXPR = re.compile(r"(?:(?<![\-+(\s])[\-+(\s]++|(?<![\w.]))(?:\d|\.\d)[\d.\s()+\-*/%^×÷]*")
_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?!\w)")


def _blank(text: str, spans: Iterable[tuple[int, int, Any]]) -> str:
    chars = list(text)
    for start, end, _ in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def _starts_clause(masked: str, start: int) -> bool:
    """Whether ``start`` begins a clause (only the few characters before it are read)."""
    return _CLAUSE_START.search(masked[max(0, start - 40):start].rstrip()) is not None


def _mask_quotes(text: str) -> tuple[str, list[str]]:
    """``text`` with each quotation replaced by an equally long placeholder (positions stay valid)."""
    quotes: list[str] = []

    def mask(match: re.Match[str]) -> str:
        token = f"⟦{len(quotes)}⟧"
        if len(token) > len(match.group()):
            return match.group()  # too short to hide; it stays plain text
        quotes.append(next(group for group in match.groups() if group is not None))
        return token.ljust(len(match.group()), "_")
    return _QUOTE.sub(mask, text), quotes


def _target(raw: str, quotes: list[str]) -> tuple[str, bool]:
    """The quoted text (True) or the path token (False) a pattern's target names."""
    placeholder = re.fullmatch(r"⟦(\d+)⟧_*", raw)
    if placeholder:
        return quotes[int(placeholder.group(1))], True
    return (raw if set(raw) == {"."} else raw.rstrip(".")), False


def _units(words: str) -> list[str]:
    found = {"lines": "line" in words, "words": "word" in words, "chars": "char" in words or "letter" in words}
    return [unit for unit, asked in found.items() if asked] or ["lines", "words", "chars"]


def _intent(name: str, match: re.Match[str], quotes: list[str]) -> dict[str, Any] | None:
    if name == "sleep":
        unit = (match["unit"] or "s").lower()
        factor = 0.001 if unit == "ms" or unit.startswith("milli") else 60.0 if unit.startswith("m") else 1.0
        seconds = float(match["num"]) * factor
        # Planned as asked: past the tool's maximum (its schema's) the call is refused, saying why, never cut
        return {"intent": "sleep", "tool": "sleep", "args": {"seconds": seconds}}
    target, quoted = _target(match["target"] or ".", quotes)
    if name == "count":
        units = _units(" ".join(match[g] or "" for g in ("u1", "u2", "u3")).lower())
        args = {"text": target} if quoted else {"path": target}
        return {"intent": "count", "tool": "count", "args": {**args, "units": units}}
    if not target:
        return None
    return {"intent": name, "tool": name, "args": {"path": target}}


def _echoes(text: str, masked: str, quotes: list[str]) -> list[tuple[int, int, dict[str, Any]]]:
    """``echo/say/repeat ...`` at the start of a clause: the rest of the clause, verbatim."""
    found, pos = [], 0
    while (match := _ECHO.search(masked, pos)) is not None:
        pos = match.end()
        if not _starts_clause(masked, match.start()):
            continue
        stop = _ECHO_END.search(masked, match.end())
        end = stop.start() if stop else len(masked)
        placeholder = re.fullmatch(r"\s*⟦(\d+)⟧_*\s*", masked[match.end():end])
        said = quotes[int(placeholder.group(1))] if placeholder else text[match.end():end].strip()
        found.append((match.start(), end, {"intent": "echo", "tool": "echo", "args": {"text": said}}))
        pos = end
    return found


_CALL = re.compile(r"\bcall\s+(?P<tool>[A-Za-z_][\w.\-]*)\s*(?=\{)")
_JSON = json.JSONDecoder()


def _calls(text: str) -> list[tuple[int, int, dict[str, Any]]]:
    """``call TOOL {json args}``: any registered tool, named explicitly (plugins, tests)."""
    found = []
    for match in _CALL.finditer(text):
        try:
            args, end = _JSON.raw_decode(text, match.end())
        except ValueError:
            continue
        if isinstance(args, dict):
            found.append((match.start(), end, {"intent": "call", "tool": match["tool"], "args": args}))
    return found


def _expressions(masked: str) -> list[tuple[int, int, str]]:
    """Arithmetic in what is left of the text once other intents, paths and quotes are blanked."""
    words = _WORD_OPS.sub(lambda m: f" {_OPS[m.group(1).split()[0].lower()]} ".ljust(len(m.group())), masked)
    keyword = _MATH_WORDS.search(masked) is not None
    found = []
    for match in _EXPR.finditer(words):
        expr = match.group().strip().rstrip(".").strip()
        while expr.endswith(")") and expr.count(")") > expr.count("("):
            expr = expr[:-1].rstrip()
        while expr.startswith("(") and expr.count("(") > expr.count(")"):
            expr = expr[1:].lstrip()
        expr = re.sub(r"\s+", " ", expr.replace("^", "**").replace("×", "*").replace("÷", "/"))
        if not is_expression(expr):
            continue
        if keyword or re.search(r"[+*/%(]|\s-\s", expr):  # a bare "555-1234" is not a sum
            found.append((match.start(), match.end(), expr))
    return found


_PARALLEL = re.compile(r"\s*in\s+parallel\s*:\s*(?P<parts>.+)", re.I | re.S)
SUB_TASK = "sub_task"  # the tool name of a sub_task intent (its step is a sub_task step, not a tool call)


def parallel_parts(text: str) -> list[str]:
    """``in parallel: A; B; C`` -> ["A", "B", "C"]: each part a task of its own (a sub-task); [] otherwise.

    A part in parentheses is taken whole, so a part may itself be ``(in parallel: D; E)`` (a tree).
    """
    match = _PARALLEL.fullmatch(text)
    if match is None:
        return []
    parts, depth, start, body = [], 0, 0, match["parts"]
    for index, char in enumerate(body + ";"):
        depth += (char == "(") - (char == ")")
        if char == ";" and depth <= 0:
            parts.append(_unwrapped(body[start:index].strip()))
            start, depth = index + 1, 0
    return [part for part in parts if part]


def _unwrapped(part: str) -> str:
    """``(X)`` -> ``X`` when the parentheses enclose the whole part."""
    if not (part.startswith("(") and part.endswith(")")):
        return part
    depth = 0
    for index, char in enumerate(part):
        depth += (char == "(") - (char == ")")
        if depth == 0 and index < len(part) - 1:
            return part  # "(2+3)*(4)": the first pair closes before the end
    return part[1:-1].strip()


def perceive_text(text: str, source: str = "input") -> dict[str, Any]:
    """Intents and entities of one text, in the order they appear (``in parallel: ...``: one sub_task each)."""
    if parts := parallel_parts(text):
        return {"intents": [{"intent": SUB_TASK, "tool": SUB_TASK, "args": {"text": part}, "text": part,
                             "source": source} for part in parts],
                "entities": {"numbers": [], "expressions": [], "paths": [], "quoted": []}}
    text = text.replace("⟦", "[").replace("⟧", "]")  # the placeholder brackets are ours alone
    masked, quotes = _mask_quotes(text)
    calls = _calls(text)  # positions in masked are those in text: placeholders keep lengths
    masked = _blank(masked, calls)
    paths = [m.group() for m in re.finditer(_PATH, masked)]
    chosen = calls + _echoes(text, masked, quotes)
    masked = _blank(masked, chosen)
    candidates = [(m.start(), m.end(), name, m) for name, rx in _PATTERNS for m in rx.finditer(masked)]
    last_end = 0  # candidates never start inside a blanked echo, so only they can overlap each other
    for start, end, name, match in sorted(candidates, key=lambda c: (c[0], -(c[1] - c[0]))):
        if start >= last_end and (intent := _intent(name, match, quotes)) is not None:
            chosen.append((start, end, intent))
            last_end = end
    rest = _blank(masked, chosen)
    for pattern in (_PATH, _DATE, _QPH):
        rest = re.sub(pattern, lambda m: " " * len(m.group()), rest)
    expressions = _expressions(rest)
    chosen += [(s, e, {"intent": "arithmetic", "tool": "arithmetic", "args": {"expression": x}})
               for s, e, x in expressions]
    chosen.sort(key=lambda item: item[0])
    intents = [{**intent, "text": text[s:e].strip(), "source": source} for s, e, intent in chosen]
    paths += [i["args"]["path"] for i in intents if "path" in i["args"] and i["args"]["path"] not in paths]
    plain = re.sub(f"{_PATH}|{_QPH}", lambda m: " " * len(m.group()), masked)
    numbers = [n if len(n) > 18 else float(n) if "." in n else int(n) for n in _NUMBER.findall(plain)]
    return {"intents": intents, "entities": {"numbers": numbers, "expressions": [x for _, _, x in expressions],
                                             "paths": paths, "quoted": quotes}}
