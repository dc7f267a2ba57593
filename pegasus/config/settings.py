"""Configuration: one place for the defaults, pure parsing, files read at the edge.

Layers, later ones win: the code defaults (``pegasus.config.sections``), a user file
(``--config``, ``$PEGASUS_CONFIG`` or ``<state dir>/pegasus.toml``), then the environment:
``PEGASUS_<SECTION>__<KEY>=value`` (a TOML value when it parses as one, else a string) and
``PEGASUS_HOME`` for the state directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, model_validator

from pegasus.config.sections import (
    AgentSettings, CognitionSettings, ConventionSettings, HttpSettings, LLMSettings, LoggingSettings, McpSettings,
    MemorySettings, PoolSettings, RetrySettings, RuntimeSettings, StateSettings, StoreSettings, SubtaskSettings, SystemSettings,
    TelemetrySettings, ToolSettings, VerificationSettings, _Section, home_dir,
)
from pegasus.errors import ConfigError

ENV_PREFIX = "PEGASUS_"


class Settings(_Section):
    # Each section's default is {} validated by this model's validator: the section's own class is never called,
    # which would build its validator too (~18 ms of each process's first Settings(), a CLI command's among them).
    runtime: RuntimeSettings = Field(default_factory=dict, validate_default=True)
    pools: PoolSettings = Field(default_factory=dict, validate_default=True)
    cognition: CognitionSettings = Field(default_factory=dict, validate_default=True)
    verification: VerificationSettings = Field(default_factory=dict, validate_default=True)
    retry: RetrySettings = Field(default_factory=dict, validate_default=True)
    system: SystemSettings = Field(default_factory=dict, validate_default=True)
    convention: ConventionSettings = Field(default_factory=dict, validate_default=True)
    tools: ToolSettings = Field(default_factory=dict, validate_default=True)
    subtasks: SubtaskSettings = Field(default_factory=dict, validate_default=True)
    llm: LLMSettings = Field(default_factory=dict, validate_default=True)
    mcp: McpSettings = Field(default_factory=dict, validate_default=True)
    http: HttpSettings = Field(default_factory=dict, validate_default=True)
    state: StateSettings = Field(default_factory=dict, validate_default=True)
    store: StoreSettings = Field(default_factory=dict, validate_default=True)
    logging: LoggingSettings = Field(default_factory=dict, validate_default=True)
    memory: MemorySettings = Field(default_factory=dict, validate_default=True)
    agent: AgentSettings = Field(default_factory=dict, validate_default=True)
    telemetry: TelemetrySettings = Field(default_factory=dict, validate_default=True)

    @model_validator(mode="after")
    def _frames_hold_a_request(self) -> Settings:
        if self.system.max_frame_bytes < 2 * self.runtime.max_message_bytes:
            raise ValueError(f"system.max_frame_bytes ({self.system.max_frame_bytes}) must be at least twice "
                             f"runtime.max_message_bytes ({self.runtime.max_message_bytes}): a frame carries a "
                             "whole request")
        return self

    def state_dir(self) -> Path:
        """Where state, logs and Thespian's log live; never the working directory."""
        return Path(self.state.home).expanduser().resolve() if self.state.home else home_dir(os.environ)

    def logs_dir(self) -> Path:
        return self.state_dir() / "logs"

    def with_overrides(self, overrides: Mapping[str, Any]) -> Settings:
        """A copy with ``{"section": {"key": value}}`` merged in, validated again."""
        return from_layers(self.model_dump(), overrides)


# -- pure parsing ---------------------------------------------------------------------


def _deep_merge(base: dict[str, Any], layer: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in layer.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _explain(exc: ValidationError, origin: str) -> ConfigError:
    problems = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"])
        problems.append(f"{key}: {error['msg']}")
    return ConfigError(f"invalid configuration ({origin}): " + "; ".join(problems))


def from_layers(*layers: Mapping[str, Any], origin: str = "settings") -> Settings:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = _deep_merge(merged, layer)
    try:
        return Settings.model_validate(merged)
    except ValidationError as exc:
        raise _explain(exc, origin) from None


def parse_toml(text: str, origin: str = "<text>") -> dict[str, Any]:
    import tomllib  # noqa: PLC0415 - read at the edge (a CLI, a test): a system's processes get JSON, never TOML

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{origin} is not valid TOML: {exc}") from None


def parse(text: str, origin: str = "<text>") -> Settings:
    """Settings from TOML text; ConfigError names the bad key."""
    return from_layers(parse_toml(text, origin), origin=origin)


def env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """The ``PEGASUS_<SECTION>__<KEY>`` variables as a settings layer."""
    import tomllib  # noqa: PLC0415 - as in parse_toml

    layer: dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith(ENV_PREFIX) or "__" not in name:
            continue
        section, _, key = name[len(ENV_PREFIX):].lower().partition("__")
        try:
            value: Any = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw
        layer.setdefault(section, {})[key] = value
    return layer


# -- the edge: files and the environment ---------------------------------------------------


def shipped_text() -> str:
    """The text of the shipped ``config/pegasus.toml`` (package ``pegasus.defaults``)."""
    return resources.files("pegasus.defaults").joinpath("pegasus.toml").read_text(encoding="utf-8")


def load(path: str | Path | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    """Defaults, then the user file, then the environment."""
    environ = os.environ if environ is None else environ
    layers: list[Mapping[str, Any]] = [Settings().model_dump()]
    origin = "defaults"
    candidate = path or environ.get("PEGASUS_CONFIG")
    if candidate is None:
        implicit = home_dir(environ) / "pegasus.toml"
        candidate = implicit if implicit.is_file() else None
    if candidate is not None:
        file = Path(candidate).expanduser()
        try:
            text = file.read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {file}: {exc.strerror}") from None
        layers.append(parse_toml(text, str(file)))
        origin = str(file)
    env = env_layer(environ)
    if env:
        layers.append(env)
        origin += " + environment"
    return from_layers(*layers, origin=origin)
