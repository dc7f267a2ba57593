"""Idempotency keys: a request that carries a key is carried out once.

A key lives in a *scope* (``submit`` for task submissions; later ones, such as
an HTTP ``Idempotency-Key``, a webhook's delivery id or a schedule's slot, get
their own) and stands for the task its first request created, in the store,
for good.  The request's content is kept as a fingerprint: the same key with
the same content answers that task again; with other content it is a conflict
(a client bug reusing keys must not get someone else's task silently).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pegasus.errors import PegasusError

SUBMIT = "submit"
SCHEDULE = "schedule"  # a schedule's slot (pegasus.triggers.schedules.slot_key)
WEBHOOK = "webhook"  # a webhook's delivery id (pegasus.triggers.webhooks)
MAX_KEY_LENGTH = 200


class IdempotencyConflict(PegasusError):
    """A key already used with other content (``task_id``: the task it stands for, if any)."""

    def __init__(self, message: str, key: str, task_id: str | None = None) -> None:
        self.key, self.task_id = key, task_id
        super().__init__(message)


@dataclass(frozen=True)
class Claim:
    """A request's key: its scope, the key, and the fingerprint of what it asks."""

    scope: str
    key: str
    fingerprint: str

    def conflict(self, task_id: str) -> IdempotencyConflict:
        return IdempotencyConflict(f"idempotency key {self.key!r} was used for task {task_id} with other content "
                                   "(text, machine, priority or metadata differ); a new task needs a new key",
                                   self.key, task_id)


def submit_claim(key: str, text: str, machine: str, priority: int, metadata: dict[str, Any],
                 scope: str = SUBMIT, tier: str | None = None) -> Claim:
    """The claim of a submission: what makes a task (its source and the client's options do not).  A tier
    counts only when given: a claim without one keeps the fingerprint it had before tiers existed."""
    made = {"text": text, "machine": machine, "priority": priority, "metadata": metadata}
    content = json.dumps({**made, "tier": tier} if tier is not None else made,
                         sort_keys=True, separators=(",", ":"), default=str)
    return Claim(scope, key, hashlib.sha256(content.encode("utf-8")).hexdigest())


def check_batch(claims: Iterable[Claim | None]) -> None:
    """One request may repeat a key only with the same content (the repeat answers the first's task)."""
    seen: dict[tuple[str, str], Claim] = {}
    for index, claim in enumerate(claims):
        if claim is None:
            continue
        first = seen.setdefault((claim.scope, claim.key), claim)
        if first.fingerprint != claim.fingerprint:
            raise IdempotencyConflict(f"task {index + 1}: idempotency key {claim.key!r} is given twice in this request "
                                      "with different content", claim.key)
