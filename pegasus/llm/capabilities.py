"""The capability ladder: which request shape an endpoint and model take (pure: data in, data out).

It owns the first shape a model is asked with (from ``[llm]``), the request body a shape gives, the
next shape after a refusal (a 400, 422 or 500 whose body names a parameter sent: read from what it
says, not its status) and the lower of two shapes (what two workers learnt).  It must not call the
model or remember anything (``pegasus.llm.ladder`` does).  The rungs: docs/llm.md, "The capability
ladder".
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from pegasus.config import LLMSettings

JSON_SCHEMA, JSON_OBJECT, PROMPTED, NATIVE, AUTO = "json_schema", "json_object", "prompted", "native", "auto"
JSON_OBJECT_SCHEMA = "json_object_schema"
MAX_TOKENS, MAX_COMPLETION_TOKENS = "max_tokens", "max_completion_tokens"
STRUCTURED_RUNGS = (JSON_SCHEMA, JSON_OBJECT_SCHEMA, JSON_OBJECT, PROMPTED)

# Words with which servers refuse a parameter (OpenAI "Unsupported parameter/value", Ollama "does not
# support tools", llama.cpp "tools param requires --jinja flag", vLLM '"auto" tool choice requires
# --enable-auto-tool-choice', LiteLLM "does not support parameters: ['tools']", pydantic "Extra inputs
# are not permitted"; OpenAI's "Invalid schema for response_format" when the reply schema is not taken;
# pydantic's literal_error "Input should be 'text' or 'json_object'" from llama-cpp-python).  A 400 that
# names a parameter without refusing it ("'max_tokens' is too large") is the request's fault: no step.
_REFUSED = re.compile(r"unsupported|not supported|does not support|doesn't support|not available|unknown|"
                      r"unrecognized|unrecognised|not allowed|not permitted|extra_forbidden|unexpected|"
                      r"requires|must be one of|invalid (?:parameter|value|type|schema)|not implemented|"
                      r"literal_error|enum|input should be|extra inputs|no such", re.I)
# Where a body names the parameter itself: pydantic's ``loc`` (a list, or a tuple in str() of the error)
# beginning with "body", and OpenAI's ``param`` ("response_format", "tools[0].function", ...).
_Q = r"""\\*['"]"""  # a quote, escaped or not (a message quoting JSON, inside the body's JSON)
_LOC = re.compile(rf"{_Q}?loc{_Q}?\s*[:=]\s*[\[(]\s*{_Q}body{_Q}\s*,\s*{_Q}(\w+){_Q}")
_PARAM = re.compile(rf"{_Q}param{_Q}\s*:\s*{_Q}(\w+)")
_NAMES: dict[str, re.Pattern[str]] = {
    MAX_TOKENS: re.compile(r"\bmax_tokens\b"),
    MAX_COMPLETION_TOKENS: re.compile(r"\bmax_completion_tokens\b"),
    "temperature": re.compile(r"\btemperature\b"),
    "reasoning_effort": re.compile(r"\breasoning_effort\b"),
    "response_format": re.compile(r"response_format|json_schema|json_object|response format|structured output",
                                  re.I),
    "tools": re.compile(r"\btools?\b|tool[_ ]choice|function[_ ]call|--jinja|auto-tool-choice", re.I),
}


@dataclass(frozen=True)
class Shape:
    """What one request to a model carries."""

    structured: str = JSON_SCHEMA  # json_schema | json_object | prompted
    tools: str = NATIVE  # native | prompted
    token_param: str = MAX_TOKENS  # max_tokens | max_completion_tokens | "" (no cap)
    temperature: bool = True
    reasoning_effort: bool = False
    stream: bool = True  # False: the endpoint refused a stream; every worker asks it whole from then on
    # The server decodes one request at a time (it cut a stream because another request waited): its
    # pool sends it one at a time ([llm] max_concurrent = 0), so no stage's deadline runs out in its queue.
    serial: bool = False

    def describe(self) -> str:
        temperature = "sent" if self.temperature else "omitted"
        return (f"structured_output={self.structured}, tool_calls={self.tools}, "
                f"token_limit_param={self.token_param or 'none'}, temperature {temperature}"
                + (", one request at a time" if self.serial else ""))


