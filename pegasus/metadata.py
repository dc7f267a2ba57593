"""Task metadata: the JSON-like values a client may attach to a task, checked before they are kept.

Metadata travels in checkpoints (msgpack) and the store, so a value msgpack
cannot carry (an int of 2**70, 900 levels of nesting) must be refused at submit
with a message naming where it is, never found later as an internal error.
The walk is iterative: a deeply nested value cannot exhaust the stack here.
Pure: no Thespian, no I/O.
"""

from __future__ import annotations

import json
import math
from typing import Any

MAX_DEPTH = 32  # containers inside containers; real metadata is a few levels deep
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # what msgpack and SQLite carry as integers
_PATH_CHARS = 80  # an error shows at most this much of the path


def _where(path: str) -> str:
    return path if len(path) <= _PATH_CHARS else path[:_PATH_CHARS] + "..."


def check_metadata(metadata: Any, *, max_bytes: int, name: str = "metadata") -> int:
    """The size in bytes of ``metadata`` as JSON; ValueError naming the first value that cannot be kept.

    Accepted: a dict with string keys whose values are dicts, lists, strings,
    finite floats, booleans, None and integers within int64, nested at most
    ``MAX_DEPTH`` deep, at most ``max_bytes`` as JSON.
    """
    if not isinstance(metadata, dict):
        raise ValueError(f"{name} must be an object (a dict), got {type(metadata).__name__}")
    stack: list[tuple[Any, str, int]] = [(metadata, name, 1)]
    while stack:
        value, path, depth = stack.pop()
        if isinstance(value, dict):
            if depth > MAX_DEPTH:
                raise ValueError(f"{name} is nested more than {MAX_DEPTH} levels deep (at {_where(path)})")
            for key, item in value.items():
                if not isinstance(key, str):
                    raise ValueError(f"{_where(path)}: keys must be strings, got {type(key).__name__} {key!r:.40}")
                stack.append((item, f"{path}.{key}", depth + 1))
        elif isinstance(value, (list, tuple)):
            if depth > MAX_DEPTH:
                raise ValueError(f"{name} is nested more than {MAX_DEPTH} levels deep (at {_where(path)})")
            stack.extend((item, f"{path}[{index}]", depth + 1) for index, item in enumerate(value))
        elif isinstance(value, bool) or value is None or isinstance(value, str):
            continue
        elif isinstance(value, int):
            if not INT64_MIN <= value <= INT64_MAX:
                raise ValueError(f"{_where(path)}: integer {value:.3g} is outside the 64-bit range "
                                 f"(-2**63 to 2**63-1); send it as a string")
        elif isinstance(value, float):
            if not math.isfinite(value):
                raise ValueError(f"{_where(path)}: {value} is not a JSON number")
        else:
            raise ValueError(f"{_where(path)}: {type(value).__name__} is not a JSON type "
                             f"(objects, arrays, strings, numbers, booleans and null only)")
    size = len(json.dumps(metadata, ensure_ascii=False).encode("utf-8"))
    if size > max_bytes:
        raise ValueError(f"{name} is {size} bytes as JSON; the limit is {max_bytes}")
    return size
