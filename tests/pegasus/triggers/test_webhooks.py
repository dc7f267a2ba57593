"""The webhook core (pegasus.triggers.webhooks): both signature forms, replays, templates and delivery keys."""

from __future__ import annotations

import json

import pytest

from pegasus.errors import WebhookRefused
from pegasus.triggers.webhooks import deliver, parse_template, render, sign, verify

SECRET = b"s3cret"
BODY = json.dumps({"pull_request": {"title": "Fix {the} bug", "number": 7, "labels": ["a", "b"]},
                   "commits": [{"id": "c1"}]}).encode()
NOW = 1_800_000_000.0


def refused(call, status: int, code: str) -> WebhookRefused:  # type: ignore[no-untyped-def]
    with pytest.raises(WebhookRefused) as info:
        call()
    assert (info.value.status, info.value.code) == (status, code), str(info.value)
    return info.value


def test_github_signature_is_checked_on_the_raw_body() -> None:
    assert verify(SECRET, {"X-Hub-Signature-256": sign(SECRET, BODY)}, BODY, NOW) is None
    refused(lambda: verify(SECRET, {"X-Hub-Signature-256": sign(b"other", BODY)}, BODY, NOW), 401, "bad_signature")
    refused(lambda: verify(SECRET, {"X-Hub-Signature-256": sign(SECRET, BODY)}, BODY + b" ", NOW), 401,
            "bad_signature")
    refused(lambda: verify(SECRET, {}, BODY, NOW), 401, "bad_signature")


def test_timestamped_signature_refuses_replays_older_than_five_minutes() -> None:
    stamp = int(NOW) - 299
    headers = {"X-Pegasus-Timestamp": str(stamp), "X-Pegasus-Signature": sign(SECRET, BODY, stamp)}
    assert verify(SECRET, headers, BODY, NOW) == sign(SECRET, BODY, stamp)
    old = int(NOW) - 301
    refused(lambda: verify(SECRET, {"x-pegasus-timestamp": str(old), "x-pegasus-signature": sign(SECRET, BODY, old)},
                           BODY, NOW), 401, "replayed")
    # the timestamp is signed: moving it forward breaks the signature
    refused(lambda: verify(SECRET, {**headers, "X-Pegasus-Timestamp": str(int(NOW))}, BODY, NOW), 401,
            "bad_signature")
    refused(lambda: verify(SECRET, {"X-Pegasus-Signature": sign(SECRET, BODY, stamp)}, BODY, NOW), 401,
            "bad_signature")


def test_templates_take_dotted_fields_and_never_attributes() -> None:
    body = json.loads(BODY)
    assert render('Review "{pull_request.title}" #{pull_request.number} {{literal}}', body) == \
        'Review "Fix {the} bug" #7 {literal}'
    assert render("{commits.0.id} {pull_request.labels}", body) == 'c1 ["a", "b"]'
    error = refused(lambda: render("{pull_request.author}", body), 400, "missing_field")
    assert "pull_request.author" in str(error)
    refused(lambda: render("{commits.5.id}", body), 400, "missing_field")
    refused(lambda: render("{pull_request.title.__class__}", body), 400, "missing_field")
    refused(lambda: render("{0.__class__}", body), 400, "missing_field")  # a key looked up, not an attribute
    for bad in ("{a[0]}", "a } b", "{ a }", "{a!r}"):
        with pytest.raises(ValueError, match="stray"):
            parse_template(bad)


def test_a_delivery_becomes_text_metadata_and_a_redelivery_key() -> None:
    headers = {"X-Hub-Signature-256": sign(SECRET, BODY), "X-GitHub-Delivery": "d-1"}
    delivery = deliver("gh", 'Review "{pull_request.title}"', SECRET, headers, BODY, NOW)
    assert delivery.text == 'Review "Fix {the} bug"' and delivery.key == "gh:d-1"
    assert delivery.metadata == {"webhook": "gh", "body": json.loads(BODY), "delivery": "d-1"}
    plain = deliver("gh", "x", SECRET, {"X-Hub-Signature-256": sign(SECRET, BODY), "Idempotency-Key": "k"}, BODY,
                    NOW)
    assert plain.key == "gh:k"
    assert deliver("gh", "x", SECRET, {"X-Hub-Signature-256": sign(SECRET, BODY)}, BODY, NOW).key is None
    stamp = int(NOW)
    timed = deliver("gh", "x", SECRET, {"X-Pegasus-Timestamp": str(stamp),
                                        "X-Pegasus-Signature": sign(SECRET, BODY, stamp)}, BODY, NOW)
    assert timed.key == f"gh:{sign(SECRET, BODY, stamp)}"  # a replay inside the window is the same delivery


def test_a_body_that_is_not_json_is_refused_after_the_signature() -> None:
    refused(lambda: deliver("gh", "x", SECRET, {"X-Hub-Signature-256": sign(SECRET, b"{nope")}, b"{nope", NOW),
            400, "bad_body")
    refused(lambda: deliver("gh", "x", SECRET, {}, b"{nope", NOW), 401, "bad_signature")
