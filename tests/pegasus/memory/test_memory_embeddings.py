"""Embedding search: vectors from an OpenAI-compatible /embeddings endpoint (the fake one, over real HTTP, through the
openai SDK) find a memory that shares no word with the question, fused with BM25; when the endpoint fails or is not
configured, search falls back to FTS5 alone."""

from __future__ import annotations

from pathlib import Path

from pegasus.config import LLMSettings, MemorySettings
from pegasus.memory import MemoryStore
from pegasus.memory.embeddings import Embedded, embed, pack
from pegasus.store import Store
from tests.support.fake_openai import EMBEDDING_MODEL, FakeOpenAI

FACTS = {"garage/parking": "The automobile is parked in bay 4 of the garage.",
         "ops/deploy-key": "The deploy key is in the vault.",
         "people/alice": "Alice prefers email over phone calls.",
         "office/lunch": "Lunch is at noon on Fridays, where the team meets."}


def filled(tmp_path: Path, memory: MemorySettings, llm: LLMSettings) -> MemoryStore:
    store = MemoryStore(Store(tmp_path / "pegasus.db"), memory)
    vectors = embed(list(FACTS.values()), memory, llm).vectors
    for index, (path, content) in enumerate(FACTS.items()):
        store.write_fact(path, content, vector=pack(vectors[index]) if vectors else None)
    return store


def test_embeddings_find_what_shares_no_word_with_the_question(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        memory = MemorySettings(embeddings_model=EMBEDDING_MODEL)
        llm = LLMSettings(base_url=server.url, api_key_env="")
        store = filled(tmp_path, memory, llm)
        question = "where did I leave my car?"
        assert "garage/parking" not in [item.title for item in store.search(question)]  # BM25 alone: no shared word
        vector = embed([question], memory, llm).vectors
        assert vector is not None
        found = store.search(question, k=2, query_vector=vector[0])
        assert found[0].id == "fact:garage/parking@1"
        # Fused with BM25: a question whose words match is still answered by its fact.
        keyed = store.search("deploy key", k=2, query_vector=embed(["deploy key"], memory, llm).vectors[0])  # type: ignore[index]
        assert keyed[0].id == "fact:ops/deploy-key@1"
        assert server.requests[0]["encoding_format"] == "base64"  # the SDK's default, decoded by it


def test_a_failing_or_absent_endpoint_means_full_text_search_alone_and_says_why(tmp_path: Path) -> None:
    with FakeOpenAI() as server:
        llm = LLMSettings(base_url=server.url, api_key_env="")
        unknown = MemorySettings(embeddings_model="no-such-model")
        refused = embed(["where is the deploy key?"], unknown, llm)  # the endpoint's 404
        assert refused.vectors is None and "answered 404" in (refused.error or "")
        empty = embed([""], MemorySettings(embeddings_model=EMBEDDING_MODEL), llm)  # its 400
        assert empty.vectors is None and "answered 400" in (empty.error or "")
        store = filled(tmp_path, unknown, llm)  # no vectors stored
        asked = len(server.requests)
    assert asked == 2 + 1  # one request per call: never retried (issue 29), whatever [llm] max_retries says
    assert embed(["x"], MemorySettings(), llm) == Embedded()  # not configured: nothing is asked, nothing to say
    gone = embed(["x"], MemorySettings(embeddings_model=EMBEDDING_MODEL, embeddings_timeout_s=2), llm)
    assert gone.vectors is None and "unreachable" in (gone.error or "")  # server stopped
    assert store.search("deploy key", query_vector=None)[0].id == "fact:ops/deploy-key@1"