@dataclass(frozen=True)
class Schema:
    """The JSON schema a stage's reply must fit, as ``response_format`` carries it."""

    name: str
    schema: dict[str, Any]
    strict: bool
    grammar: dict[str, Any] | None = None  # the bounded form for json_object_schema (None: ``schema``)


@dataclass(frozen=True)
class Step:
    """The shape after a refusal, and what changed (for the record and the log)."""

    shape: Shape
    change: str


def initial(settings: LLMSettings) -> Shape:
    """The first shape a model is asked with: the settings' choice, or the top rung for ``auto``."""
    token = settings.token_limit_param if settings.token_limit_param != AUTO else MAX_TOKENS
    return Shape(structured=settings.structured_output if settings.structured_output != AUTO else JSON_SCHEMA,
                 tools=settings.tool_calls if settings.tool_calls != AUTO else NATIVE,
                 token_param=token if settings.max_output_tokens else "",
                 temperature=True, reasoning_effort=bool(settings.reasoning_effort))


def request(settings: LLMSettings, shape: Shape, messages: Sequence[Mapping[str, Any]], *,
            tools: Sequence[Mapping[str, Any]] | None = None, tool_choice: str | None = None,
            schema: Schema | None = None, short: int = 0) -> dict[str, Any]:
    """The request body: ``tools`` only on the native rung; ``schema`` (a JSON reply) only without them
    (with function calling on, some servers suppress the calls under a response format); ``short``: the
    stage's own cap on output tokens (``output_tokens``)."""
    body: dict[str, Any] = {"model": settings.model, "messages": list(messages)}
    if shape.temperature:
        body["temperature"] = settings.temperature
    if shape.token_param and settings.max_output_tokens:
        body[shape.token_param] = output_tokens(settings, shape, short)
    if shape.reasoning_effort and settings.reasoning_effort:
        body["reasoning_effort"] = settings.reasoning_effort
    native = bool(tools) and shape.tools == NATIVE
    if native:
        body["tools"] = list(tools or ())
        if tool_choice:
            body["tool_choice"] = tool_choice
    elif schema is not None and shape.structured == JSON_SCHEMA:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": schema.name, "schema": schema.schema, "strict": schema.strict}}
    elif schema is not None and shape.structured == JSON_OBJECT_SCHEMA:
        body["response_format"] = {"type": "json_object", "schema": schema.grammar or schema.schema}
    elif schema is not None and shape.structured == JSON_OBJECT:
        body["response_format"] = {"type": "json_object"}
    return body


def output_tokens(settings: LLMSettings, shape: Shape, short: int) -> int:
    """The token cap a call is sent with: a short stage's own ``short`` under ``max_output_tokens``, but
    never for a reasoning model (its hidden reasoning counts against the cap: ``reasoning_effort`` set, or
    ``max_completion_tokens`` taken), nor when ``max_output_tokens = 0`` asks for none."""
    plain = shape.token_param == MAX_TOKENS and not settings.reasoning_effort
    if short > 0 and plain and settings.max_output_tokens:
        return min(short, settings.max_output_tokens)
    return settings.max_output_tokens


def named(text: str, sent: Collection[str]) -> str | None:
    """The parameter an error's body (its text) refuses, among those the request carried (None: not a
    refusal).  The body's own ``loc`` or ``param`` names it where it has one; else its words do."""
    if not _REFUSED.search(text):
        return None
    for pattern in (_LOC, _PARAM):
        for match in pattern.finditer(text):
            parameter = "tools" if match.group(1) == "tool_choice" else match.group(1)
            if parameter in _NAMES and _carried(parameter, sent):
                return parameter
    for parameter, pattern in _NAMES.items():
        if _carried(parameter, sent) and pattern.search(text):
            return parameter
    return None


def _carried(parameter: str, sent: Collection[str]) -> bool:
    return parameter in sent or (parameter == "tools" and "tool_choice" in sent)


