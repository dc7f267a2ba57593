"""Checkpoints of a task's cognitive machine: when to write one and what it holds.

Seeds 000 and 001 name the moments: after planning (PLAN_DONE / REASON_DONE),
after every tool step, on suspension, completion and failure (and, here, on
resumption, so a resumed task does not fall back to its suspension).  A
suspension, completion or failure writes the full context; the others write
only what changed since the previous checkpoint (``pegasus.store.delta``), so
the bytes stored per step stay flat however long the task runs.
"""

from __future__ import annotations

from typing import Any

import msgpack
from pydantic import ValidationError

from pegasus import codec
from pegasus.errors import CodecError
from pegasus.store import delta as deltas
from pegasus.task.fsm import TaskFSM
from pegasus.task.models import TaskContext, TaskSnapshot
from pegasus.task.names import CognitiveState

FORMAT = 1
_NONE = object()
FULL_STATES = frozenset({CognitiveState.SUSPENDED, CognitiveState.COMPLETED, CognitiveState.FAILED})
DELTA_EVENTS = frozenset({"PLAN_DONE", "REASON_DONE", "TOOL_CALL_COMPLETED", "TOOL_CALL_FAILED", "STEP_COMPLETED",
                          "ACT_DONE", "MESSAGE_RECEIVED", "TASK_RESUMED"})


class CorruptCheckpoint(CodecError):
    """A checkpoint row cannot be read; names the task and the row."""


def kind_for(to_state: str, event: str) -> str | None:
    """'full', 'delta' or None (no checkpoint) for a transition."""
    if to_state in FULL_STATES:
        return "full"
    if event in DELTA_EVENTS:
        return "delta"
    return None


def encode_full(snapshot: TaskSnapshot) -> bytes:
    """The whole snapshot, history left out (the transitions table holds it)."""
    return codec.encode(snapshot.model_copy(update={"history": []}))


def full_context(data: bytes) -> codec.Packed | None:
    """The context in a full checkpoint, its bytes as the task actor packed them: sliced out, not unpacked and
    packed again (the envelope checked as ``codec.decode`` checks it, and read to its end; the context not
    validated); None for anything else."""
    reader = msgpack.Unpacker(raw=False, strict_map_key=True, max_buffer_size=len(data))  # the default: 100 MiB
    context = None
    try:
        reader.feed(data)
        fields = reader.read_map_header()
        envelope = {reader.unpack(): reader.unpack() for _ in range(fields - 1)}  # "data" comes last (codec.encode)
        if envelope != {"pegasus": codec.VERSION, "type": TaskSnapshot.__name__} or reader.unpack() != "data":
            return None
        for _ in range(reader.read_map_header()):
            if reader.unpack() != "context":
                reader.skip()
                continue
            start = reader.tell()
            reader.skip()
            if data[start] & 0xF0 == 0x80 or data[start] in (0xDE, 0xDF):  # a map: fixmap, map 16, map 32
                context = codec.Packed(data[start:reader.tell()])
        if reader.tell() != len(data):
            return None
    except (*codec.UNPACK_ERRORS, TypeError, IndexError):
        return None
    return context


class Checkpointer:
    """Makes a task's checkpoints, remembering what the last one contained."""

    def __init__(self, snapshot: TaskSnapshot, base: dict[str, Any] | None = None,
                 source: TaskContext | None = None) -> None:
        # The context as the last checkpoint left it (JSON; replaced, never changed in place), and the context it
        # was dumped from (None: unknown): a task run's snapshot keeps both, and gives them back here.
        if base is None:
            base, source = snapshot.context.model_dump(mode="json"), snapshot.context
        self.base: dict[str, Any] = base
        self.source = source

    def make(self, kind: str, task: TaskFSM | TaskSnapshot) -> bytes:
        """The checkpoint of a task (its FSM, read not copied, or a snapshot) as it is now."""
        context = task.context
        current, changed = self._dump(context)
        if kind == "full":
            data = encode_full(task.snapshot() if isinstance(task, TaskFSM) else task)
        else:
            change = deltas.diff(self.base, current) if changed is None else \
                deltas.diff_fields(self.base, current, changed)
            data = codec.pack({"format": FORMAT, "delta": change, "metadata": task.metadata})
        self.base, self.source = current, context
        return data

    def _dump(self, context: TaskContext) -> tuple[dict[str, Any], set[str] | None]:
        """``context`` as JSON, and the fields that may differ from ``base`` (None: any).  A context is never
        changed in place (a transition changes a copy, sharing the fields it leaves: ``pegasus.task.fsm``), so a
        field whose value is still the one ``base`` was dumped from is as ``base`` has it: only the others are
        dumped, and diffed (a whole dump and its diff, a checkpoint)."""
        source = self.source
        if source is None or type(source) is not type(context):
            return context.model_dump(mode="json"), None
        before = source.__dict__
        changed = {name for name, value in context.__dict__.items() if before.get(name, _NONE) is not value}
        return ({**self.base, **context.model_dump(mode="json", include=changed)} if changed else self.base), changed


def rebuild(task_id: str, rows: list[Any]) -> TaskSnapshot:
    """The snapshot that the last full checkpoint and the deltas after it describe.

    ``rows`` are store Checkpoint rows (id, run, kind, state, data), oldest first.
    Raises CorruptCheckpoint naming the bad row.
    """
    if not rows or rows[0].kind != "full":
        raise CorruptCheckpoint(f"task {task_id} has no full checkpoint to start from")
    try:
        base: TaskSnapshot = codec.decode(rows[0].data, TaskSnapshot)
    except CodecError as exc:
        raise CorruptCheckpoint(f"checkpoint {rows[0].id} of task {task_id} is unreadable: {exc}") from None
    context: Any = base.context.model_dump(mode="json")
    metadata = dict(base.metadata)
    for row in rows[1:]:
        try:
            record = codec.unpack(row.data)
            if not isinstance(record, dict) or record.get("format") != FORMAT:
                raise ValueError("not a delta record of a known format")
            context = deltas.apply(context, record["delta"])
            metadata = dict(record.get("metadata") or metadata)
        except (KeyError, TypeError, IndexError, *codec.UNPACK_ERRORS) as exc:
            raise CorruptCheckpoint(f"checkpoint {row.id} of task {task_id} is unreadable: {exc}") from None
    try:
        rebuilt = TaskContext.model_validate(context)
    except ValidationError as exc:
        raise CorruptCheckpoint(f"checkpoints of task {task_id} rebuild an invalid context: {exc}") from None
    return base.model_copy(update={"context": rebuilt, "state": rows[-1].state, "metadata": metadata})
