"""One TLS context per process for every model client (pegasus.llm.shared): each SDK client made its
own before, parsing the trust store again (~0.8 MiB each, per tier, in every llm worker)."""

from __future__ import annotations

import ssl
from typing import Any

from pegasus.config import LLMSettings
from pegasus.llm import shared
from pegasus.llm.client import ChatClient
from tests.support.fake_openai import FakeOpenAI, completion


def _tls_of(client: ChatClient) -> Any:
    return client._client()._client._transport._pool._ssl_context  # SDK -> HTTP client -> transport -> pool


def test_every_model_client_of_a_process_uses_one_tls_context_that_verifies() -> None:
    """Two clients (two tiers' endpoints) share the process's context; it checks certificates and host
    names as the SDK's own would, and a call still goes through."""
    with FakeOpenAI([completion("one")]) as server:
        first = ChatClient(LLMSettings(provider="openai", base_url=server.url, model="m", api_key_env=""))
        second = ChatClient(LLMSettings(provider="openai", base_url="https://example.invalid/v1", model="n",
                                        api_key_env=""))
        assert _tls_of(first) is _tls_of(second) is shared.tls_context()
        assert first.complete([{"role": "user", "content": "hi"}]).content == "one"
    context = shared.tls_context()
    assert (context.verify_mode, context.check_hostname) == (ssl.CERT_REQUIRED, True)
    assert context.cert_store_stats() == shared.http_library().create_ssl_context().cert_store_stats()  # same trust
