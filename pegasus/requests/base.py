"""``Request[R]``: a request to the supervisor whose Reply's data is an ``R``, and the Reply itself.

Requests are pydantic models: the supervisor validates each again on arrival (``revalidate``),
so a request built with wrong field types (by a buggy client, bypassing the constructor) gets a
clear error reply instead of corrupting a task.  Building one out of its bounds raises
``InvalidRequest`` naming the field: at the door, before anything is sent.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pegasus.errors import InvalidRequest

R = TypeVar("R")
View = dict[str, Any]  # a reply that is one record (a task's view, a page, a schedule...)
Views = list[dict[str, Any]]  # a reply that is a list of records


class Request(BaseModel, Generic[R]):
    """Base of every client request; ``request_id`` comes back in the Reply, whose data is an ``R``."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)
    request_id: str = Field("", max_length=256)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:  # one clear error naming the field, not pydantic's page
            raise InvalidRequest(problems(exc), _first_field(exc)) from None


def problems(exc: ValidationError) -> str:
    """A validation error on one line: ``field: what is wrong`` for each."""
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'request'}: {e['msg']}" for e in exc.errors())


def _first_field(exc: ValidationError) -> str:
    errors = exc.errors()
    return ".".join(map(str, errors[0]["loc"])) if errors else ""


def revalidate(request: Request[Any]) -> Request[Any]:
    """Validate a received request again; ValueError with a clear text if malformed."""
    try:
        data = {name: getattr(request, name) for name in type(request).model_fields}
    except AttributeError as exc:  # built with model_construct and a field missing
        raise ValueError(f"malformed {type(request).__name__}: {exc}") from None
    try:
        return type(request)(**data)  # the constructor: its bounds, and InvalidRequest naming the field
    except InvalidRequest as exc:
        raise ValueError(f"malformed {type(request).__name__}: {exc}") from None


@dataclass(frozen=True)
class Reply:
    """The answer to every request: ``ok`` with ``data``, or an error with its kind."""

    request_id: str
    ok: bool
    data: Any = None
    error: str | None = None
    error_type: str | None = None
