"""Optional embedding search: vectors from an OpenAI-compatible ``/embeddings`` endpoint, fused with BM25.

Vectors are float32 BLOBs.  The supervisor never calls the endpoint (a model call in its mailbox
would stall every task): the CLI and ``Client`` embed their own searches and writes, an llm pool
worker the rest.  A call is bounded by ``[memory] embeddings_timeout_s`` and never retried, and
``Embedded.error`` says what happened, so a caller warns instead of answering "nothing found".
"""

from __future__ import annotations

import math
import operator
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pegasus.config import LLMSettings, MemorySettings
from pegasus.requests.memory import MAX_DIMENSIONS

MAX_ANSWER_BYTES = 4 << 20  # of an embed stage's vectors: 256 rows of 3,072 floats are 3 MiB
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
    dot = sum(map(operator.mul, a, b))
    norm = math.sqrt(sum(map(operator.mul, a, a))) * math.sqrt(sum(map(operator.mul, b, b)))
    return dot / norm if norm else 0.0


def nearest(rows: list[tuple[str, str, bytes]], query: Sequence[float],
            limit: int | None = None) -> list[tuple[str, str, float]]:
    """(kind, ref, cosine) of the ``limit`` rows most similar to ``query``, best first.  A vector of other
    dimensions (another model's) is not comparable: left out.  With numpy one matrix product, else pure Python.
    A search keeps its matrix instead (``pegasus.memory.vector_index``) where numpy is installed; this ranks
    rows read afresh (docs/agent-memory.md: the cost of each)."""
    size = 4 * len(query)  # float32 bytes
    same = [row for row in rows if len(row[2]) == size]
    if not same:
        return []
    try:
        import numpy as np
    except ImportError:
        scored = sorted(((kind, ref, cosine(unpack(blob), query)) for kind, ref, blob in same), key=lambda r: -r[2])
        return scored[:limit]
    # float32 throughout: a float64 query would make numpy copy the whole matrix
    q = np.asarray(query, dtype=np.float32)
    matrix = np.frombuffer(b"".join(blob for _, _, blob in same), dtype=np.float32).reshape(len(same), len(query))
    norms = np.sqrt(np.einsum("ij,ij->i", matrix, matrix)) * float(np.sqrt(q @ q))
    cosines = np.divide(matrix @ q, norms, out=np.zeros(len(same), dtype=np.float32), where=norms > 0)
    best = np.argsort(-cosines, kind="stable")[:limit]
    return [(same[i][0], same[i][1], float(cosines[i])) for i in best.tolist()]


def fuse(*rankings: list[tuple[str, str, float]]) -> list[tuple[str, str, float]]:
    """Reciprocal rank fusion of several rankings of (kind, ref, score): sum of 1 / (RRF_K + rank)."""
    fused: dict[tuple[str, str], float] = {}
    for ranking in rankings:
        for rank, (kind, ref, _) in enumerate(ranking, start=1):
            fused[(kind, ref)] = fused.get((kind, ref), 0.0) + 1.0 / (RRF_K + rank)
    return [(kind, ref, score) for (kind, ref), score in sorted(fused.items(), key=lambda item: -item[1])]


@dataclass(frozen=True)
class Embedded:
    """The vectors of an embed call, or why there are none (``error``; both None: embeddings are off)."""

    vectors: list[list[float]] | None = None
    error: str | None = None


def configured(memory: MemorySettings) -> bool:
    return bool(memory.embeddings_model)


def embed(texts: list[str], memory: MemorySettings, llm: LLMSettings) -> Embedded:
    """The vectors of ``texts`` from the configured endpoint: one call, at most ``embeddings_timeout_s``, no retry."""
    if not configured(memory) or not texts:
        return Embedded()
    import openai  # the SDK only where embeddings are used

    key_env = memory.embeddings_api_key_env or llm.api_key_env
    base_url = memory.embeddings_base_url or llm.base_url or None
    client: Any = openai.OpenAI(base_url=base_url, api_key=(os.environ.get(key_env) if key_env else None)
                                or "not-needed", timeout=memory.embeddings_timeout_s, max_retries=0)
    try:
        reply = client.embeddings.create(model=memory.embeddings_model, input=texts)
        vectors = [list(item.embedding) for item in sorted(reply.data, key=lambda item: item.index)]
    except openai.APITimeoutError:
        return Embedded(error=f"the embeddings endpoint {base_url or 'of [llm]'} did not answer within "
                              f"{memory.embeddings_timeout_s:g}s ([memory] embeddings_timeout_s)")
    except openai.APIConnectionError as exc:
        return Embedded(error=f"the embeddings endpoint {base_url or 'of [llm]'} is unreachable: {exc}")
    except openai.APIStatusError as exc:
        return Embedded(error=f"the embeddings endpoint {base_url or 'of [llm]'} answered {exc.status_code}: "
                              f"{_short(exc.message)}")
    except (openai.OpenAIError, ValueError, TypeError) as exc:
        return Embedded(error=f"the embeddings endpoint {base_url or 'of [llm]'} failed: {_short(str(exc))}")
    finally:
        client.close()
    if len(vectors) != len(texts) or not all(vectors) or any(len(v) > MAX_DIMENSIONS for v in vectors):
        return Embedded(error=f"the embeddings endpoint {base_url or 'of [llm]'} answered {len(vectors)} vectors "
                              f"for {len(texts)} texts (or an empty or oversized one)")
    if not all(math.isfinite(x) for v in vectors for x in v):
        return Embedded(error=f"the embeddings endpoint {base_url or 'of [llm]'} answered a vector with inf or nan")
    return Embedded(vectors)


def embed_payload(texts: list[str], memory: MemorySettings, llm: LLMSettings) -> tuple[dict[str, Any], str | None]:
    """An embed stage's answer: ``{"vectors": [float32 bytes, ...]}`` (compact in a message), or why not."""
    if not configured(memory):
        return {}, "no embeddings endpoint is configured ([memory] embeddings_model)"
    found = embed(texts, memory, llm)
    if found.vectors is None:
        return {}, found.error or "no vectors"
    vectors = [pack(vector) for vector in found.vectors]
    size = sum(map(len, vectors))
    if size > MAX_ANSWER_BYTES:  # a message must fit a frame ([system] max_frame_bytes, 16 MiB by default)
        return {}, f"{len(vectors)} vectors are {size} bytes, over {MAX_ANSWER_BYTES}: lower [memory] embeddings_batch"
    return {"vectors": vectors}, None


def _short(text: str, limit: int = 200) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "..."
