"""``pegasus history`` shows what memories each think / reason stage was given, and the post-task reflection."""

from __future__ import annotations

from actors.cli.views import history_text


def test_history_text_lists_the_memories_and_the_reflection() -> None:
    history = {"lifecycle": [], "cognitive": [
        {"run": 1, "from_state": "reasoning", "to_state": "acting", "event": "REASON_DONE",
         "timestamp": "2026-11-24T04:00:00.123+00:00", "memories": ["fact:deploy-key@1", "episode:2"]},
        {"run": 1, "from_state": "acting", "to_state": "completed", "event": "STEP_COMPLETED",
         "timestamp": "2026-11-24T04:00:00.200+00:00"}],
        "post_reflection": {"status": "failed", "error": "the reflector failed: 500", "reflection": None}}
    lines = history_text(history).splitlines()
    assert lines[1].strip() == "memories: fact:deploy-key@1, episode:2"
    assert lines[-1].strip() == "post-task reflection: failed (the reflector failed: 500)"
    assert "memories" not in history_text({**history, "cognitive": history["cognitive"][1:], "post_reflection": None})
