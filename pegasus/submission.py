"""What a submitted task must be before Admission takes it: text and metadata within the limits, a batch
within one request.  Pure: no actors, no store."""

from __future__ import annotations

from typing import Any

from pegasus.config import LLMSettings, RuntimeSettings
from pegasus.metadata import check_metadata


def check_task(text: str, metadata: dict[str, Any], machine: str | None, runtime: RuntimeSettings) -> tuple[str, int]:
    """The machine a submitted task runs and its size (text + metadata bytes); ValueError when its text is
    too large or its metadata cannot be kept (``check_metadata``)."""
    size = len(text.encode("utf-8"))
    if size > runtime.max_input_bytes:
        raise ValueError(f"task text is {size} bytes; the limit is {runtime.max_input_bytes}")
    metadata_size = check_metadata(metadata, max_bytes=runtime.max_message_bytes)
    return machine or runtime.default_machine, size + metadata_size


def check_tier(tier: str | None, llm: LLMSettings) -> None:
    """ValueError, naming the tiers there are, when a task names a tier the system has not."""
    if tier is not None and tier not in llm.tier_names():
        raise ValueError(f"unknown tier {tier!r}; the tiers are {', '.join(llm.tier_names())} ([llm.tiers])")


def check_batch_size(size: int, runtime: RuntimeSettings) -> None:
    """ValueError when the tasks of one request are together larger than a request may be."""
    if size > runtime.max_message_bytes:
        raise ValueError(f"the tasks are {size} bytes together; the limit of one request is "
                         f"{runtime.max_message_bytes} (submit them in smaller batches)")


def numbered(index: int, error: Exception) -> str:
    """A batch's error names its task as a person counts them: from 1."""
    return f"task {index + 1}: {error}"
