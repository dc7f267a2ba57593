"""Task models of seeds 000 and 001 (pydantic v2, snake_case field names).

They are plain data: no I/O, no Thespian.  ``pegasus.codec`` turns each of them
into msgpack bytes and back.
"""

from __future__ import annotations

import copy
from datetime import datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

_ModelT = TypeVar("_ModelT", bound=BaseModel)
_IMMUTABLE = frozenset({str, int, float, bool, type(None), bytes, datetime})
_set = object.__setattr__
_MODELS: dict[str, type[BaseModel]] = {}  # the task models by class name (``_Model.__reduce__``)

ActionType = Literal["tool_call", "generate", "sub_task", "respond"]
Verdict = Literal["complete", "continue", "replan"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, defer_build=True)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if _MODELS.setdefault(cls.__name__, cls) is not cls:  # a pickle names its model by class name alone
            raise TypeError(f"a task model named {cls.__name__} exists already: {_MODELS[cls.__name__]!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled as its class's name, its fields and which were set (``_unpickled``), not as pydantic's state
        dict with each model's class found by module and name: a task's context crosses a process with every
        stage, both ways."""
        extra, private = self.__pydantic_extra__, self.__pydantic_private__
        rest = () if extra is None and private is None else (extra, private)
        return _unpickled, (type(self).__name__, self.__dict__, self.__pydantic_fields_set__, *rest)


class PlanStep(_Model):
    index: int = Field(ge=0)
    description: str
    action_type: ActionType = "tool_call"
    action_params: dict[str, Any] = Field(default_factory=dict)
    completed: bool = False


class Plan(_Model):
    goal: str
    steps: list[PlanStep] = Field(default_factory=list)
    reasoning: str = ""

    @property
    def current_step(self) -> PlanStep | None:
        """The next step not yet completed, or None when the plan is done."""
        return next((step for step in self.steps if not step.completed), None)

    @property
    def has_more_steps(self) -> bool:
        return self.current_step is not None

    @property
    def has_tool_calls(self) -> bool:
        """Whether a step brings back a result to reason over: a tool call, or a sub-task's answer
        (seed 001 routes a finished plan with one back to REASONING)."""
        return any(step.action_type in ("tool_call", "sub_task") for step in self.steps)

    def mark_done(self, index: int) -> None:
        for step in self.steps:
            if step.index == index:
                step.completed = True
                return
        raise ValueError(f"plan has no step {index}")


class ActionResult(_Model):
    """What one executed plan step produced."""

    step_index: int
    action_type: ActionType = "tool_call"
    tool: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    success: bool
    output: Any = None
    error: str | None = None
    duration_ms: float = 0.0
    idempotency_key: str | None = None
    # A deterministic refusal (a limit, confinement, an unknown tool, a bad argument): the same call is
    # refused again, so it is never retried
    refused: bool = False


class Reflection(_Model):
    verdict: Verdict
    assessment: str = ""
    lessons: list[str] = Field(default_factory=list)
    next_focus: str | None = None


class Episode(_Model):
    title: str
    summary: str
    details: str = ""
    lesson: str = ""


class Fact(_Model):
    path: str
    content: str


class PostTaskReflection(_Model):
    facts: list[Fact] = Field(default_factory=list)
    episode: Episode | None = None
    assessment: str = ""


class Memory(_Model):
    """One memory a think / reason stage was given: a fact (``title`` its path) or an episode."""

    id: str  # the memory store's id: ``fact:<path>@<version>`` or ``episode:<n>``
    kind: Literal["fact", "episode"]
    title: str
    text: str
    score: float = 0.0


class Recall(_Model):
    """What the supervisor recalled for one iteration's think / reason: the agent's identity and
    the k memories most relevant to the task's input and perception."""

    iteration: int = 0
    identity: str = ""
    memories: list[Memory] = Field(default_factory=list)
    error: str | None = None  # the store could not be searched (no memories), or the query got no vector (full text)

    @property
    def ids(self) -> list[str]:
        return [memory.id for memory in self.memories]


class TaskContext(_Model):
    """Everything a task accumulates from creation to its end (seed 000/001)."""

    # Original input
    input_text: str = ""
    input_metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = "cli"
    # Cognitive stage outputs
    perception: dict[str, Any] | None = None
    reasoning: dict[str, Any] | None = None
    plan: Plan | None = None
    actions_done: list[ActionResult] = Field(default_factory=list)
    reflections: list[Reflection] = Field(default_factory=list)
    post_reflection: PostTaskReflection | None = None
    # The model tier every model stage of this task runs on (``submit --tier``); None: each stage's [llm.stages]
    tier: str | None = None
    # What the last think / reason was given from memory (None: nothing recalled yet, or recall is off)
    recall: Recall | None = None
    # Loop control
    iteration: int = 0
    # Result
    final_result: Any = None
    error: str | None = None
    # Suspend / resume
    suspended_state: str | None = None
    suspend_reason: str | None = None
    # Conversation history (working memory fragment)
    messages: list[dict[str, Any]] = Field(default_factory=list)
    # The last message sent to the task (``pegasus message``, numbered per task) that ``messages``
    # holds: a run restarted from a checkpoint takes only those after it (never one twice).
    messages_taken: int = 0


class StateTransition(_Model):
    from_state: str
    to_state: str
    trigger_event_type: str
    trigger_event_id: str
    timestamp: datetime


class TaskSnapshot(_Model):
    """Everything needed to rebuild a TaskFSM: what checkpoints store."""

    machine: str
    task_id: str
    state: str
    context: TaskContext
    history: list[StateTransition] = Field(default_factory=list)
    priority: int = 5
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime


def deep_copy(model: _ModelT) -> _ModelT:
    """A deep copy of a task model: what ``model.model_copy(deep=True)`` gives, ~2.5x faster.

    The FSM copies the context on every transition (a refused event must leave it
    untouched), so this is on the path of every stage.  Models, dicts and lists are
    rebuilt, immutable scalars shared, anything else (a tuple or a set inside an
    ``Any`` field) goes through ``copy.deepcopy``.  Unlike ``deepcopy`` it keeps no
    memo: an object reachable twice is copied twice (validated task data is a tree).
    """
    return _copy(model)  # type: ignore[no-any-return]


def copied_fields(model: _ModelT, fields: frozenset[str]) -> _ModelT:
    """A copy of ``model`` for a change that assigns any field but changes only ``fields`` in place: those are
    deep-copied, every other field's value is shared (an assignment replaces it in the copy alone)."""
    state = dict(model.__dict__)
    for name in fields:
        state[name] = _copy(state[name])
    return _rebuilt(model, state)


def _copy(value: Any) -> Any:
    kind = type(value)
    if kind in _IMMUTABLE:
        return value
    if kind is dict:
        return {key: _copy(item) for key, item in value.items()}
    if kind is list:
        return [_copy(item) for item in value]
    if isinstance(value, BaseModel):
        return _rebuilt(value, {key: _copy(item) for key, item in value.__dict__.items()})
    return copy.deepcopy(value)


def _unpickled(kind: str, fields: dict[str, Any], fields_set: set[str], extra: dict[str, Any] | None = None,
               private: dict[str, Any] | None = None) -> BaseModel:
    """A model as ``_Model.__reduce__`` pickled it (as pydantic's ``__setstate__`` restores one: unvalidated)."""
    return _assembled(_MODELS[kind], fields, fields_set, extra, private)


def _rebuilt(model: _ModelT, state: dict[str, Any]) -> _ModelT:
    """``model`` again with ``state`` as its fields, unvalidated; its other pydantic parts copied."""
    return _assembled(type(model), state, set(model.__pydantic_fields_set__), _copy(model.__pydantic_extra__),
                      _copy(model.__pydantic_private__))


def _assembled(cls: type[_ModelT], fields: dict[str, Any], fields_set: set[str], extra: dict[str, Any] | None,
               private: dict[str, Any] | None) -> _ModelT:
    """A model of ``cls`` made of its parts, unvalidated."""
    model = object.__new__(cls)
    _set(model, "__dict__", fields)
    _set(model, "__pydantic_fields_set__", fields_set)
    _set(model, "__pydantic_extra__", extra)
    _set(model, "__pydantic_private__", private)
    return model
