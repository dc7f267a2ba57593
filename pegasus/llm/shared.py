"""What every model client of a process shares: the SDK's HTTP library and one TLS context.

The SDK makes a TLS context for each client it creates, and the context parses the
trust store: ~0.8 MiB per client, in every llm worker, for each tier's endpoint.  One
context per process serves them all (an ``SSLContext`` serves any number of
connections), and a pool that makes it before forking its workers shares its pages
with all of them (actors/runtime/sharing.py).  It is the context the SDK's HTTP library would
make itself (``create_ssl_context()``: the same trust store, ``SSL_CERT_FILE`` and
``SSL_CERT_DIR`` honoured), so certificates are checked exactly as before.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Any


def http_library() -> ModuleType:
    """The HTTP library the installed SDK is built on: ``httpx``, or ``httpx2`` (openai 3)."""
    import openai  # noqa: PLC0415 - only a model provider needs the SDK

    base = next(cls for cls in openai.DefaultHttpxClient.__mro__
                if cls.__name__ == "Client" and not cls.__module__.startswith("openai"))
    return importlib.import_module(base.__module__.partition(".")[0])


@functools.cache
def tls_context() -> Any:
    """This process's TLS context for model endpoints (made on first use)."""
    return http_library().create_ssl_context()


def http_client() -> Any:
    """A new HTTP client for one SDK client: the SDK's defaults, this process's TLS context."""
    import openai  # noqa: PLC0415

    return openai.DefaultHttpxClient(verify=tls_context())
