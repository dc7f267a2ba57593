"""Optional embedding search: vectors from an OpenAI-compatible ``/embeddings`` endpoint, fused with BM25.

Vectors are float32 BLOBs.  The endpoint is called only by the process that asks
for a write or a search from outside the system (the CLI, ``Client``, import),
never by the supervisor: a model call in its mailbox would stall every task.
Rows written inside the system (the memory tools, the reflector) stay without a
vector and are ranked by BM25 alone.  Any failure of the endpoint -- not
configured, unreachable, a 400 -- gives None: the caller searches with FTS5 alone.
"""

from __future__ import annotations

import math
import os
from array import array
from collections.abc import Sequence
from typing import Any

from pegasus.config import LLMSettings, MemorySettings

RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al. 2009): rank, not raw score, is what is fused


def pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def unpack(blob: bytes) -> list[float]:
    values = array("f")
    values.frombytes(blob)
    return values.tolist()


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    if len(a) != len(b):
        return 0.0  # a vector of another model: not comparable
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


def nearest(rows: list[tuple[str, str, bytes]], query: Sequence[float]) -> list[tuple[str, str, float]]:
    """(kind, ref, cosine) of each row, most similar first."""
    scored = [(kind, ref, cosine(unpack(blob), query)) for kind, ref, blob in rows]
    return sorted(scored, key=lambda row: -row[2])


def fuse(*rankings: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """Reciprocal rank fusion of several rankings of (kind, ref, score): sum of 1 / (RRF_K + rank)."""
    fused: dict[tuple[str, str], float] = {}
    for ranking in rankings:
        for rank, (kind, ref, _) in enumerate(ranking, start=1):
            fused[(kind, ref)] = fused.get((kind, ref), 0.0) + 1.0 / (RRF_K + rank)
    return [(kind, ref, score) for (kind, ref), score in sorted(fused.items(), key=lambda item: -item[1])]


def embed(texts: list[str], memory: MemorySettings, llm: LLMSettings) -> list[list[float]] | None:
    """The vectors of ``texts`` from the configured endpoint; None when none is set or the call fails."""
    if not memory.embeddings_model or not texts:
        return None
    import openai  # the SDK only where embeddings are used

    key_env = memory.embeddings_api_key_env or llm.api_key_env
    client: Any = openai.OpenAI(base_url=memory.embeddings_base_url or llm.base_url or None,
                                api_key=(os.environ.get(key_env) if key_env else None) or "not-needed",
                                timeout=llm.timeout_s, max_retries=llm.max_retries)
    try:
        reply = client.embeddings.create(model=memory.embeddings_model, input=texts)
        return [list(item.embedding) for item in sorted(reply.data, key=lambda item: item.index)]
    except openai.OpenAIError:
        return None
    finally:
        client.close()
