"""A task's memory.search step with embeddings configured, at the supervisor without an actor system (issue 29):
its query goes to the llm pool first (negative tokens, never a recall's), the step runs fused when the vector
comes, and says why when it does not (the endpoint's error, the wait's end, the breaker open); an answer that
comes after the step was answered is dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actors import messages as m
from actors.supervisor import vectors
from actors.supervisor.context import Context
from actors.supervisor.task_actors import TaskActors
from pegasus.config import Settings
from pegasus.memory import MemoryStore
from pegasus.memory.embeddings import pack
from pegasus.memory.vectors import EmbedAnswered
from pegasus.store import Store
from pegasus.task import Plan, PlanStep, TaskFSM
from pegasus.task.names import PoolName, StageName

QUESTION = "where did I leave my car?"


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **fields: Any) -> None:
        self.lines.append((event, fields))

    warning = exception = info


def supervisor(tmp_path: Path) -> tuple[Context, list[tuple[Any, Any]], list[tuple[float, Any]]]:
    sent: list[tuple[Any, Any]] = []
    woken: list[tuple[float, Any]] = []
    settings = Settings().with_overrides({"state": {"home": str(tmp_path)},
                                          "memory": {"embeddings_model": "e5", "embeddings_timeout_s": 4}})
    store = Store(tmp_path / "pegasus.db")
    MemoryStore(store, settings.memory).write_fact("garage/parking", "The automobile is in bay 4.",
                                                   vector=pack([1.0, 0.0]))
    ctx = Context(send=lambda to, message: sent.append((to, message)), wake=lambda s, p: woken.append((s, p)),
                  create=lambda kind: None, exit=lambda: None,
                  task_actors=TaskActors(None, None, None),  # type: ignore[arg-type]  # no task actor here
                  log=Log(), store=store, settings=settings)  # type: ignore[arg-type]  # a log that keeps lines
    ctx.pools.address[PoolName.LLM] = "llm-pool"
    return ctx, sent, woken


def search_step(token: int) -> m.StageRequest:
    fsm = TaskFSM.create("classic", "x", task_id="t1")
    fsm.context.plan = Plan(goal="g", steps=[PlanStep(index=0, description="search", action_params={
        "tool": "memory.search", "args": {"query": QUESTION, "k": 3}})])
    return m.StageRequest("t1", token, StageName.ACT, "classic", fsm.context, 0)


def output(result: m.StageResult) -> Any:
    return json.loads(json.dumps(result.payload, default=str))["result"]["output"]


def test_a_search_step_waits_for_its_query_vector_off_the_mailbox_then_runs_fused(tmp_path: Path) -> None:
    ctx, sent, woken = supervisor(tmp_path)
    vectors.memory_step(ctx, search_step(7), "task-actor")
    (to, embed), = sent
    assert (to, embed.stage, embed.token, embed.texts) == ("llm-pool", StageName.EMBED_QUERY, -1, (QUESTION,))
    assert woken == [(2 * 4 + vectors.STAGE_MARGIN_S, m.RecallVectorDue("t1", -1)), (2.5, m.PoolsCheck())]
    vectors.query_vector(ctx, m.StageResult("t1", -1, StageName.EMBED_QUERY, True,
                                            payload={"vectors": [pack([0.9, 0.1])]}))
    to, answer = sent[-1]
    assert (to, answer.token, answer.ok) == ("task-actor", 7, True)
    assert [item["id"] for item in output(answer)] == ["fact:garage/parking@1"]  # no shared word: by its vector
    vectors.recall_vector_due(ctx, m.RecallVectorDue("t1", -1))  # the wait's end, after the answer: nothing
    assert len(sent) == 2


def test_without_a_vector_the_step_answers_by_full_text_and_says_why(tmp_path: Path) -> None:
    ctx, sent, _ = supervisor(tmp_path)
    vectors.memory_step(ctx, search_step(7), "task-actor")
    vectors.query_vector(ctx, m.StageResult("t1", -1, StageName.EMBED_QUERY, False, error="unreachable",
                                            error_kind="exception"))
    failed = output(sent[-1][1])
    assert failed == {"items": [], "warning": "embeddings: unreachable; searched by full text alone"}
    vectors.memory_step(ctx, search_step(8), "task-actor")  # the breaker is open: not asked, said at once
    assert [message.stage for _, message in sent].count(StageName.EMBED_QUERY) == 1
    assert "unreachable (not asked again for" in output(sent[-1][1])["warning"]
    ctx.vectors.breaker.step(EmbedAnswered(True, False, None, 0.0, 0.0))  # e.g. a backfill batch went through
    vectors.memory_step(ctx, search_step(9), "task-actor")
    vectors.recall_vector_due(ctx, m.RecallVectorDue("t1", -2))  # a hung endpoint: the wait ends the step
    assert "no vector within 13s" in output(sent[-1][1])["warning"]
    vectors.query_vector(ctx, m.StageResult("t1", -2, StageName.EMBED_QUERY, True, payload={"vectors": [
        pack([1.0, 0.0])]}))  # too late: the step was answered
    assert [message.token for _, message in sent if isinstance(message, m.StageResult)] == [7, 8, 9]
    view = vectors.embeddings_view(ctx)
    assert view is not None and view["search_without_vector"] == 3
