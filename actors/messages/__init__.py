"""Every message Pegasus actors exchange, grouped by conversation: frozen, module-level, picklable.

``pegasus.requests`` (client requests and replies, re-exported), ``task_run``, ``stage_work``,
``supervision``, ``mcp``, ``triggers``, ``gateway``, ``task_messages``.  Thespian pickles by module
path, so each lives in exactly one module; ``from actors import messages as m; m.Submit`` gives any.
Loaded on first use (PEP 562): a command that asks one request loads no pool or worker messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pegasus import lazy

if TYPE_CHECKING:  # the names as a type checker sees them
    from pegasus.requests import (
        LIST_STATES, MAX_BATCH, MAX_PAGE, MAX_PRIORITY, Approve, Backup, Cancel, Configure, DeleteTask, DeliverWebhook,
        Get, History, ListTasks, Locate, MemoryExport, MemoryForget, MemoryImport, MemoryList, MemorySearch, MemoryShow,
        MemoryWrite, Purge, Reply,
        Request, Resume, Retry, ScheduleAdd, ScheduleList, SchedulePause, ScheduleRemove, ScheduleResume, ScheduleTrigger, SendMessage, Stats, StoreStatus, Submit,
        SubmitMany, Subscribe, Suspend, TaskContextRequest, TaskLog, TokenCreate, TokenList, TokenRevoke, Tree, Unsubscribe,
        WebhookAdd, WebhookList, WebhookRemove, revalidate,
    )
    from actors.messages.contact import WorkerPing, WorkerPong
    from actors.messages.mcp import McpAnswer, McpCall, McpHeld, McpHeldAnswer, McpListing, McpSubscribe
    from pegasus.admission.commands import TransitionNotice
    from pegasus.streaming import TextDelta
    from actors.messages.stage_work import CancelTask, HeldGo, HeldStart, PoolConfig, PoolStats, PoolStatsRequest, StageRequest, StageResult, StepGo, StepStarting, StopStage, Work, WorkDone, WorkerInit, WorkerReady
    from actors.messages.gateway import GatewayCheck, StartGateway
    from actors.messages.recall import AskRecall, Recalled, RecallVectorDue, VectorsDue
    from actors.messages.supervision import (
        GUARDIAN_CLASS, GUARDIAN_NAME, ChildTrouble, CommitDue, KeeperDue, PoolDue, PoolReady, PoolReplaced, PoolsCheck, RestartDue,
        RetentionDue, RetryDue, StatsDue, StoreProbe, TaskActorsDue,
    )
    from actors.messages.task_messages import MessageTask
    from actors.messages.triggers import ScheduleDue
    from actors.messages.task_run import ConfigureTaskActor, DropTask, Reflected, StartTask, StartTasks, SuspendTask, TaskAbandoned, TaskReports, TaskStopped, TaskTransitioned

# Where each message between Pegasus's own actors lives: imported when first named.
_HOMES = {
    "pegasus.requests": (  # every request and its Reply
        "LIST_STATES", "MAX_BATCH", "MAX_PAGE", "MAX_PRIORITY", "Approve", "Backup", "Cancel", "Configure",
        "DeleteTask", "DeliverWebhook", "Get", "History", "ListTasks", "Locate", "MemoryExport", "MemoryForget",
        "MemoryImport", "MemoryList", "MemorySearch", "MemoryShow", "MemoryWrite", "Purge", "Reply", "Request",
        "Resume", "Retry", "ScheduleAdd", "ScheduleList", "SchedulePause", "ScheduleRemove", "ScheduleResume",
        "ScheduleTrigger", "SendMessage", "Stats", "StoreStatus",
        "Submit", "SubmitMany", "Subscribe", "Suspend", "TaskContextRequest", "TaskLog", "TokenCreate", "TokenList",
        "TokenRevoke", "Tree", "Unsubscribe", "WebhookAdd", "WebhookList", "WebhookRemove", "revalidate"
    ),
    "actors.messages.contact": ("WorkerPing", "WorkerPong"),
    "actors.messages.mcp": ("McpAnswer", "McpCall", "McpHeld", "McpHeldAnswer", "McpListing", "McpSubscribe"),
    "pegasus.admission.commands": ("TransitionNotice",),  # what subscribers receive
    "pegasus.streaming": ("TextDelta",),  # and, between transitions, streamed text
    "actors.messages.stage_work": ("CancelTask", "HeldGo", "HeldStart", "PoolConfig", "PoolStats", "PoolStatsRequest", "StageRequest",
                                   "StageResult", "StepGo", "StepStarting", "StopStage", "Work", "WorkDone",
                                   "WorkerInit", "WorkerReady"),
    "actors.messages.gateway": ("GatewayCheck", "StartGateway"),
    "actors.messages.recall": ("AskRecall", "Recalled", "RecallVectorDue", "VectorsDue"),
    "actors.messages.supervision": ("GUARDIAN_CLASS", "GUARDIAN_NAME", "ChildTrouble", "CommitDue", "KeeperDue", "PoolDue",
                                    "PoolReady", "PoolReplaced", "PoolsCheck", "RestartDue", "RetentionDue", "RetryDue",
                                    "StatsDue", "StoreProbe", "TaskActorsDue"),
    "actors.messages.task_messages": ("MessageTask",),
    "actors.messages.triggers": ("ScheduleDue",),
    "actors.messages.task_run": ("ConfigureTaskActor", "DropTask", "Reflected", "StartTask", "StartTasks", "SuspendTask", "TaskAbandoned",
                                 "TaskReports", "TaskStopped", "TaskTransitioned"),
}
__getattr__, __dir__ = lazy.names(__name__, _HOMES)


__all__ = [
    "LIST_STATES", "MAX_BATCH", "MAX_PAGE", "MAX_PRIORITY", "Approve", "DeleteTask", "Purge", "TaskLog", "AskRecall", "Recalled", "RecallVectorDue", "VectorsDue", "Backup", "Cancel", "CancelTask", "Configure",
    "Get", "History", "ConfigureTaskActor", "DropTask", "ListTasks", "Locate", "MessageTask", "SendMessage", "MemoryExport", "MemoryForget", "MemoryImport", "MemoryList",
    "MemorySearch", "MemoryShow", "MemoryWrite", "McpAnswer", "McpCall", "McpHeld", "McpHeldAnswer", "McpListing", "McpSubscribe", "PoolConfig", "PoolStats", "PoolStatsRequest", "Reply", "Request", "RestartDue", "Resume",
    "Reflected", "Retry", "RetryDue",
    "StageRequest", "StageResult", "StartTask", "StartTasks", "Stats", "StepGo", "StepStarting", "StoreProbe", "StoreStatus", "Submit",
    "SubmitMany", "Subscribe", "Suspend", "SuspendTask", "TaskAbandoned", "TaskActorsDue", "TaskContextRequest", "TaskReports", "TaskStopped", "TaskTransitioned", "Tree",
    "GatewayCheck", "HeldGo", "HeldStart", "StartGateway", "StopStage", "TextDelta", "TokenCreate", "TokenList", "TokenRevoke", "TransitionNotice", "Unsubscribe", "Work", "WorkDone", "WorkerInit", "WorkerPing", "WorkerPong",
    "WorkerReady", "revalidate", "DeliverWebhook", "ScheduleAdd", "ScheduleDue", "ScheduleList", "SchedulePause",
    "ScheduleRemove", "ScheduleResume", "ScheduleTrigger", "WebhookAdd", "WebhookList",
    "WebhookRemove", "GUARDIAN_CLASS", "GUARDIAN_NAME", "ChildTrouble", "CommitDue", "KeeperDue", "PoolDue", "PoolReady", "PoolReplaced", "PoolsCheck", "StatsDue", "RetentionDue",
]
