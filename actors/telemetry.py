"""OpenTelemetry traces (``[telemetry]``, docs/operations.md), sent over OTLP/HTTP by the processes that do the work.

Ids come from ``pegasus.tracing``, so nothing travels but what the messages already carry: the
supervisor sends each run's ``task <machine>`` span once the run is over, the worker its ``stage``
span and the stage's ``chat`` and ``execute_tool`` calls as its children; no prompt, reply or tool
output is put in a span.  A submit whose ``traceparent`` is not sampled sends no span, nor do its
sub-tasks.  Each process sets up its own tracer when it first sends (after a fork too); without the
``telemetry`` extra nothing is sent and the log says so once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from pegasus import logs, tracing
from pegasus.config import Settings

FLUSH_MS = 1000  # what an exiting process waits at most for its spans to go (a receiver that is down must not hold it)
EXPORT_TIMEOUT_S = 5.0  # one export's bound

_tracer: Any = None
_provider: Any = None
_ids: Any = None
_pid = 0
_unavailable = False


def tracer(settings: Settings | None, process: str) -> Any:
    """This process's tracer, set up now if need be; None when telemetry is off or not installed."""
    global _tracer, _provider, _ids, _pid, _unavailable
    if settings is None or not settings.telemetry.enabled or _unavailable:
        return None
    if _tracer is not None and _pid == os.getpid():
        return _tracer
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415
        from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
        from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
        from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415
    except ImportError as exc:
        _unavailable = True
        logs.get("telemetry").warning("telemetry_unavailable", error=str(exc),
                                      hint="pip install 'pegasus-agents[telemetry]'")
        return None
    config = settings.telemetry
    _ids = _id_generator()
    _provider = TracerProvider(id_generator=_ids, resource=Resource.create({
        "service.name": config.service_name, "service.instance.id": f"{process}-{os.getpid()}",
        "process.pid": os.getpid(), "pegasus.process": process}))
    exporter = OTLPSpanExporter(endpoint=config.endpoint, timeout=EXPORT_TIMEOUT_S)
    _provider.add_span_processor(BatchSpanProcessor(exporter, schedule_delay_millis=config.export_delay_ms))
    _tracer, _pid = _provider.get_tracer("pegasus"), os.getpid()
    return _tracer


def flush() -> None:
    """Send what this process holds (before it exits)."""
    if _provider is not None and _pid == os.getpid():
        _provider.force_flush(timeout_millis=FLUSH_MS)


def run_span(settings: Settings | None, *args: Any) -> None:
    """The span of a run that stopped (the supervisor's): its stage spans' parent.  Never raises."""
    _safely(_run_span, settings, *args)


def stage_span(settings: Settings | None, *args: Any) -> None:
    """A stage's span (the worker's), with one child span per model or tool call it made.  Never raises."""
    _safely(_stage_span, settings, *args)


def _safely(send: Any, settings: Settings | None, *args: Any) -> None:
    """A span must never cost a task anything: a failure to build or queue one is logged, and that is all."""
    if settings is None or not settings.telemetry.enabled:
        return
    try:
        send(settings, *args)
    except Exception as exc:  # noqa: BLE001
        logs.get("telemetry").warning("span_not_sent", error=f"{type(exc).__name__}: {exc}")


def _run_span(settings: Settings, task_id: str, run: int, machine: str, metadata: Mapping[str, Any],
              started_ns: int, ended_ns: int, attributes: Mapping[str, Any], failed: str | None) -> None:
    trace_of = tracing.task_trace(task_id, metadata)
    traced = tracer(settings, "supervisor") if trace_of.sampled else None
    if traced is None:
        return
    from opentelemetry import trace  # noqa: PLC0415

    parent = trace.set_span_in_context(trace.NonRecordingSpan(_context(trace_of.trace_id, trace_of.parent_span_id))) \
        if trace_of.parent_span_id else None
    _ids.chosen = (int(trace_of.trace_id, 16), int(tracing.run_span_id(task_id, run), 16))
    try:
        span = traced.start_span(f"task {machine}", context=parent, start_time=started_ns, attributes={
            "pegasus.task.id": task_id, "pegasus.task.run": run, "pegasus.machine": machine, **attributes})
    finally:
        _ids.chosen = None
    _end(span, ended_ns, failed)


def _stage_span(settings: Settings, request: Any, pool: str, started_ns: int, ended_ns: int,
                result: Any, calls: Iterable[tracing.Call]) -> None:
    if not request.task_id:
        return
    trace_of = tracing.task_trace(request.task_id, getattr(request.context, "input_metadata", None))
    traced = tracer(settings, f"{pool} worker") if trace_of.sampled else None
    if traced is None:
        return
    from opentelemetry import trace  # noqa: PLC0415

    parent = trace.set_span_in_context(trace.NonRecordingSpan(
        _context(trace_of.trace_id, tracing.run_span_id(request.task_id, request.run))))
    attributes: dict[str, Any] = {"pegasus.task.id": request.task_id, "pegasus.task.run": request.run,
                                  "pegasus.stage": request.stage, "pegasus.pool": pool,
                                  "pegasus.machine": request.machine}
    if request.step_index is not None:
        attributes["pegasus.step_index"] = request.step_index
    failed = None
    if result is not None and not result.ok:
        failed = str(result.error or result.error_kind)
        attributes["error.type"] = result.error_kind or "exception"
    elif result is None:
        failed, attributes["error.type"] = "the worker raised", "exception"
    stage = traced.start_span(f"stage {request.stage}", context=parent, start_time=started_ns, attributes=attributes)
    inside = trace.set_span_in_context(stage)
    for made in calls:
        _call_span(traced, inside, made)
    _end(stage, ended_ns, failed)


def _call_span(traced: Any, parent: Any, made: tracing.Call) -> None:
    from opentelemetry import trace  # noqa: PLC0415

    if made.kind == "model":
        name, kind = f"chat {made.name}", trace.SpanKind.CLIENT
        attributes = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
                      "gen_ai.request.model": made.name}
    else:
        name, kind = f"execute_tool {made.name}", trace.SpanKind.INTERNAL
        attributes = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": made.name}
    attributes.update(made.attributes)
    if made.error:
        attributes["error.type"] = made.error
    span = traced.start_span(name, context=parent, kind=kind, start_time=made.started_ns, attributes=attributes)
    _end(span, made.ended_ns, made.error)


def _context(trace_id: str, span_id: str) -> Any:
    from opentelemetry import trace  # noqa: PLC0415

    return trace.SpanContext(int(trace_id, 16), int(span_id, 16), is_remote=True,
                             trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED))


def _end(span: Any, ended_ns: int, failed: str | None) -> None:
    from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415

    if failed is not None:
        span.set_status(Status(StatusCode.ERROR, failed[:500]))
    span.end(end_time=max(ended_ns, span.start_time or 0))


def _id_generator() -> Any:
    """Random ids, but the ones ``chosen`` for the next span (a run's span: its ids are derived).  Built here:
    the SDK is an optional extra."""
    from opentelemetry.sdk.trace.id_generator import RandomIdGenerator  # noqa: PLC0415

    class ChosenIds(RandomIdGenerator):
        chosen: tuple[int, int] | None = None  # (trace id, span id)

        def generate_trace_id(self) -> int:
            return self.chosen[0] if self.chosen is not None else super().generate_trace_id()

        def generate_span_id(self) -> int:
            return self.chosen[1] if self.chosen is not None else super().generate_span_id()

    return ChosenIds()
