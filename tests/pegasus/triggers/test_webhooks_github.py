"""GitHub's webhooks as GitHub sends them (issue 32): its published signature test vector, the ``ping`` a new
hook gets, form-encoded deliveries, the event (``X-GitHub-Event``) in templates and a hook's event filter."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest

from pegasus.errors import WebhookRefused
from pegasus.triggers.webhooks import Delivery, NoTask, check_events, deliver, parse_template, sign, verify

SECRET = b"s3cret"
NOW = 1_800_000_000.0
PULL = json.dumps({"action": "opened", "pull_request": {"title": "Fix it", "number": 7}}).encode()


def github(body: bytes, event: str, content_type: str = "application/json") -> dict[str, str]:
    """The headers GitHub sends with a delivery (their real shapes)."""
    return {"X-GitHub-Delivery": "72d3162e-cc78-11e3-81ab-4c9367dc0958", "X-GitHub-Event": event,
            "X-GitHub-Hook-ID": "292430182", "X-GitHub-Hook-Installation-Target-ID": "79929171",
            "X-GitHub-Hook-Installation-Target-Type": "repository", "User-Agent": "GitHub-Hookshot/044aadd",
            "Content-Type": content_type, "X-Hub-Signature-256": sign(SECRET, body)}


def test_githubs_published_signature_test_vector() -> None:
    # docs.github.com, "Validating webhook deliveries": this secret and payload give this signature
    secret, payload = b"It's a Secret to Everybody", b"Hello, World!"
    expected = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert sign(secret, payload) == expected
    assert verify(secret, {"X-Hub-Signature-256": expected}, payload, NOW) is None


def test_a_signed_ping_is_answered_with_no_task_and_an_unsigned_one_is_refused() -> None:
    ping = json.dumps({"zen": "Design for failure.", "hook_id": 292430182}).encode()
    answer = deliver("gh", 'Review "{pull_request.title}"', SECRET, github(ping, "ping"), ping, NOW)
    assert isinstance(answer, NoTask) and answer.event == "ping"
    headers = {**github(ping, "ping"), "X-Hub-Signature-256": sign(b"other", ping)}
    with pytest.raises(WebhookRefused) as info:
        deliver("gh", "x", SECRET, headers, ping, NOW)
    assert info.value.status == 401


def test_a_form_encoded_delivery_is_read_from_its_payload_field_signed_over_the_raw_body() -> None:
    raw = urlencode({"payload": PULL.decode()}).encode()
    answer = deliver("gh", 'Review "{pull_request.title}" ({@event})', SECRET,
                     github(raw, "pull_request", "application/x-www-form-urlencoded"), raw, NOW)
    assert isinstance(answer, Delivery)
    assert answer.text == 'Review "Fix it" (pull_request)'
    assert answer.metadata["event"] == "pull_request" and answer.metadata["body"]["action"] == "opened"
    for bad in (b"payload=1&other=2", b"nopayload=1", b"payload=%7B"):
        with pytest.raises(WebhookRefused) as info:
            deliver("gh", "x", SECRET, github(bad, "push", "application/x-www-form-urlencoded"), bad, NOW)
        assert (info.value.status, info.value.code) == (400, "bad_body")


def test_a_hooks_event_filter_answers_other_events_with_no_task_saying_so() -> None:
    events = check_events(["push", "pull_request", "push"])
    assert events == ["pull_request", "push"]
    taken = deliver("gh", "{@event}: {action}", SECRET, github(PULL, "pull_request"), PULL, NOW, events)
    assert isinstance(taken, Delivery) and taken.text == "pull_request: opened"
    skipped = deliver("gh", "{@event}", SECRET, github(PULL, "issues"), PULL, NOW, events)
    assert isinstance(skipped, NoTask) and "issues" in skipped.reason and "pull_request, push" in skipped.reason
    unnamed = deliver("gh", "{action}", SECRET, {"X-Hub-Signature-256": sign(SECRET, PULL)}, PULL, NOW, events)
    assert isinstance(unnamed, NoTask) and "without x-github-event" in unnamed.reason
    with pytest.raises(ValueError):
        check_events(["Push Event"])


def test_event_in_a_template_needs_the_header_and_only_event_is_a_delivery_field() -> None:
    with pytest.raises(WebhookRefused) as info:
        deliver("gh", "{@event}", SECRET, {"X-Hub-Signature-256": sign(SECRET, PULL)}, PULL, NOW)
    assert info.value.code == "missing_field"
    with pytest.raises(ValueError):
        parse_template("{@secret}")
