"""Time limits that fit together (issue 29): every model call of a stage ends within the stage's deadline,
so a hung endpoint fails the stage naming the model's timeout (llm.timeout_s) and the pool's deadline
(pools.llm_timeout_s), before the pool's own deadline would say "overran".  And the ladder's state
travels between processes as plain data, each rung only ever stepping down."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pegasus.cognitive.llm import ModelTimedOut
from pegasus.cognitive.stages import processors_for, run_stage
from pegasus.config import Settings
from pegasus.llm import capabilities, deadline, ladder
from pegasus.llm.capabilities import Shape
from pegasus.task.models import TaskContext
from tests.support.fake_openai import FakeOpenAI, completion, http_error


def stage(server: FakeOpenAI, **llm: Any) -> Any:
    settings = Settings().with_overrides({"llm": {"provider": "openai", "base_url": server.url, "model": "m",
                                                  "api_key_env": "", **llm}})
    return run_stage(processors_for(settings), "perceive", TaskContext(input_text="hi"), machine="classic")


def test_a_hung_endpoint_fails_the_stage_within_its_deadline_naming_both_timeouts() -> None:
    """llm.timeout_s 60 and 2 retries (180 s of SDK time) inside a 2 s stage: one cut attempt, no retry."""
    with FakeOpenAI([completion({"intents": []}, delay_s=5.0)] * 3) as server:
        with deadline.within(2.0), pytest.raises(ModelTimedOut) as caught:  # (uncut, the reply would come at 5 s)
            stage(server, timeout_s=60.0, max_retries=2)
        assert len(server.requests) == 1
    message = str(caught.value)
    assert "llm.timeout_s" in message and "pools.llm_timeout_s" in message and "overran" not in message, message


def test_no_retry_starts_without_time_for_it() -> None:
    """A 503 answered at once is retried while time is left; the backoff never sleeps past the deadline."""
    with FakeOpenAI([http_error(503, "busy")] * 5) as server:
        with deadline.within(0.6), pytest.raises(Exception, match="503"):
            stage(server, max_retries=4)
        assert 1 <= len(server.requests) < 5


def test_a_deadline_shorter_than_a_retry_still_gets_its_first_attempt() -> None:
    with FakeOpenAI([completion({"intents": []})]) as server, deadline.within(0.4):
        assert stage(server).event_type == "PERCEIVE_DONE"


def test_without_a_deadline_each_attempt_waits_timeout_s() -> None:
    with FakeOpenAI([completion({"intents": []}, delay_s=1.0)]) as server:
        with pytest.raises(ModelTimedOut, match=r"did not answer within 0.3s \(llm.timeout_s; 0 retries\)"):
            stage(server, timeout_s=0.3, max_retries=0)


SHAPES = st.builds(Shape, structured=st.sampled_from(capabilities.STRUCTURED_RUNGS),
                   tools=st.sampled_from((capabilities.NATIVE, capabilities.PROMPTED)),
                   token_param=st.sampled_from((capabilities.MAX_TOKENS, capabilities.MAX_COMPLETION_TOKENS, "")),
                   temperature=st.booleans(), reasoning_effort=st.booleans())


@given(SHAPES, SHAPES, SHAPES)
def test_lower_is_each_rung_the_lower_in_any_order(a: Shape, b: Shape, c: Shape) -> None:
    """What workers learn, gathered in any order, comes to the same shape, never above any of them."""
    assert capabilities.lower(a, b) == capabilities.lower(b, a)
    assert capabilities.lower(capabilities.lower(a, b), c) == capabilities.lower(a, capabilities.lower(b, c))
    assert capabilities.lower(a, a) == a
    low = capabilities.lower(a, b)
    assert low.temperature <= a.temperature and low.tools in (a.tools, b.tools)
    assert capabilities.STRUCTURED_RUNGS.index(low.structured) >= capabilities.STRUCTURED_RUNGS.index(a.structured)


def test_a_process_adopts_what_another_learnt_and_reports_only_its_own_steps(monkeypatch) -> None:
    monkeypatch.setattr(ladder, "KNOWN", {})
    monkeypatch.setattr(ladder, "_LEARNED", {})
    settings = Settings().with_overrides({"llm": {"provider": "openai", "base_url": "http://127.0.0.1:9/v1",
                                                  "model": "m"}})
    from pegasus.llm.client import ChatClient  # noqa: PLC0415

    client = ChatClient(settings.llm)
    top = ladder.known(client)
    key = ladder._key(client)
    prompted = Shape(structured=capabilities.PROMPTED, tools=capabilities.PROMPTED)
    ladder.adopt(((key, asdict(prompted)),))
    assert ladder.known(client) == capabilities.lower(top, prompted) and ladder.learned() == ()
    no_temperature = Shape(structured=capabilities.PROMPTED, tools=capabilities.PROMPTED, temperature=False)
    ladder._learn(client, ladder.known(client), no_temperature)
    assert ladder.learned() == ((key, asdict(no_temperature)),) and ladder.learned() == ()
    assert capabilities.merged({key: asdict(top)}, ((key, asdict(no_temperature)),)) == {key: asdict(no_temperature)}


def test_a_server_that_decodes_one_request_at_a_time_is_waited_for_once_until_the_deadline() -> None:
    """Measured on SmolLM2 through llama-cpp-python: a call that timed out was still being decoded, so its
    retry queued behind it and timed out too (reflect "did not answer within 54.5s").  On a serial server
    (pegasus.pool.endpoints) one attempt waits the rest of the stage instead, and is never sent again."""
    from pegasus.config import LLMSettings  # noqa: PLC0415
    from pegasus.llm.client import ChatClient, LLMTimeout  # noqa: PLC0415

    def client(server: FakeOpenAI) -> ChatClient:
        made = ChatClient(LLMSettings(provider="openai", base_url=server.url, model="m", api_key_env="",
                                      timeout_s=0.3, max_retries=2))
        made.serial = True
        return made

    with FakeOpenAI([completion("late", delay_s=0.8)]) as server, deadline.within(5.0):
        assert client(server).complete([{"role": "user", "content": "q"}]).content == "late"
        assert len(server.requests) == 1
    with FakeOpenAI([completion("never", delay_s=3.0)] * 3) as server, deadline.within(1.0):
        with pytest.raises(LLMTimeout, match="extended to the stage's pools.llm_timeout_s") as caught:
            client(server).complete([{"role": "user", "content": "q"}])
        assert len(server.requests) == 1, caught.value
