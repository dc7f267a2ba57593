"""The tool registry: named tools with a pydantic argument model, an effect class
and a timeout, called with validated arguments and a capped output.

It looks a tool up, validates its arguments before the call, turns any exception a tool raises
into a ToolExecutionError and caps what comes back.  It must not enforce timeouts (a thread cannot
be stopped: the tool pool's deadline does) or run anything concurrently.  Effect classes:
``pure`` and ``idempotent`` are safe to call again; ``effectful`` is never repeated silently
(``ToolContext.idempotency_key`` lets it recognise a repeat; docs/durability.md, "Tool effects").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ValidationError

from pegasus import tracing
from pegasus.config import ToolSettings
from pegasus.errors import PegasusError

EffectClass = Literal["pure", "idempotent", "effectful"]
EFFECTS: tuple[EffectClass, ...] = ("pure", "idempotent", "effectful")
DEFAULT_MAX_OUTPUT_CHARS = ToolSettings().max_output_chars  # the config's default, not typed again


# -- errors ---------------------------------------------------------------------------


class ToolError(PegasusError):
    """Root of the tool errors; ``tool`` names the tool concerned (or None)."""

    def __init__(self, tool: str | None, message: str) -> None:
        super().__init__(message)
        self.tool = tool
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:  # picklable although __init__ takes two arguments
        return (type(self), (self.tool, self.message))


class ToolRefused(ToolError):
    """A deterministic refusal: the same call is refused again (a limit, confinement, an unknown tool, a bad
    argument), so it is never retried."""


class ToolNotFoundError(ToolRefused):
    """No tool of that name; ``known`` lists the names there are."""

    def __init__(self, tool: str, known: Iterable[str]) -> None:
        self.known = sorted(known)
        super().__init__(tool, f"unknown tool {tool!r}; known tools: {', '.join(self.known) or '(none)'}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.tool, self.known))


class ToolRegistrationError(ToolError):
    """A tool could not be registered (a duplicate name, a bad effect class or timeout)."""


class ToolArgumentError(ToolRefused):
    """The arguments do not fit the tool's model; ``fields`` names the bad ones."""

    def __init__(self, tool: str, fields: list[str], message: str) -> None:
        self.fields = list(fields)
        super().__init__(tool, message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.tool, self.fields, self.message))


class ToolExecutionError(ToolError):
    """The tool ran and failed; the message says why in the user's terms."""


class ToolConfinementError(ToolExecutionError, ToolRefused):
    """A path outside what the tool may reach: refused before anything is opened."""


class ToolOutcomeUnknown(ToolExecutionError):
    """An effectful call was sent and its outcome is unknown (its server died, the connection
    closed, or it did not answer in time): it may have had its effect, so it is never sent again
    (the step ends interrupted: ``effects_unknown``)."""


# -- tools ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolContext:
    """What a call may know beyond its arguments.

    ``workspace`` is the task's workspace (the submitting client's working
    directory), where relative paths resolve; None: the configured workspace
    root (pegasus.tools.workspace).  ``idempotency_key`` identifies one logical
    step (task, iteration, step) so an effectful tool can recognise a repeat.
    """

    workspace: Path | None = None
    idempotency_key: str | None = None
    local: bool = False  # a local client's task: its workspace is its own root (pegasus.tools.workspace)


ToolFunc = Callable[[Any, ToolContext], Any]


