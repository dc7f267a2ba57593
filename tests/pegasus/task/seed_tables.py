"""The seeds' transition tables, copied by hand from ../shared/seeds (not derived from
the code), so that the table tests compare the machines with the documents."""

CLASSIC_STATES = ["idle", "perceiving", "thinking", "planning", "acting", "reflecting",
                  "suspended", "completed", "failed"]
CLASSIC_ACTIVE = ["perceiving", "thinking", "planning", "acting", "reflecting"]

# seed 000, static table: (from, event, to)
CLASSIC_STATIC = [
    ("idle", "TASK_CREATED", "perceiving"),
    ("perceiving", "PERCEIVE_DONE", "thinking"),
    ("thinking", "THINK_DONE", "planning"),
    ("thinking", "NEED_MORE_INFO", "suspended"),
    ("planning", "PLAN_DONE", "acting"),
    ("acting", "ACT_DONE", "reflecting"),
    ("suspended", "MESSAGE_RECEIVED", "thinking"),
]
# seed 000, dynamic table: (from, event)
CLASSIC_DYNAMIC = [
    ("acting", "TOOL_CALL_COMPLETED"),
    ("acting", "TOOL_CALL_FAILED"),
    ("reflecting", "REFLECT_DONE"),
    ("suspended", "TASK_RESUMED"),
]

REASON_ACT_STATES = ["idle", "reasoning", "acting", "suspended", "completed", "failed"]
REASON_ACT_ACTIVE = ["reasoning", "acting"]
REASON_ACT_STATIC = [
    ("idle", "TASK_CREATED", "reasoning"),
    ("reasoning", "REASON_DONE", "acting"),
    ("reasoning", "NEED_MORE_INFO", "suspended"),
    ("suspended", "MESSAGE_RECEIVED", "reasoning"),
]
REASON_ACT_DYNAMIC = [
    ("acting", "TOOL_CALL_COMPLETED"),
    ("acting", "TOOL_CALL_FAILED"),
    ("acting", "STEP_COMPLETED"),
    ("suspended", "TASK_RESUMED"),
]

LIFECYCLE_STATES = ["draft", "approved", "queued", "running", "verifying", "verified",
                    "done", "failed", "canceled", "blocked"]
LIFECYCLE_TERMINAL = ["done", "failed", "canceled", "blocked"]
# seed 002, section 3: (id, from, to) with the event DESIGN.md maps each point to
LIFECYCLE_POINTS = [
    ("T1", "draft", "approved", "TASK_APPROVED"),
    ("T2", "draft", "canceled", "TASK_CANCELED"),
    ("T3", "approved", "queued", "TASK_QUEUED"),
    ("T4", "approved", "canceled", "TASK_CANCELED"),
    ("T5", "queued", "running", "TASK_STARTED"),
    ("T6", "queued", "canceled", "TASK_CANCELED"),
    ("T7", "running", "verifying", "EXECUTION_COMPLETED"),
    ("T8", "running", "failed", "TASK_FAILED"),
    ("T9", "running", "canceled", "TASK_CANCELED"),
    ("T10", "running", "blocked", "TASK_BLOCKED"),
    ("T11", "verifying", "verified", "TASK_VERIFIED"),
    ("T12", "verifying", "failed", "TASK_FAILED"),
    ("T13", "verifying", "canceled", "TASK_CANCELED"),
    ("T14", "verifying", "queued", "GATE_FAILED"),
    ("T15", "verified", "done", "TASK_DONE"),
    ("T16", "failed", "queued", "TASK_RETRIED"),
    ("T17", "blocked", "queued", "TASK_UNBLOCKED"),
    ("T18", "blocked", "canceled", "TASK_CANCELED"),
    ("T19", "running", "running", "TASK_STARTED"),
    ("T20", "queued", "queued", "TASK_QUEUED"),
]
EXIT_REASONS = ["timeout", "retry_exhausted", "canceled", "exception", "gate_failed",
                "user_stopped", "fatal_error", "max_iterations", "blocked", "unknown"]
