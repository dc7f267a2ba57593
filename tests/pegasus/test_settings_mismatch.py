"""No silent mismatch (issue 31): what a command sets otherwise than the running system, in what changes a task."""

from __future__ import annotations

from pegasus.config import Settings
from pegasus.settings_mismatch import differences, refusal

RUNNING = Settings().with_overrides({"llm": {"provider": "openai", "model": "small"}, "runtime": {"max_active_tasks": 5}})


def test_a_setting_the_command_sets_otherwise_is_named_and_the_refusal_says_how_to_apply_it() -> None:
    own = Settings().with_overrides({"llm": {"provider": "openai", "model": "big"},
                                     "tools": {"plugins": ["tests.support.tools:register"]}})
    found = differences(own, RUNNING)
    assert found == [("llm.model", "big", "small"), ("tools.plugins", ["tests.support.tools:register"], [])]
    text = refusal(found, 19190)
    assert "llm.model is 'big' here, 'small' in the system" in text and "pegasus stop, then pegasus start" in text


def test_defaults_and_settings_that_do_not_change_a_task_are_no_mismatch() -> None:
    """``pegasus submit`` without the --config the system was started with uses the system's settings."""
    assert differences(Settings(), RUNNING) == []
    assert differences(Settings().with_overrides({"runtime": {"max_active_tasks": 9}}), RUNNING) == []
    assert differences(RUNNING, RUNNING) == []
