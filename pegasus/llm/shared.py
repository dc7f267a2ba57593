"""What every model client of a process shares: the SDK's HTTP library and one TLS context.

The SDK would parse the trust store into a TLS context per client; one per process serves them all,
and a pool that makes it before forking shares its pages with its workers (docs/memory.md).  It is
the context the HTTP library would make itself, so certificates are checked the same way.
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
