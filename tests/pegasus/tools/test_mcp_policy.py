"""The MCP host's policy (pegasus.tools.mcp_policy): who waits, who fails fast, when a failed server
is retried, and each tool's effect class.  No servers, no threads."""

from __future__ import annotations

from pegasus.tools import mcp_policy as p


def policy(max_calls: int = 2) -> p.McpPolicy:
    return p.McpPolicy({"git": p.ServerRule(max_calls=max_calls, backoff_s=1.0, backoff_max_s=5.0)})


def test_begin_starts_every_server_and_calls_wait_for_the_start() -> None:
    core = policy()
    assert p.Start("git") in core.step(p.Begin())
    assert core.step(p.CallAsked(1, "git")) == []  # waits: the start ends either way within its timeout
    out = core.step(p.Started("git", ({"name": "git_log"},)))
    assert out == [p.Publish("git"), p.Run(1, "git")]
    assert core.listing()["git"].phase == "ready"


def test_the_concurrency_limit_queues_calls_in_order() -> None:
    core = policy(max_calls=2)
    core.step(p.Begin())
    core.step(p.Started("git", ()))
    assert core.step(p.CallAsked(1, "git")) == [p.Run(1, "git")]
    assert core.step(p.CallAsked(2, "git")) == [p.Run(2, "git")]
    assert core.step(p.CallAsked(3, "git")) == []
    assert core.step(p.CallAsked(4, "git")) == []
    assert core.step(p.CallEnded(2, "git")) == [p.Run(3, "git")]
    assert core.step(p.CallEnded(1, "git")) == [p.Run(4, "git")]


def test_a_failed_server_fails_calls_at_once_and_is_retried_with_backoff() -> None:
    core = policy()
    core.step(p.Begin())
    core.step(p.CallAsked(1, "git"))
    out = core.step(p.StartFailed("git", "could not start: boom"))
    assert out == [p.Refuse(1, "git", "could not start: boom"), p.Publish("git"), p.Arm("git", 1.0)]
    assert core.step(p.CallAsked(2, "git")) == [p.Refuse(2, "git", "could not start: boom")]  # fast, no start
    assert core.step(p.RetryDue("git")) == [p.Start("git"), p.Publish("git")]
    assert core.step(p.CallAsked(3, "git")) == [p.Refuse(3, "git", "could not start: boom")]  # not waiting for it
    assert core.step(p.StartFailed("git", "again"))[-1] == p.Arm("git", 2.0)
    core.step(p.RetryDue("git"))
    assert core.step(p.StartFailed("git", "again"))[-1] == p.Arm("git", 4.0)
    core.step(p.RetryDue("git"))
    assert core.step(p.StartFailed("git", "again"))[-1] == p.Arm("git", 5.0)  # capped
    core.step(p.RetryDue("git"))
    core.step(p.Started("git", ()))
    assert core.servers["git"].failures == 0 and core.listing()["git"].error == ""


def test_a_server_that_went_away_is_started_again_at_once() -> None:
    core = policy()
    core.step(p.Begin())
    core.step(p.Started("git", ()))
    core.step(p.CallAsked(1, "git"))
    assert core.step(p.CallEnded(1, "git", went_away=True)) == [p.Stop("git"), p.Start("git"), p.Publish("git")]
    assert core.step(p.CallAsked(2, "git")) == []  # waits for the new copy
    assert core.step(p.Started("git", ()))[-1] == p.Run(2, "git")


def test_stale_and_unknown_inputs_change_nothing() -> None:
    core = policy()
    assert core.step(p.Started("git", ())) == []  # not starting: a late start is ignored
    assert core.step(p.CallEnded(9, "git")) == []
    assert core.step(p.CallAsked(1, "nope")) == [p.Refuse(1, "nope", "no MCP server named 'nope'")]
    assert core.step(p.RetryDue("git")) == []


def test_effect_precedence_override_then_annotations_then_server_default() -> None:
    assert p.tool_effect({"readOnlyHint": True}, None, "effectful") == "pure"
    assert p.tool_effect({"readOnlyHint": False, "idempotentHint": True}, None, "pure") == "idempotent"
    assert p.tool_effect({"readOnlyHint": False, "idempotentHint": False}, None, "pure") == "effectful"
    assert p.tool_effect({"destructiveHint": True}, None, "idempotent") == "idempotent"  # no read/idem hint
    assert p.tool_effect({}, None, "pure") == "pure"
    assert p.tool_effect(None, None, None) == "effectful"
    assert p.tool_effect({"readOnlyHint": True}, "effectful", "pure") == "effectful"
