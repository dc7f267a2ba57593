"""The query parameters of the HTTP API as pydantic models: the handler validates a request's query with the
same model ``/openapi.json`` describes, so a value the schema allows is one the server takes.

Bounds are the server's: a page of 1 to ``MAX_PAGE`` tasks, a cursor that is a task's ``seq`` (as
``next_cursor`` gives it), an event id within SQLite's integers.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from pegasus.gateway.errors import ApiError
from pegasus.metadata import INT64_MAX
from pegasus.requests import LIST_STATES
from pegasus.requests.tasks import MAX_META

MAX_PAGE = 1000
CURSOR = r"^[1-9][0-9]{0,17}$"  # a task's seq: 18 digits at most are always within SQLite's integers

StateName = Literal[LIST_STATES]  # type: ignore[valid-type]


MetaPair = Annotated[str, Field(pattern=r"^[^=]+=", max_length=1000)]  # key=value, the key not empty


class Query(BaseModel):
    """Query parameters; ones a route does not name are ignored (as a browser's cache-busters are)."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class ListQuery(Query):
    state: StateName | None = Field(None, description="a lifecycle or cognitive state")
    limit: int = Field(50, ge=1, le=MAX_PAGE, description="tasks on the page")
    cursor: str | None = Field(None, pattern=CURSOR, description="next_cursor of the previous page")
    text: str | None = Field(None, min_length=1, max_length=1000, description="every word in the input or the result")
    meta: list[MetaPair] = Field(default_factory=list, max_length=MAX_META,
                                 description="key=value: a top-level metadata value the task has (repeatable)")


class LogQuery(Query):
    after: int = Field(0, ge=0, le=INT64_MAX, description="the next of the previous answer")


class EventsQuery(Query):
    last_event_id: int | None = Field(None, ge=0, le=INT64_MAX, description="as the Last-Event-ID header: "
                                      "the transitions after this one")


def parse_query(model: type[Query], request: Request) -> Any:
    """The request's query as ``model``; ApiError 400 naming the first bad parameter."""
    params = request.query_params
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if name not in params:
            continue
        many = get_origin(field.annotation) is list or any(get_origin(a) is list for a in get_args(field.annotation))
        values[name] = params.getlist(name) if many else params[name]
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise ApiError(400, "bad_request", f"{'.'.join(map(str, first['loc']))}: {first['msg']}") from None


def parameters(model: type[Query]) -> list[dict[str, Any]]:
    """The OpenAPI ``parameters`` (in: query) of ``model``."""
    schema = model.model_json_schema()
    required = set(schema.get("required", []))
    found = []
    for name, prop in schema.get("properties", {}).items():
        prop = dict(prop)
        description = prop.pop("description", None)
        prop.pop("title", None)
        entry: dict[str, Any] = {"name": name, "in": "query", "required": name in required, "schema": prop}
        if description:
            entry["description"] = description
        found.append(entry)
    return found
