"""The baseline: seed 003's asyncio design, in one process, on the same core as Pegasus.

A registry of TaskFSMs, an active-task cap with a FIFO queue, a semaphore for llm stages and one for
tool steps, a task per stage (seed 003's ``_spawn``).  Each stage runs the same ``run_stage``, offline
processors and tool registry as a Pegasus worker, after ``await asyncio.sleep(latency)`` where a worker
sleeps; the next stage comes from the same ``pegasus.task.dispatch.next_work``.  No EventBus, no
persistence, no process isolation: it does strictly less work per transition than Pegasus.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from typing import Any

from pegasus.cognitive.stages import Processors, offline_processors, run_stage
from pegasus.task import Event, TaskFSM
from pegasus.task.dispatch import RaiseEvent, RunStage, next_work
from pegasus.task.names import PoolName
from pegasus.config import Settings
from pegasus.tools.plugins import registry_for


class Agent:
    def __init__(self, *, llm: int, tool: int, max_active: int, latency_s: float, processors: Processors,
                 max_iterations: int = 5) -> None:
        self.llm, self.tool = asyncio.Semaphore(llm), asyncio.Semaphore(tool)
        self.max_active, self.latency_s, self.processors = max_active, latency_s, processors
        self.max_iterations = max_iterations
        self.tasks: dict[str, TaskFSM] = {}
        self.finished: dict[str, float] = {}
        self.active = 0
        self.waiting: deque[TaskFSM] = deque()
        self.background: set[asyncio.Task[None]] = set()
        self.all_done = asyncio.Event()
        self.expected = 0
        self.tool_steps: list[float] = []  # seconds each tool step's run_stage took
        self.tool_cpu: list[float] = []  # and the CPU seconds of this thread it used

    def submit(self, text: str, machine: str = "classic") -> str:
        fsm = TaskFSM.create(machine=machine, input_text=text)
        self.tasks[fsm.task_id] = fsm
        if self.active < self.max_active:
            self.active += 1
            self._dispatch(fsm)
        else:
            self.waiting.append(fsm)
        return fsm.task_id

    def _dispatch(self, fsm: TaskFSM) -> None:
        while True:
            if fsm.is_terminal or fsm.state == fsm.machine.suspended or fsm.context.iteration > self.max_iterations:
                self._finish(fsm)
                return
            work = next_work(fsm.machine.name, fsm.state, fsm.context)
            if isinstance(work, RaiseEvent):
                fsm.transition(Event(type=work.event_type))
                continue
            if isinstance(work, RunStage):
                job = asyncio.create_task(self._run(fsm, work))
                self.background.add(job)
                job.add_done_callback(self.background.discard)
            return

    async def _run(self, fsm: TaskFSM, work: RunStage) -> None:
        async with self.llm if work.pool == PoolName.LLM else self.tool:
            if self.latency_s:
                await asyncio.sleep(self.latency_s)
            began, cpu = time.perf_counter(), time.thread_time()
            outcome = run_stage(self.processors, work.stage, fsm.context, machine=fsm.machine.name,
                                step_index=work.step_index)
            if work.pool == PoolName.TOOL:
                self.tool_steps.append(time.perf_counter() - began)
                self.tool_cpu.append(time.thread_time() - cpu)
        fsm.transition(Event(type=outcome.event_type, payload=outcome.payload))
        self._dispatch(fsm)

    def _finish(self, fsm: TaskFSM) -> None:
        self.finished[fsm.task_id] = time.time()
        self.active -= 1
        if self.waiting:
            self.active += 1
            self._dispatch(self.waiting.popleft())
        if len(self.finished) >= self.expected:
            self.all_done.set()


async def _run_workload(texts: list[str], *, llm: int, tool: int, max_active: int, latency_s: float,
                        settings: Settings) -> dict[str, Any]:
    agent = Agent(llm=llm, tool=tool, max_active=max_active, latency_s=latency_s,
                  processors=offline_processors(registry_for(settings)))
    agent.expected = len(texts)
    start = time.time()
    for text in texts:
        agent.submit(text)
    await agent.all_done.wait()
    end = max(agent.finished.values())
    completed = sum(1 for fsm in agent.tasks.values() if fsm.state == "completed")
    steps = agent.tool_steps
    return {"tasks": len(texts), "completed": completed, "elapsed_s": end - start,
            "tasks_per_s": len(texts) / (end - start), "tool_steps": len(steps),
            "tool_ms_per_task": round(1000.0 * sum(steps) / len(texts), 1),
            "tool_cpu_ms_per_task": round(1000.0 * sum(agent.tool_cpu) / len(texts), 1)}


def run_workload(texts: list[str], *, llm: int, tool: int, max_active: int, latency_s: float,
                 settings: Settings) -> dict[str, Any]:
    """Run every text to its end on a fresh event loop; tasks/s from first submit to last finish."""
    return asyncio.run(_run_workload(texts, llm=llm, tool=tool, max_active=max_active, latency_s=latency_s,
                                     settings=settings))
