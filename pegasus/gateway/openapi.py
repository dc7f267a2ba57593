"""``/openapi.json``: an OpenAPI 3.1 document built from the route table and the body models."""

from __future__ import annotations

import re
from typing import Any

import pegasus

_ERROR = {"type": "object", "required": ["error"], "properties": {"error": {
    "type": "object", "required": ["code", "message"],
    "properties": {"code": {"type": "string"}, "message": {"type": "string"}}}}}
_STATUSES = {400: "Bad input (the message names the field)", 401: "No, unknown or revoked token",
             403: "The token's scope is too low", 404: "Unknown task or route", 409: "Illegal transition",
             413: "Body too large", 429: "Queue full", 503: "System not ready"}


def document(operations: list[Any]) -> dict[str, Any]:
    paths: dict[str, dict[str, Any]] = {}
    schemas: dict[str, Any] = {"Error": _ERROR}
    for op in operations:
        entry: dict[str, Any] = {
            "summary": op.summary,
            "operationId": re.sub(r"[^a-zA-Z0-9]+", "_", f"{op.method.lower()}{op.path}").strip("_"),
            "responses": {str(op.status): {"description": "OK"},
                          **{str(status): {"description": text, "content": {"application/json": {
                              "schema": {"$ref": "#/components/schemas/Error"}}}} for status, text in _STATUSES.items()}},
        }
        if op.request is not None:  # the pegasus.requests class the route asks (docs/architecture.md, "Requests")
            entry["x-request"] = op.request.__name__
        if op.scope is not None:
            entry["security"] = [{"bearer": []}]
            entry["x-scope"] = op.scope.value
        else:
            entry["security"] = []
        parameters = [{"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                      for name in re.findall(r"{(\w+)}", op.path)]
        parameters += [{"name": name, "in": "query", "required": False, "schema": {"type": "string"}}
                       for name in op.query]
        if parameters:
            entry["parameters"] = parameters
        if op.body is not None:
            name = op.body.__name__
            schemas[name] = op.body.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas.update(schemas[name].pop("$defs", {}))
            entry["requestBody"] = {"required": op.method == "POST" and name in ("SubmitBody", "MessageBody",
                                                                                 "ScheduleBody"),
                                    "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}
        paths.setdefault(op.path, {})[op.method.lower()] = entry
    return {"openapi": "3.1.0",
            "info": {"title": "Pegasus HTTP API", "version": pegasus.__version__,
                     "description": "Tasks as state machines on actors (docs/http.md)"},
            "paths": paths,
            "components": {"schemas": schemas, "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}}}
