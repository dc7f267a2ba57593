"""The supervisor's memory: the clients' memory requests, and the ``memory.*`` steps of tasks.

A mixin of ``actors.supervisor.Supervisor``.  The store is the supervisor's own
(the memory tables live in the tasks' database), so a memory step runs here --
a task actor sends a step calling a ``memory.*`` tool to ``PoolName.MEMORY``,
which is this actor -- and answers with the StageResult a tool worker would
send: no worker, on this machine or a convention member, opens the database.
A step is one or a few SQLite statements (well under a millisecond at 10,000
episodes, docs/agent-memory.md), so it does not hold the mailbox up.  Nothing
here calls a model: a vector for embedding search comes with the request.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import messages as m
from actors.request_handler import request_handler
from pegasus.cognitive.stages import offline_processors, run_stage
from pegasus.memory import MemoryStore
from pegasus.memory.answers import answer_memory
from pegasus.memory.tools import register
from pegasus.store.checkpoint import rebuild
from pegasus.task.models import TaskSnapshot, deep_copy
from pegasus.task.names import StageName
from pegasus.tools.registry import ToolRegistry


class MemoryRequests:
    """Handlers of the supervisor for memory (see the module docstring)."""

    store: Any
    settings: Any
    log: Any
    send: Callable[[Any, Any], None]  # annotation only: the actor's own send

    def _memory(self) -> MemoryStore:
        """The memory over the supervisor's store (a view: cheap, and always the store open now)."""
        if self.store is None or self.settings is None:
            raise RuntimeError("the supervisor has no store yet")
        return MemoryStore(self.store, self.settings.memory)

    def _archive_task(self, task_id: str, snapshot: TaskSnapshot | None = None) -> None:
        """Archive a done task's full context (idempotent): ``snapshot`` when the caller has it (a TaskStopped
        report's), else rebuilt from the store's checkpoints.  Not called here: part B calls it where a task
        becomes done (with the post-task reflection), one line."""
        row = self.store.task_row(task_id)
        if row is None:
            return
        if snapshot is None:
            snapshot = rebuild(task_id, self.store.checkpoints(task_id))
        self._memory().archive(task_id, str(row["input"]), row.get("result"), snapshot.context.model_dump(mode="json"))

    # -- a task's memory step ----------------------------------------------------------------
    def receiveMsg_StageRequest(self, request: m.StageRequest, sender: Any) -> None:
        """A memory step of a task (only a task actor sends the supervisor a StageRequest)."""
        try:
            result = self._memory_step(request)
        except Exception as exc:  # noqa: BLE001 - the boundary: an error becomes the step's answer
            self.log.exception("memory_step_failed", task_id=request.task_id)
            result = m.StageResult(request.task_id, request.token, request.stage, ok=False,
                                   error=f"{type(exc).__name__}: {exc}", error_kind="exception")
        self.send(sender, result)

    def _memory_step(self, request: m.StageRequest) -> m.StageResult:
        if request.stage != StageName.ACT or request.context is None:
            return m.StageResult(request.task_id, request.token, request.stage, ok=False, error_kind="exception",
                                 error=f"the supervisor runs memory steps only, not {request.stage!r}")
        context = request.context
        if request.idempotency_key and context.plan is not None:
            context = deep_copy(context)  # the step's key is the append key (ToolContext.idempotency_key)
            for step in context.plan.steps:
                if step.index == request.step_index:
                    step.action_params["idempotency_key"] = request.idempotency_key
        registry = register(ToolRegistry(max_output_chars=self.settings.tools.max_output_chars), self._memory())
        outcome = run_stage(offline_processors(registry), StageName.ACT, context, machine=request.machine,
                            step_index=request.step_index)
        return m.StageResult(request.task_id, request.token, request.stage, ok=True,
                             event_type=str(outcome.event_type), payload=outcome.payload,
                             worker={"pool": "memory", "worker": "supervisor"})

    # -- client requests: each answered by answer_memory ---------------------------------------
    def _answer(self, request: m.Request, sender: Any) -> Any:
        return answer_memory(self._memory(), request)

    receiveMsg_MemoryList = receiveMsg_MemorySearch = receiveMsg_MemoryShow = request_handler(_answer)
    receiveMsg_MemoryWrite = receiveMsg_MemoryExport = receiveMsg_MemoryImport = request_handler(_answer)

    @request_handler
    def receiveMsg_MemoryForget(self, request: m.MemoryForget, sender: Any) -> Any:
        forgotten = answer_memory(self._memory(), request)
        self.log.info("memory_forgotten", ids=forgotten["forgotten"])
        return forgotten

