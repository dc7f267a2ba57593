"""The replies each llm stage asks for (pydantic models validated from the model's JSON), and the
reading of a reply's text as one JSON object (a code fence or prose around it is tolerated).

What it must not do: call the model (pegasus.cognitive.llm does) or decide what a reply means.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pegasus.llm.capabilities import SHORT, WHEN_MEANT
from pegasus.task.names import StageName
from pegasus.task.models import Episode, Fact


class InvalidReply(ValueError):
    """A reply that does not fit the stage's shape; the message is what the model is told."""


# -- reply shapes --------------------------------------------------------------------------------


class _Reply(BaseModel):
    model_config = ConfigDict(extra="allow")


def _short(default: Any = None, *, chars: int, items: int | None = None, factory: Any = None,
           asking: bool = False) -> Any:
    """A field its stage keeps short: the grammar rung bounds its strings (and lists) so (not validated:
    a longer reply on another rung is still read); ``asking``: written only when the model asks."""
    extra: dict[str, Any] = {SHORT: {"chars": chars, **({"items": items} if items else {})}}
    if asking:
        extra[WHEN_MEANT] = True
    if factory is not None:
        return Field(default_factory=factory, json_schema_extra=extra)
    return Field(default, json_schema_extra=extra)


# The most a stage whose answer is short may write (sent as max_tokens, under [llm] max_output_tokens), with
# room over what its grammar allows (the bounded fields below, ~4 characters a token); stages not named
# (plan, reason, post_reflect: their replies carry the task's answer or what to remember) keep the setting.
OUTPUT_TOKENS: dict[str, int] = {StageName.PERCEIVE: 384, StageName.THINK: 256, StageName.REFLECT: 384}


class PerceptionReply(_Reply):
    task_type: str = _short("request", chars=40)
    intents: list[Any] = _short(chars=120, items=3, factory=list)
    entities: dict[str, Any] = _short(chars=80, factory=dict)
    summary: str = _short("", chars=240)


def _asking(default: Any, chars: int | None = None) -> Any:
    """An ask field: written by the model only when it asks (a grammar never demands it)."""
    return Field(default, json_schema_extra={WHEN_MEANT: True}) if chars is None else \
        _short(default, chars=chars, asking=True)


def _question_given(need_more_info: bool, question: str | None) -> None:
    if need_more_info and not (question or "").strip():
        raise ValueError("need_more_info is true, so question must say what to ask the user")


class ThinkReply(_Reply):
    approach: str = _short("", chars=300)
    need_more_info: bool = _asking(False)
    question: str | None = _asking(None, 200)

    @model_validator(mode="after")
    def _asks(self) -> ThinkReply:
        _question_given(self.need_more_info, self.question)
        return self


class StepReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action_type: Literal["tool_call", "respond", "sub_task"] = "tool_call"
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    description: str = ""
    text: str | None = None
    machine: Literal["classic", "reason_act"] | None = None  # a sub_task's (else its parent's)

    @model_validator(mode="after")
    def _named(self) -> StepReply:
        if self.action_type == "tool_call" and not self.tool:
            raise ValueError("a tool_call step needs a tool name")
        if self.action_type == "sub_task" and not (self.text or "").strip():
            raise ValueError("a sub_task step needs the text of its task")
        return self


class PlanReply(_Reply):
    goal: str = ""
    reasoning: str = ""
    steps: list[StepReply] = Field(min_length=1)


class ReflectReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    verdict: Literal["complete", "continue", "replan"]
    assessment: str = _short("", chars=240)
    lessons: list[str] = _short(chars=120, items=3, factory=list)
    next_focus: str | None = _short(None, chars=160)


class PostReflectReply(BaseModel):
    model_config = ConfigDict(extra="ignore")
    facts: list[Fact] = Field(default_factory=list)
    episode: Episode | None = None
    assessment: str = ""


class ReasonReply(_Reply):
    thought: str = ""
    need_more_info: bool = _asking(False)
    question: str | None = _asking(None)
    answer: str | None = None
    steps: list[StepReply] = Field(default_factory=list)

    @model_validator(mode="after")
    def _decides(self) -> ReasonReply:
        _question_given(self.need_more_info, self.question)
        if not self.need_more_info and not self.steps and not (self.answer or "").strip():
            raise ValueError('give an "answer", or call a tool, or set need_more_info with a question')
        return self


# -- parsing -------------------------------------------------------------------------------------

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
M = TypeVar("M", bound=BaseModel)


def json_object(content: str | None) -> dict[str, Any]:
    """The JSON object a reply holds (a code fence or text around it is tolerated, and so are raw
    control characters in its strings: small models write newlines into them)."""
    text = (content or "").strip()
    if not text:
        raise InvalidReply("the reply was empty; a JSON object was expected")
    fenced = _FENCE.match(text)
    text = fenced.group(1) if fenced else text
    try:
        value = json.loads(text, strict=False)
    except ValueError as exc:
        start, end = text.find("{"), text.rfind("}")
        try:
            value = json.loads(text[start:end + 1], strict=False) if 0 <= start < end else None
        except ValueError:
            value = None
        if value is None:
            raise InvalidReply(f"the reply is not valid JSON ({exc}): {text[:200]!r}") from None
    if not isinstance(value, dict):
        raise InvalidReply(f"the reply must be a JSON object, not {type(value).__name__}")
    return value


def validated(model: type[M], data: Any) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '<reply>'}: {e['msg']}"
                             for e in exc.errors(include_url=False))
        raise InvalidReply(f"the JSON does not fit the expected shape: {problems}") from None


def prose(reply_text: str | None) -> str | None:
    """The reply's text when it is prose -- words, not a JSON object nor an attempt at one (a reply
    beginning with ``{``, ``[`` or a fence is JSON gone wrong, and is corrected, never read as prose)."""
    text = (reply_text or "").strip()
    if not text or text[0] in "{[" or text.startswith("```"):
        return None
    try:
        json_object(text)
    except InvalidReply:
        return text
    return None


_SAYING = ("answer", "text", "response", "reply", "reasoning", "goal")  # where a stepless plan's words may be


def stepless(reply_text: str | None) -> str | None:
    """The words of a reply whose JSON object has no steps (a small model's prose quoting the
    prompt's example step, or an object of goal and reasoning only), or None when it has steps (JSON
    gone wrong there is corrected, never read).  A bare object gives its first saying field, if any."""
    text = (reply_text or "").strip()
    try:
        value = json_object(text)
    except InvalidReply:
        return None
    if value.get("steps"):
        return None
    if text[0] == "{":
        said = [v.strip() for k in _SAYING if isinstance(v := value.get(k), str) and v.strip()]
        return said[0] if said else None
    return text
