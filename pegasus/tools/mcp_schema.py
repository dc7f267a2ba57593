"""Arguments of an MCP tool checked against its JSON schema (jsonschema, which the mcp SDK brings),
as a pydantic model the registry validates with like any tool's."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from pegasus.tools.registry import ToolArgumentError


def _problems(schema: dict[str, Any], data: Any) -> list[tuple[str, str]]:
    """(field, message) for each way ``data`` breaks ``schema`` (jsonschema; the mcp SDK depends on it)."""
    import jsonschema  # type: ignore[import-untyped]  # noqa: PLC0415 - no stubs; the mcp SDK brings it

    try:
        validator = jsonschema.validators.validator_for(schema)(schema)
        validator.check_schema(schema)
    except jsonschema.SchemaError:
        validator = jsonschema.Draft202012Validator({"type": "object"})
    found = []
    for error in sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(part) for part in error.absolute_path)
        if not where and error.validator == "required":
            missing = re.match(r"'([^']+)'", error.message)
            where = missing.group(1) if missing else ""
        found.append((where or "<arguments>", error.message))
    return found


def args_model(tool: str, schema: dict[str, Any]) -> type[BaseModel]:
    """A pydantic model that checks arguments against ``schema`` and reports that schema as its own."""
    schema = dict(schema or {"type": "object"})
    schema.setdefault("type", "object")

    class McpArguments(BaseModel):
        model_config = ConfigDict(extra="allow", frozen=True)

        @model_validator(mode="before")
        @classmethod
        def _check(cls, data: Any) -> Any:
            problems = _problems(schema, data)
            if problems:
                raise ToolArgumentError(tool, [f for f, _ in problems],
                                        f"tool {tool!r}: bad argument(s) " + "; ".join(f"{f}: {m}" for f, m in problems))
            return data

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return json.loads(json.dumps(schema))

    McpArguments.__name__ = McpArguments.__qualname__ = re.sub(r"\W", "_", f"{tool}_arguments")
    return McpArguments
