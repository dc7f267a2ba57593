"""The model-backed stages and memory (issue 19): the identity and the recalled memories in the think / reason
prompts, within the context budget, and the post-task reflector asking the model with a structured schema."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pegasus.cognitive.stages import StageError, processors_for, run_stage
from pegasus.config import Settings
from pegasus.task.events import EventType
from pegasus.task.models import Memory, Recall, TaskContext
from tests.support.fake_openai import FakeOpenAI, Quirks, completion
from tests.support.model_like import ModelLike

RECALL = Recall(identity="You are Atlas, the ops agent of ACME.",
                memories=[Memory(id="fact:deploy-key@1", kind="fact", title="deploy-key",
                                 text="The deploy key is in the vault."),
                          Memory(id="episode:4", kind="episode", title="rotate the key", text="x " * 2000)])


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(responder=ModelLike()) as fake:
        yield fake


def settings(server: FakeOpenAI, **llm: Any) -> Settings:
    base = {"provider": "openai", "base_url": server.url, "model": "test-model", "api_key_env": "",
            "max_retries": 0, "timeout_s": 5.0}
    return Settings().with_overrides({"llm": {**base, **llm}})


def test_think_and_reason_prompts_carry_the_identity_and_the_memories_with_their_ids(server: FakeOpenAI) -> None:
    for stage, machine in (("think", "classic"), ("reason", "reason_act")):
        run_stage(processors_for(settings(server)), stage, TaskContext(input_text="what is 1 + 2?", recall=RECALL),
                  machine=machine)
        system, user = server.requests[-1]["messages"][0]["content"], server.requests[-1]["messages"][1]["content"]
        assert "You are Atlas, the ops agent of ACME." in system
        assert "- [fact:deploy-key@1] deploy-key: The deploy key is in the vault." in user
        assert len(user.split("[episode:4]")[1]) < 600  # a recalled memory is cut in the prompt
    run_stage(processors_for(settings(server)), "think", TaskContext(input_text="what is 1 + 2?"), machine="classic")
    assert "From memory" not in server.requests[-1]["messages"][1]["content"]  # nothing recalled: nothing shown


def test_memories_over_the_context_window_are_cut_not_the_system_prompt(server: FakeOpenAI) -> None:
    many = RECALL.model_copy(update={"memories": [Memory(id=f"episode:{n}", kind="episode", title=f"t{n}",
                                                         text="word " * 200) for n in range(40)]})
    outcome = run_stage(processors_for(settings(server, context_window=3000, max_output_tokens=200)), "think",
                        TaskContext(input_text="what is 1 + 2?", recall=many), machine="classic")
    body = server.requests[-1]
    assert "You are Atlas" in body["messages"][0]["content"]
    assert sum(len(str(m["content"])) for m in body["messages"]) < 3000 * 4
    assert outcome.context and outcome.context[0]["cut_messages"] >= 1


def test_the_llm_post_reflector_asks_with_a_schema_and_returns_a_post_task_reflection(server: FakeOpenAI) -> None:
    context = TaskContext(input_text="what is 1 + 2?", final_result="1 + 2 = 3", recall=RECALL)
    outcome = run_stage(processors_for(settings(server)), "post_reflect", context, machine="reason_act")
    assert outcome.event_type == EventType.REFLECTION_COMPLETE
    reflection = outcome.payload["post_reflection"]
    assert reflection["facts"] == [{"path": "arithmetic/last", "content": "1 + 2 was computed"}]
    assert reflection["episode"]["lesson"] == "arithmetic does it"
    body = server.requests[-1]
    assert body["response_format"]["json_schema"]["name"] == "PostReflectReply"
    assert "1 + 2 = 3" in body["messages"][1]["content"] and "Atlas" in body["messages"][0]["content"]


def test_a_prose_model_is_read_too_and_a_broken_one_fails_the_stage() -> None:
    with FakeOpenAI(responder=ModelLike(Quirks(prose=True, refuse_response_format="all")),
                    quirks=Quirks(prose=True, refuse_response_format="all")) as prose:
        outcome = run_stage(processors_for(settings(prose)), "post_reflect",
                            TaskContext(input_text="what is 1 + 2?", final_result="3"), machine="classic")
        assert outcome.payload["post_reflection"]["assessment"] == "done in one tool call"
    with FakeOpenAI(responder=lambda body: completion({"facts": "not a list"})) as broken:
        with pytest.raises(StageError, match="post_reflect"):
            run_stage(processors_for(settings(broken)), "post_reflect", TaskContext(input_text="x"), machine="classic")
