"""``/openapi.json``: an OpenAPI 3.1 document built from the route declarations (``Operation`` rows: the core's
and the dashboard's), their query and body models (the ones the handlers validate with) and the media types
they send; ``served`` lists what the app's router serves, so a test holds the two equal.
"""

from __future__ import annotations

import re
from typing import Any

from starlette.routing import BaseRoute, Mount, Route

import pegasus
from pegasus.gateway.params import parameters

JSON = "application/json"
_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["code", "message"],
    "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}}
_STATUSES = {400: "Bad input (the message names the field)", 401: "No, unknown or revoked token",
             403: "The token's scope is too low", 404: "Unknown task or route", 409: "Illegal transition",
             413: "Body too large", 429: "Queue full", 500: "Internal error", 501: "Not supported by this system",
             503: "System not ready"}


def _responses(op: Any) -> dict[str, Any]:
    ok = {"description": "OK", "content": {media: {"schema": {}} for media in op.produces}}
    responses = {str(status): ok for status in (op.status, *op.also)}
    for status, text in _STATUSES.items():
        content = {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}}
        if status == 404 and op.plain_not_found:  # a dashboard file or diagram that is not there: plain text
            content["text/plain"] = {"schema": {"type": "string"}}
        responses[str(status)] = {"description": text, "content": content}
    return responses


def _operation(op: Any, schemas: dict[str, Any]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "summary": op.summary,
        "operationId": _operation_id(op),
        "responses": _responses(op),
    }
    if op.request is not None:  # the pegasus.requests class the route asks (docs/architecture.md, "Requests")
        entry["x-request"] = op.request.__name__
    entry["security"] = [{"bearer": []}] if op.scope is not None else []
    if op.scope is not None:
        entry["x-scope"] = op.scope.value
    params: list[dict[str, Any]] = [{"name": name, "in": "path", "required": True,
                                     "schema": {"type": "string", "minLength": 1, "pattern": r"^[^/]+$"}}
                                    for name in re.findall(r"{(\w+)}", op.path)]
    if isinstance(op.query, tuple):  # names alone: free text (a route not yet typed)
        params += [{"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
                   for name in op.query]
    elif op.query is not None:
        params += parameters(op.query)
    params += [{"name": name, "in": "header", "required": False, "schema": schema}
               for name, schema in op.headers]
    if params:
        entry["parameters"] = params
    if op.body is not None:
        name = op.body.__name__
        schemas[name] = op.body.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(schemas[name].pop("$defs", {}))
        required = bool(schemas[name].get("required"))
        entry["requestBody"] = {"required": required,
                                "content": {JSON: {"schema": {"$ref": f"#/components/schemas/{name}"}}}}
    elif op.accepts:  # a raw body, read as sent (a webhook's: its signature is over these bytes)
        entry["requestBody"] = {"required": True, "content": {media: {"schema": {}} for media in op.accepts}}
    return entry


def _links(op: Any, operations: list[Any], entry: dict[str, Any]) -> None:
    """OpenAPI links from a route that makes a resource (``op.makes``: its id's field) to the routes of it, so a
    client (and Schemathesis's stateful phase) can follow one; never to a stream, which lasts as long as it."""
    param = "{" + op.makes + "}"
    links = {_operation_id(other): {"operationId": _operation_id(other),
                                    "parameters": {op.makes: f"$response.body#/{op.makes}"}}
             for other in operations
             if other.path.startswith(f"{op.path}/{param}") and "text/event-stream" not in other.produces}
    if links:
        entry["responses"][str(op.status)] = {**entry["responses"][str(op.status)], "links": links}


def _operation_id(op: Any) -> str:
    return re.sub(r"[^a-zA-Z0-9]+", "_", f"{op.method.lower()}{op.path}").strip("_")


def document(operations: list[Any]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Any] = {"Error": _ERROR}
    for op in operations:
        entry = paths.setdefault(op.path, {})[op.method.lower()] = _operation(op, schemas)
        if op.makes:
            _links(op, operations, entry)
    return {"openapi": "3.1.0",
            "info": {"title": "Pegasus HTTP API", "version": pegasus.__version__,
                     "description": "Tasks as state machines on actors (docs/http.md)"},
            "paths": paths,
            "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}}


def served(routes: list[BaseRoute]) -> set[tuple[str, str]]:
    """(method, path) of everything the router serves: a mount as ``<path>/{path}`` (HEAD goes with GET)."""
    found: set[tuple[str, str]] = set()
    for route in routes:
        if isinstance(route, Route):
            found |= {(method, route.path) for method in route.methods or () if method != "HEAD"}
        elif isinstance(route, Mount):
            found.add(("GET", route.path + "/{path}"))
    return found
