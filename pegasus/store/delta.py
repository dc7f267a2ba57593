"""Context deltas: what changed in a task's context since its last checkpoint.

A checkpoint after a tool step must not rewrite the whole context (a long
task would write O(n^2) bytes over its life).  ``diff(old, new)`` describes the
change of one JSON-like value into another, recursively: appended list items
(``actions_done`` grows by one result a step), per-index edits of lists of the
same length (a plan step marked completed) and per-key edits of dicts.
``apply(old, delta)`` rebuilds ``new``.  Both are pure.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

# Delta forms (a tagged dict, so a delta is plain msgpack-able data):
#   {"=": value}                      replace with value
#   {"+": [items]}                    list: append items
#   {"i": {index: delta}}             list of equal length: edit these indexes
#   {"k": {key: delta}, "-": [keys]}  dict: edit / add these keys, drop these
Delta = dict[str, Any]


def diff(old: Any, new: Any) -> Delta | None:
    """The delta from ``old`` to ``new``, or None when they are equal."""
    if old == new:
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        edits = {key: d for key in new if (d := diff(old.get(key, _MISSING), new[key])) is not None}
        dropped = [key for key in old if key not in new]
        delta: Delta = {"k": edits}
        if dropped:
            delta["-"] = dropped
        return delta
    if isinstance(old, list) and isinstance(new, list):
        if len(new) > len(old) and new[: len(old)] == old:
            return {"+": new[len(old):]}
        if len(new) == len(old):
            edits_by_index = {str(i): d for i, (a, b) in enumerate(zip(old, new)) if (d := diff(a, b)) is not None}
            return {"i": edits_by_index}
    return {"=": new}


def diff_fields(old: dict[str, Any], new: dict[str, Any], changed: Collection[str]) -> Delta | None:
    """``diff(old, new)`` of two dicts whose values may differ only under the keys ``changed`` (every other
    value the same object, or equal): those alone are compared (a checkpoint's context, of which a transition
    changes a field or two)."""
    edits = {key: d for key in new if key in changed and (d := diff(old.get(key, _MISSING), new[key])) is not None}
    dropped = [key for key in old if key not in new]
    if not edits and not dropped and len(old) == len(new):
        return None
    delta: Delta = {"k": edits}
    if dropped:
        delta["-"] = dropped
    return delta


def apply(old: Any, delta: Delta | None) -> Any:
    """``new`` from ``old`` and ``diff(old, new)``."""
    if delta is None:
        return old
    if "=" in delta:
        return delta["="]
    if "+" in delta:
        return [*old, *delta["+"]]
    if "i" in delta:
        out = list(old)
        for index, edit in delta["i"].items():
            out[int(index)] = apply(out[int(index)], edit)
        return out
    if "k" in delta:
        base = dict(old) if isinstance(old, dict) else {}
        for key in delta.get("-", []):
            base.pop(key, None)
        for key, edit in delta["k"].items():
            base[key] = apply(base.get(key), edit)
        return base
    raise ValueError(f"not a context delta: {sorted(delta)}")


class _Missing:
    """Stands for an absent dict key, so that adding a key diffs to a replacement."""

    def __eq__(self, other: object) -> bool:
        return other is self

    def __hash__(self) -> int:
        return 0


_MISSING = _Missing()