@dataclass(frozen=True)
class Tool:
    """One tool: ``func(args, ctx)`` gets an instance of ``args_model`` and returns JSON-able output."""

    name: str
    description: str
    args_model: type[BaseModel]
    effect: EffectClass
    timeout_s: float
    func: ToolFunc

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the arguments (what an LLM is shown to call the tool)."""
        return self.args_model.model_json_schema()

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "schema": self.schema(),
                "effect": self.effect, "timeout_s": self.timeout_s}


class ToolProvider(Protocol):
    """Tools that come from elsewhere (an MCP server), named ``<name>.<tool>``, from a cached listing.

    ``tools()`` never waits: it raises ToolError (the source's own reason) while the
    listing is not there; ``passthrough`` is a tool the source checks and answers itself
    (a server still starting queues the call); ``effect_of`` answers without a listing.
    """

    @property
    def name(self) -> str: ...

    @property
    def effect(self) -> EffectClass: ...

    def tools(self) -> dict[str, Tool]: ...

    def known(self) -> list[str]: ...

    def effect_of(self, name: str) -> EffectClass: ...

    def passthrough(self, name: str) -> Tool: ...

    def settle(self, timeout: float) -> None: ...


def _field_name(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "<arguments>"


class ToolRegistry:
    """Tools by name.  ``call`` validates, runs and caps; nothing else is done for a tool."""

    def __init__(self, tools: Iterable[Tool] = (), *, max_output_chars: int = DEFAULT_MAX_OUTPUT_CHARS) -> None:
        if max_output_chars < 1:
            raise ValueError("max_output_chars must be at least 1")
        self.max_output_chars = max_output_chars
        self._tools: dict[str, Tool] = {}
        self._providers: dict[str, ToolProvider] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> Tool:
        """Add ``tool``; a name already taken, an unknown effect or a non-positive timeout is refused."""
        if tool.name in self._tools:
            raise ToolRegistrationError(tool.name, f"a tool named {tool.name!r} is already registered")
        if tool.effect not in EFFECTS:
            raise ToolRegistrationError(tool.name, f"effect must be one of {EFFECTS}, got {tool.effect!r}")
        if not tool.timeout_s > 0:
            raise ToolRegistrationError(tool.name, f"timeout_s must be positive, got {tool.timeout_s!r}")
        self._tools[tool.name] = tool
        return tool

    def add_provider(self, provider: ToolProvider) -> None:
        """Add the tools of ``provider`` (``<name>.<tool>``); they are listed when one is first needed."""
        if provider.name in self._providers or any(n.startswith(f"{provider.name}.") for n in self._tools):
            raise ToolRegistrationError(None, f"tool provider {provider.name!r} is already registered")
        if provider.effect not in EFFECTS:
            raise ToolRegistrationError(None, f"provider {provider.name!r}: effect must be one of {EFFECTS}")
        self._providers[provider.name] = provider

    def providers(self) -> list[ToolProvider]:
        return [self._providers[name] for name in sorted(self._providers)]

    def _provider_of(self, name: str) -> ToolProvider | None:
        prefix, dot, _ = name.partition(".")
        return self._providers.get(prefix) if dot else None

    def _listed(self) -> dict[str, Tool]:
        """The tools of every provider whose listing is there (never waits for one)."""
        found: dict[str, Tool] = {}
        for provider in self.providers():
            try:
                found.update(provider.tools())
            except ToolError:
                continue
        return found

    def load_providers(self, timeout: float = 0.0) -> dict[str, str]:
        """Wait up to ``timeout`` for the providers to list their tools; {provider: why not} for the others."""
        failed = {}
        for provider in self.providers():
            provider.settle(timeout)
        for provider in self.providers():
            try:
                provider.tools()
            except ToolError as exc:
                failed[provider.name] = exc.message
        return failed

    def get(self, name: str) -> Tool:
        """The tool called ``name``.  A provider's tool comes from its listing; while the listing is not
        there, a passthrough its source checks and answers (a failed server's call fails at once)."""
        if name in self._tools:
            return self._tools[name]
        provider = self._provider_of(name)
        if provider is not None:
            try:
                listed = provider.tools()
            except ToolError:
                return provider.passthrough(name)
            if name in listed:
                return listed[name]
        raise ToolNotFoundError(name, self.configured())

    def configured(self) -> list[str]:
        """Every tool there is, with the tools of providers not listed now marked as such."""
        names = list(self._tools)
        for provider in self.providers():
            try:
                names += list(provider.tools())
            except ToolError as exc:
                why = ("failed" if "could not start" in exc.message or "went away" in exc.message
                       else exc.message.removeprefix(f"MCP server {provider.name!r} is "))
                names += [f"{n} (server {why})" for n in provider.known()] or [f"{provider.name}.* (server {why})"]
        return names

    def effect_of(self, name: str) -> EffectClass | None:
        """The effect class of ``name`` without waiting for any provider (None for an unknown tool)."""
        if name in self._tools:
            return self._tools[name].effect
        provider = self._provider_of(name)
        return provider.effect_of(name) if provider is not None else None

    def __contains__(self, name: object) -> bool:
        return name in self._tools or (isinstance(name, str) and name in self._listed())

    def names(self) -> list[str]:
        """The tools there are now (a provider's once it has listed them)."""
        return sorted([*self._tools, *self._listed()])

    def describe(self) -> list[dict[str, Any]]:
        """Every tool there is now as {name, description, schema, effect, timeout_s}, by name.

        Never waits: a provider still starting, or failed, shows no tools."""
        tools = {**self._tools, **self._listed()}
        return [tools[name].describe() for name in sorted(tools)]

    def validate(self, name: str, args: Any) -> BaseModel:
        """The arguments as the tool's model; ToolArgumentError names each bad field."""
        tool = self.get(name)
        if not isinstance(args, dict):
            raise ToolArgumentError(name, ["<arguments>"],
                                    f"tool {name!r}: arguments must be an object, got {type(args).__name__}")
        try:
            return tool.args_model.model_validate(args)
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            fields = [_field_name(error["loc"]) for error in errors]
            problems = "; ".join(f"{_field_name(e['loc'])}: {e['msg']}" for e in errors)
            raise ToolArgumentError(name, fields, f"tool {name!r}: bad argument(s) {problems}") from None

    def call(self, name: str, args: dict[str, Any], ctx: ToolContext | None = None) -> Any:
        """Validate ``args``, run the tool, and return its (size-capped) output.

        Raises ToolNotFoundError, ToolArgumentError, or ToolExecutionError for
        anything the tool itself raises.
        """
        with tracing.call("tool", name) as traced:
            tool = self.get(name)
            traced["pegasus.tool.effect"] = str(tool.effect)
            model = self.validate(name, args)
            try:
                output = tool.func(model, ctx or ToolContext())
            except ToolError:
                raise
            except Exception as exc:  # a tool's own bug or OS error becomes a clear tool error
                raise ToolExecutionError(name, f"{name} failed: {type(exc).__name__}: {exc}") from exc
            return self.cap(output)

    def cap(self, output: Any) -> Any:
        """``output`` if it fits ``max_output_chars``; else its (JSON) text, cut, with a note.

        A string is measured as it is; anything else by its JSON text, which then
        replaces it (a cut JSON document is no longer a value, but it is readable).
        """
        if isinstance(output, str):
            text = output
        else:
            text = json.dumps(output, ensure_ascii=False, default=str)
            if len(text) <= self.max_output_chars:
                return output
        if len(text) <= self.max_output_chars:
            return text
        cut = len(text) - self.max_output_chars
        return (f"{text[:self.max_output_chars]}\n"
                f"[output truncated: {cut} of {len(text)} characters cut]")
