"""What a client can ask the supervisor: one declaration per operation, ``Request[R]`` typed by its reply.

The Python client (``actors.client.Client.ask``), the HTTP gateway (``pegasus.gateway``: a route
names the request class it builds) and the CLI are all served from these classes; the supervisor
answers each by its class name (``receiveMsg_<Name>``).  Pure pydantic: no actors here, so the
gateway's core can build them (``docs/architecture.md``, "Requests").
"""

from typing import TYPE_CHECKING

from pegasus import lazy
from pegasus.requests.base import R, Reply, Request, View, Views, problems, revalidate

if TYPE_CHECKING:  # the names as a type checker sees them
    from pegasus.requests.memory import (
        MAX_DIMENSIONS, MAX_IMPORT_ITEMS, MemoryExport, MemoryForget, MemoryImport, MemoryList, MemorySearch, MemoryShow,
        MemoryWrite,
    )
    from pegasus.requests.tasks import (
        LIST_STATES, MAX_BATCH, MAX_META, MAX_PAGE, MAX_PRIORITY, MAX_REASON, Approve, Backup, Cancel, Configure,
        DeleteTask, Get, History, ListTasks, Locate, Purge, TaskLog, Resume, Retry, SendMessage, Stats, StoreStatus, Submit, SubmitMany, Subscribe, Suspend,
        TaskContextRequest, TierName, Tree, Unsubscribe,
    )
    from pegasus.requests.tokens import TOKEN_NAME, TokenCreate, TokenList, TokenRevoke
    from pegasus.requests.triggers import (
        DeliverWebhook, OverlapName, ScheduleAdd, ScheduleList, SchedulePause, ScheduleRemove, ScheduleResume, ScheduleTrigger,
        WebhookAdd, WebhookList, WebhookRemove,
    )

# Where each request lives: its module is imported when the name is first used (PEP 562), so a command
# line asking one request imports its own module only (a CLI under 0.3 s).
_HOMES = {
    "pegasus.requests.memory": (
        "MAX_DIMENSIONS", "MAX_IMPORT_ITEMS", "MemoryExport", "MemoryForget", "MemoryImport", "MemoryList",
        "MemorySearch", "MemoryShow", "MemoryWrite"
    ),
    "pegasus.requests.tasks": (
        "LIST_STATES", "MAX_BATCH", "MAX_META", "MAX_PAGE", "MAX_PRIORITY", "MAX_REASON", "Approve", "Backup",
        "Cancel", "Configure", "DeleteTask", "Get", "History", "ListTasks", "Locate", "Purge", "TaskLog", "Resume",
        "Retry", "SendMessage", "Stats", "StoreStatus", "Submit", "SubmitMany", "Subscribe", "Suspend",
        "TaskContextRequest", "TierName", "Tree", "Unsubscribe"
    ),
    "pegasus.requests.tokens": (
        "TOKEN_NAME", "TokenCreate", "TokenList", "TokenRevoke"
    ),
    "pegasus.requests.triggers": (
        "DeliverWebhook", "OverlapName", "ScheduleAdd", "ScheduleList", "SchedulePause", "ScheduleRemove",
        "ScheduleResume", "ScheduleTrigger",
        "WebhookAdd", "WebhookList", "WebhookRemove"
    ),
}

__all__ = [
    "LIST_STATES", "MAX_BATCH", "MAX_DIMENSIONS", "MAX_IMPORT_ITEMS", "MAX_PAGE", "MAX_PRIORITY", "MAX_REASON",
    "MAX_META", "TOKEN_NAME", "Approve", "DeleteTask", "Purge", "TaskLog", "Backup", "Cancel", "Configure", "DeliverWebhook", "Get", "History", "ListTasks",
    "Locate", "MemoryExport", "MemoryForget", "MemoryImport", "MemoryList", "MemorySearch", "MemoryShow",
    "MemoryWrite", "OverlapName", "R", "Reply", "Request", "Resume", "Retry", "ScheduleAdd", "ScheduleList",
    "SchedulePause", "ScheduleRemove", "ScheduleResume", "ScheduleTrigger", "SendMessage", "Stats", "StoreStatus", "Submit", "SubmitMany", "Subscribe", "Suspend",
    "TaskContextRequest", "TierName", "TokenCreate", "TokenList", "TokenRevoke", "Tree", "Unsubscribe", "View", "Views",
    "WebhookAdd", "WebhookList", "WebhookRemove", "problems", "revalidate",
]


__getattr__, __dir__ = lazy.names(__name__, _HOMES)