_TOKEN_RUNGS = (MAX_TOKENS, MAX_COMPLETION_TOKENS, "")


def lower(a: Shape, b: Shape) -> Shape:
    """The shape below both: each rung the lower of the two (what two workers learnt, put together)."""
    structured = max(_rung(STRUCTURED_RUNGS, a.structured), _rung(STRUCTURED_RUNGS, b.structured))
    token = max(_rung(_TOKEN_RUNGS, a.token_param), _rung(_TOKEN_RUNGS, b.token_param))
    return Shape(structured=STRUCTURED_RUNGS[structured], tools=PROMPTED if PROMPTED in (a.tools, b.tools) else a.tools,
                 token_param=_TOKEN_RUNGS[token],
                 temperature=a.temperature and b.temperature,
                 reasoning_effort=a.reasoning_effort and b.reasoning_effort, stream=a.stream and b.stream,
                 serial=a.serial or b.serial)


def _rung(rungs: Sequence[str], value: str) -> int:
    return rungs.index(value) if value in rungs else 0


# -- what a pool gathers from its workers (pegasus.llm.ladder.learned), as plain data ---------------


def merged(known: Mapping[str, Mapping[str, Any]],
           more: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """``known`` with ``more`` taken in (the pool's gathering; pure)."""
    out = {key: dict(fields) for key, fields in known.items()}
    for key, fields in more:
        out[key] = asdict(lower(Shape(**out[key]), Shape(**fields))) if key in out else dict(fields)
    return out


def ladder_view(known: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """What a pool knows, for ``pegasus stats``: "MODEL at BASE_URL" -> the shape it is asked with."""
    out = {}
    for key, fields in known.items():
        base_url, model, _ = json.loads(key)
        out[f"{model} at {base_url or 'the OpenAI API'}"] = Shape(**fields).describe()
    return out


def step_down(settings: LLMSettings, shape: Shape, sent: Collection[str], text: str) -> Step | None:
    """The next shape after a 400 whose message is ``text``; None when there is none to take (the
    message refuses nothing the request carried, the setting is fixed, or the ladder is at its foot)."""
    parameter = named(text, sent)
    if parameter in (MAX_TOKENS, MAX_COMPLETION_TOKENS):
        if settings.token_limit_param != AUTO:
            return None
        other = MAX_COMPLETION_TOKENS if parameter == MAX_TOKENS else ""
        return Step(replace(shape, token_param=other), f"{parameter} refused: "
                    + (f"sending {other}" if other else "sending no token limit"))
    if parameter == "temperature":
        return Step(replace(shape, temperature=False), "temperature refused: leaving it out")
    if parameter == "reasoning_effort":
        return Step(replace(shape, reasoning_effort=False), "reasoning_effort refused: leaving it out")
    if parameter == "response_format":
        if settings.structured_output != AUTO or shape.structured == PROMPTED:
            return None
        # "json_schema" named while on json_schema: the schema kind is refused, json_object may pass.
        below = STRUCTURED_RUNGS[STRUCTURED_RUNGS.index(shape.structured) + 1]
        return Step(replace(shape, structured=below), f"response_format {shape.structured} refused: using {below}")
    if parameter == "tools":
        if settings.tool_calls != AUTO or shape.tools == PROMPTED:
            return None
        return Step(replace(shape, tools=PROMPTED), "tools refused: tool calls prompted as JSON")
    return None


# -- the stage's reply model as a response_format schema -------------------------------------------


def reply_schema(name: str, schema: Mapping[str, Any]) -> Schema:
    """``schema`` (a pydantic model's JSON schema) made fit for ``json_schema``.

    Strict mode (OpenAI) needs every object closed (``additionalProperties: false``)
    with every property required and no defaults; an object with free-form keys (a
    tool's arguments, the perception's entities) cannot be, so such a schema is
    sent as pydantic wrote it, with ``strict: false`` (servers that build a grammar
    from it still enforce it).
    """
    free = False

    def close(node: Any, bounded: bool, chars: int = MAX_CHARS, items: int = MAX_ITEMS) -> Any:
        nonlocal free
        if isinstance(node, list):
            return [close(item, bounded, chars, items) for item in node]
        if not isinstance(node, dict):
            return node
        chars = node.get(SHORT, {}).get("chars", chars)  # a field the stage keeps short, and all inside it
        items = node.get(SHORT, {}).get("items", items)
        out = {key: close(value, bounded, chars, items) for key, value in node.items()
               if key not in ("default", "title", "properties", "$defs", WHEN_MEANT, SHORT)}
        for key in ("properties", "$defs"):  # maps of names: a field called "title" stays
            if isinstance(node.get(key), dict):
                out[key] = {name: close(value, bounded, *((chars, items) if key == "properties" else ()))
                            for name, value in node[key].items()}
        if out.get("type") == "object":
            if out.get("properties") and bounded:  # decisions after what they rest on (see SCALAR)
                out["properties"] = dict(sorted(out["properties"].items(), key=lambda item: _written_late(item[1])))
            if out.get("properties"):
                meant = {name for name, value in (node.get("properties") or {}).items()
                         if isinstance(value, dict) and value.get(WHEN_MEANT)}
                out["required"] = [name for name in out["properties"] if not (bounded and name in meant)]
                out["additionalProperties"] = False
            else:
                free = True
                if bounded:
                    out["additionalProperties"] = _scalar(chars)
        if bounded and out.get("type") == "array":
            out["items"] = out.get("items") or _scalar(chars)
            out.setdefault("maxItems", items)
        if bounded and out.get("type") == "string" and "enum" not in out:
            out.setdefault("maxLength", chars)
        return out

    closed = close(dict(schema), False)
    return Schema(name=re.sub(r"[^A-Za-z0-9_-]", "_", name)[:64], schema=_unmarked(schema) if free else closed,
                  strict=not free, grammar=close(dict(schema), True))


def _unmarked(node: Any) -> Any:
    """``node`` without the WHEN_MEANT marks (Pegasus's own, never sent)."""
    if isinstance(node, list):
        return [_unmarked(item) for item in node]
    if not isinstance(node, dict):
        return node
    return {key: _unmarked(value) for key, value in node.items() if key not in (WHEN_MEANT, SHORT)}


# The grammar a server builds from a schema holds a small model to it, but a free-form value lets it write
# nested objects until max_tokens.  In the json_object_schema rung, free-form values are scalars and
# lists are bounded; pydantic still validates the reply against the full model.
# A grammar also fixes the order the model writes in: a small model asked "need_more_info" first
# answered true and asked the prompt's placeholder back.  Booleans and optional fields come last, after
# the reasoning they should rest on (docs/llm.md, "The capability ladder" and "What each stage asks for").


def _written_late(node: Any) -> int:
    if isinstance(node, dict) and node.get("type") == "boolean":
        return 1
    if isinstance(node, dict) and any(isinstance(o, dict) and o.get("type") == "null" for o in node.get("anyOf", [])):
        return 2
    return 0


# A field a grammar never demands (the reply model marks it: ``Field(json_schema_extra={WHEN_MEANT: True})``):
# asking the user, which a small model made to write it asks needlessly (docs/llm.md).  The json_schema
# rung keeps every field required (OpenAI's strict mode takes no other schema).
WHEN_MEANT = "x-written-when-meant"
# A grammar holds a model inside a string until the string may end, and a small model held so writes on to
# max_tokens; so in the grammar every string has an end it must reach.
MAX_CHARS = 1000
MAX_ITEMS = 10
# A field whose stage keeps it short (``Field(json_schema_extra={SHORT: {"chars": 200, "items": 3}})``): its
# strings and lists, and all inside them, get these bounds in the grammar instead (pydantic does not check
# them: a longer reply on another rung is still read).  SmolLM2-135M filled reflect's 1,000-character
# strings: 416 completion tokens, 115 s at a load of 20, for a verdict.
SHORT = "x-short"


def _scalar(chars: int) -> dict[str, Any]:
    return {"anyOf": [{"type": "string", "maxLength": chars}, {"type": "number"}, {"type": "boolean"}]}


SCALAR = _scalar(MAX_CHARS)
