"""The one msgpack codec of Pegasus: typed records, and plain values.

A record (``encode``/``decode``) is an envelope ``{"pegasus": VERSION, "type":
NAME, "data": {...}}``: the version and type are checked on decode, so bytes of
another program, of a future format or of a truncated write fail with a clear
CodecError instead of a half-built object.  A plain value (``pack``/``unpack``:
JSON-like data such as a checkpoint's delta, a journal result, a task's
metadata column) is msgpack with the same options everywhere.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgpack
from pydantic import BaseModel, ValidationError

from pegasus.errors import CodecError
from pegasus.task import models
from pegasus.task.events import Event

VERSION = 1

_REGISTRY: dict[str, type[BaseModel]] = {
    cls.__name__: cls
    for cls in (
        models.TaskContext, models.Plan, models.PlanStep, models.ActionResult, models.Reflection,
        models.PostTaskReflection, models.StateTransition, models.TaskSnapshot, Event,
    )
}

M = TypeVar("M", bound=BaseModel)


def register(cls: type[M]) -> type[M]:
    """Make another model encodable (usable as a class decorator)."""
    _REGISTRY[cls.__name__] = cls
    return cls


def pack(value: Any) -> bytes:
    """A JSON-like value as msgpack (bytes stay bytes, strings stay strings)."""
    data: bytes = msgpack.packb(value, use_bin_type=True)
    return data


class Packed(bytes):
    """A value's msgpack bytes already made (sliced out of a record, say): ``packed`` keeps them as they are."""


def packed(value: Any) -> bytes:
    """``pack(value)``, or ``value`` itself when it is ``Packed`` already."""
    return value if isinstance(value, Packed) else pack(value)


UNPACK_ERRORS = (msgpack.UnpackException, ValueError)  # what ``unpack`` raises for bytes that are not a value


def unpack(data: bytes | bytearray | memoryview) -> Any:
    """The value ``pack`` made; one of ``UNPACK_ERRORS`` when it is not one."""
    return msgpack.unpackb(data, raw=False)


def encode(record: BaseModel) -> bytes:
    name = type(record).__name__
    if _REGISTRY.get(name) is not type(record):
        raise CodecError(f"{name} is not a registered Pegasus record type")
    return pack({"pegasus": VERSION, "type": name, "data": record.model_dump(mode="json")})


def decode(data: bytes, expected: type[M] | None = None) -> Any:
    """The record in ``data``; CodecError for anything that is not one."""
    cls, fields = _opened(data, expected)
    try:
        return cls.model_validate(fields)
    except ValidationError as exc:
        raise CodecError(f"invalid {cls.__name__} record: {exc}") from exc


def _opened(data: bytes, expected: type[M] | None) -> tuple[type[BaseModel], Any]:
    """The record type ``data`` names and its fields; CodecError for anything that is not a record."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise CodecError(f"expected bytes, got {type(data).__name__}")
    try:
        envelope = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (msgpack.UnpackException, ValueError) as exc:
        raise CodecError(f"not msgpack: {exc}") from exc
    if not isinstance(envelope, dict) or "pegasus" not in envelope:
        raise CodecError("not a Pegasus record (no envelope)")
    if envelope["pegasus"] != VERSION:
        raise CodecError(f"unsupported record version {envelope['pegasus']!r} (this Pegasus reads {VERSION})")
    name = envelope.get("type")
    cls = _REGISTRY.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CodecError(f"unknown record type {name!r}")
    if expected is not None and cls is not expected:
        raise CodecError(f"expected a {expected.__name__} record, got {name}")
    return cls, envelope.get("data")
