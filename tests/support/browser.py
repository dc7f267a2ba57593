"""A headless Chromium for the dashboard's tests: Debian's Chromium driven by Playwright for Python.

Playwright, not Selenium: its locators wait for what a test expects (a row to appear, a class to
change) without hand-written polling, and it talks to the browser itself (no chromedriver of a
matching version to install). It is launched with the system's Chromium (``executable_path``):
Playwright's own browser downloads are never used. Where neither can be had the tests skip, saying
which is missing (.ci/run installs both).

Debian's ``chromium-headless-shell`` first: the headless build Playwright itself launches by default, the same
Blink without a browser UI.  The full ``chromium`` headless still runs its UI unseen (the omnibox's WebUI
renderer works at every page load): the fallback, at a much higher CPU cost (docs/testing.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

CANDIDATES = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    """The system Chromium: $PEGASUS_CHROMIUM, else the first of CANDIDATES on the PATH."""
    configured = os.environ.get("PEGASUS_CHROMIUM")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (a Playwright ``Browser``), closed afterwards; skips the test when none can run."""
    try:
        from playwright.sync_api import sync_playwright  # noqa: PLC0415 - optional: the test extra
    except ImportError:
        pytest.skip("no browser driver: `pip install playwright` (the [test] extra; .ci/run installs it)")
    path = chromium_path()
    if path is None:
        pytest.skip("no Chromium on this machine: `apt-get install chromium-headless-shell` (.ci/run installs it as root)")
    with sync_playwright() as driver:
        try:  # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
            browser = driver.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        except Exception as exc:  # noqa: BLE001 - a browser that cannot start is a missing browser
            pytest.skip(f"Chromium at {path} did not start: {str(exc).splitlines()[0]}")
        try:
            yield browser
        finally:
            browser.close()
