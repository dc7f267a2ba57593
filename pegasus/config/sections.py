"""The sections of the settings (``[runtime]``, ``[pools]``, ``[llm]`` ...): one pydantic model each,
with its defaults and bounds.  ``pegasus.config.settings`` puts them together and reads the layers.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from pegasus.task.names import CognitiveMachineName, MachineName, StageName

DEFAULT_HOME = "~/.pegasus"


def home_dir(environ: Mapping[str, str]) -> Path:
    """The state directory when ``[state] home`` is empty: ``$PEGASUS_HOME``, else ``~/.pegasus``."""
    return Path(environ.get("PEGASUS_HOME") or DEFAULT_HOME).expanduser().resolve()


class _Section(BaseModel):
    # No setting may be inf or nan: each becomes a timer, a size or a count (docs/security.md, bounds).
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)


# One process per worker: past this a typo (100000) would fork the host to a standstill.
# 512 leaves room for 100 llm + 100 tool workers on one host with margin.
MAX_POOL_WORKERS = 512
MIN_HELD_MOVE_AFTER_S = 0.5  # [pools] held_move_after_s, when not 0
# Ceilings of the other settings: far above any sensible value, low enough that each stays a valid timer
# (Thespian's select, timedelta), SQLite integer and float (backoff doubling) wherever the core uses it.
DAY_S = 86400.0  # a deadline, period or back-off longer than a day is a typo
MAX_COUNT = 10**9  # tasks, items, tokens, retries...: counts
MAX_BYTES = 1 << 40  # sizes in bytes


class RuntimeSettings(_Section):
    # Tasks admitted and running at once.  A running task waiting on a stage is a run held in a task actor,
    # not a process, a few KB each (docs/architecture.md, "Virtual task actors").  Above ~1,000 the priority
    # queue matters less (admitted tasks wait FIFO in the pools), so the default stops there.
    max_active_tasks: int = Field(1000, ge=1, le=1_000_000)
    approval_policy: Literal["auto", "manual"] = "auto"
    default_machine: CognitiveMachineName = MachineName.CLASSIC.value
    max_input_bytes: int = Field(65536, ge=1, le=1 << 30)
    max_message_bytes: int = Field(262144, ge=1024, le=1 << 30)
    max_pending_tasks: int = Field(100000, ge=1, le=MAX_COUNT)
    max_iterations: int = Field(5, ge=1, le=10_000)
    # Runs one task actor process serves before it is retired, once the last of them stopped
    # (1: a new process per run).  A task actor holds many runs at once (pegasus/run/hosts.py).
    task_actor_runs: int = Field(1000, ge=1, le=MAX_COUNT)
    # Task actor processes: the floor (the first runs start them, each a new one; kept when idle) and the
    # ceiling (past the floor, more start only while every one is busy).
    task_actors_min: int = Field(1, ge=1, le=MAX_POOL_WORKERS)
    task_actors_max: int = Field(8, ge=1, le=MAX_POOL_WORKERS)
    # A task actor above the floor that held no run this long is retired.
    task_actors_idle_s: float = Field(30.0, gt=0, le=DAY_S)
    # Messages one task may be sent (``pegasus message``), and their UTF-8 bytes together (docs/messages.md).
    task_messages_max: int = Field(100, ge=1, le=100_000)
    task_messages_max_bytes: int = Field(262144, ge=1, le=1 << 30)

    @model_validator(mode="after")
    def _task_actors(self) -> RuntimeSettings:
        if self.task_actors_min > self.task_actors_max:
            raise ValueError(f"task_actors_min ({self.task_actors_min}) is over task_actors_max "
                             f"({self.task_actors_max})")
        return self


class PoolSettings(_Section):
    llm_workers: int = Field(3, ge=1, le=MAX_POOL_WORKERS)
    tool_workers: int = Field(3, ge=1, le=MAX_POOL_WORKERS)
    queue_limit: int = Field(10000, ge=1, le=MAX_COUNT)
    llm_timeout_s: float = Field(120.0, gt=0, le=DAY_S)
    tool_timeout_s: float = Field(60.0, gt=0, le=DAY_S)
    # Requests a worker may hold while it runs one (pegasus/pool/core.py "Prefetch"); 0: none.
    llm_prefetch: int = Field(1, ge=0, le=16)
    tool_prefetch: int = Field(1, ge=0, le=16)
    # A held request moves to a worker freeing with nothing queued once its holder's call ran this long (or four
    # times the pool's mean call, if longer: pegasus/pool/state.py); 0: never, else at least MIN_HELD_MOVE_AFTER_S.
    held_move_after_s: float = Field(1.0, ge=0, le=DAY_S)
    # The pools' cores run in a task actor (the home host, pegasus/pool/home.py): two messages a stage, not four.
    home_host: bool = True
    # A dead pool starts again at once, then after pauses doubling from a tenth of this to this; past its
    # intensity in the home host, each restart waits this long (actors/supervisor/context.py SPECS).
    restart_pause_max_s: float = Field(5.0, gt=0, le=DAY_S)

    @field_validator("held_move_after_s")
    @classmethod
    def _held_move_after_s(cls, value: float) -> float:
        # Its held step's worker asks its pool after a call of half this: that half covers the transit of a Work
        # and a WorkDone, or a moved step would run twice.
        if 0 < value < MIN_HELD_MOVE_AFTER_S:
            raise ValueError(f"must be 0 (never move a held step) or at least {MIN_HELD_MOVE_AFTER_S:g} s, not {value:g}")
        return value


class CognitionSettings(_Section):
    latency_ms: float = Field(0.0, ge=0, le=DAY_S * 1000)


class Gate(_Section):
    name: str
    command: list[str] = Field(min_length=1)
    timeout_s: float = Field(60.0, gt=0, le=DAY_S)


class VerificationSettings(_Section):
    gates: list[Gate] = Field(default_factory=list)
    max_gate_retries: int = Field(1, ge=0, le=1000)


class RetrySettings(_Section):
    max_attempts: int = Field(3, ge=1, le=1000)
    backoff_s: float = Field(1.0, ge=0, le=DAY_S)
    backoff_max_s: float = Field(60.0, ge=0, le=DAY_S)


class SystemSettings(_Section):
    admin_port: int = Field(19190, ge=1, le=65535)
    bind: str = "127.0.0.1"
    allow_non_loopback: bool = False
    base: Literal["multiprocTCPBase", "simpleSystemBase"] = "multiprocTCPBase"
    start_timeout_s: float = Field(20.0, gt=0, le=DAY_S)
    # The address other machines use to reach this system; empty: the bind address.
    advertise: str = ""
    # Every frame any process of the system reads is at most this long: checked at its header,
    # before its body is read (a request's own limit is [runtime] max_message_bytes).
    max_frame_bytes: int = Field(16 * 1024 * 1024, ge=65536, le=1 << 30)


class ConventionSettings(_Section):
    """Several machines: one leader admin, members that run stage workers (docs/convention.md)."""

    lead: bool = False  # this system leads a convention (``pegasus start --leader``)
    leader: str = ""  # "HOST:PORT" of the leader this machine joins (``pegasus join HOST:PORT``)
    local_workers: bool = True  # the leader runs its [pools] workers itself; false: members only
    # Thespian's member failure detection: a member that misses registration_miss_max
    # check-ins (one per reregistration_period_s) is declared dead.
    reregistration_period_s: float = Field(3.0, ge=1, le=DAY_S)
    registration_miss_max: int = Field(2, ge=1, le=1000)
    restart_period_s: float = Field(3.0, ge=1, le=DAY_S)
    placement_timeout_s: float = Field(20.0, gt=0, le=DAY_S)  # a worker placed on a member must report by then


class SubtaskSettings(_Section):
    """sub_task plan steps: the task tree (docs/subtasks.md)."""

    max_depth: int = Field(3, ge=0, le=100)  # a submitted task is depth 0, its children 1, ...: deeper is refused
    max_children: int = Field(16, ge=0, le=10_000)  # children one task may start per attempt


class ToolSettings(_Section):
    # "module:function" entries; each function gets the ToolRegistry and may register tools.
    plugins: list[str] = Field(default_factory=list)
    # The directory the file tools may reach at most; empty: the home directory of the Pegasus
    # user.  A task's workspace (the submitting client's cwd) may only narrow it (pegasus.tools.workspace).
    workspace_root: str = ""
    confine_reads: bool = True  # false: read_file / list_dir / count read any path (not recommended)
    read_allow: list[str] = Field(default_factory=list)  # more directories the read tools may reach
    shell_enabled: bool = False  # the shell tool runs commands: off unless asked for
    shell_timeout_s: float = Field(30.0, gt=0, le=DAY_S)
    max_output_chars: int = Field(16000, ge=1, le=1 << 30)  # longer tool results are cut, with a note


# The stages that call a model, each of which may name a tier (``[llm.stages]``).
LLM_STAGE_NAMES = (StageName.PERCEIVE.value, StageName.THINK.value, StageName.PLAN.value,
                   StageName.REFLECT.value, StageName.REASON.value, StageName.POST_REFLECT.value)
DEFAULT_TIER = "default"  # the tier that is ``[llm]`` itself: every stage [llm.stages] does not name


class ModelPrice(_Section):
    """What a model costs, in USD per million tokens (``[llm.prices."<model>"]`` or a tier's ``price``)."""

    input: float = Field(ge=0, le=1e9)
    cached_input: float | None = Field(None, ge=0, le=1e9)  # cached prompt tokens; unset: charged as input
    output: float = Field(ge=0, le=1e9)


class LLMTier(_Section):
    """A model some stages use (``[llm.tiers.<name>]``); an unset field is ``[llm]``'s."""

    model: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str | None = None
    rpm: int | None = Field(None, ge=0, le=MAX_COUNT)  # this tier's own rate budget (0 = unlimited)
    tpm: int | None = Field(None, ge=0, le=MAX_COUNT * 1000)
    context_window: int | None = Field(None, ge=0, le=MAX_COUNT)
    max_output_tokens: int | None = Field(None, ge=0, le=MAX_COUNT)
    price: ModelPrice | None = None  # else [llm.prices] of its model
    max_concurrent: int | None = Field(None, ge=0, le=MAX_COUNT)  # requests its base_url is sent at once


class LLMSettings(_Section):
    provider: Literal["offline", "openai"] = "offline"  # "openai": any OpenAI-compatible endpoint
    base_url: str = ""  # empty: the SDK's default (api.openai.com or $OPENAI_BASE_URL)
    model: str = ""
    # The NAME of the environment variable holding the key (never the key itself);
    # empty for servers that need none (Ollama, llama.cpp): a placeholder is sent.
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(60.0, gt=0, le=DAY_S)
    max_retries: int = Field(2, ge=0, le=100)
    temperature: float = Field(0.0, ge=0, le=2)
    max_output_tokens: int = Field(1024, ge=0, le=MAX_COUNT)  # sent as token_limit_param; 0 sends no cap
    # The capability ladder (pegasus.llm.capabilities): "auto" starts at the top and steps down when the
    # endpoint's 400 refuses the parameter; any other value is used as is.
    structured_output: Literal["auto", "json_schema", "json_object_schema", "json_object", "prompted"] = "auto"
    tool_calls: Literal["auto", "native", "prompted"] = "auto"
    token_limit_param: Literal["auto", "max_tokens", "max_completion_tokens"] = "auto"
    reasoning_effort: Literal["", "none", "minimal", "low", "medium", "high"] = ""  # "": not sent
    # Stream replies (with usage) and forward their text to followers; a server that refuses
    # streaming (a 400 naming it) is asked without it from then on.
    stream: bool = True
    # A streamed reply that ends in one passage (64+ characters) written this many times in a row is stopped
    # there and read as run to the token cap: a small model looping (pegasus.llm.loops).  0: never stopped.
    loop_repeats: int = Field(3, ge=0, le=1000)
    max_tool_calls: int = Field(20, ge=1, le=100_000)  # per task (reason_act): past it the model must answer
    rpm: int = Field(0, ge=0, le=MAX_COUNT)  # requests per minute per model; 0 = unlimited
    tpm: int = Field(0, ge=0, le=MAX_COUNT * 1000)  # tokens per minute per model; 0 = unlimited
    # Tokens one call may hold (prompt + output); past it old tool results are cut and the
    # conversation summarised (pegasus.llm.context).  0: no limit is applied.
    context_window: int = Field(0, ge=0, le=MAX_COUNT)
    # Requests the llm pool sends one endpoint (base_url) at once; the rest wait in the pool's queue, where
    # no stage deadline runs.  0: as many as there are llm workers, and 1 once the server is seen to
    # decode one request at a time (llama-cpp-python cutting a stream because another waits).
    max_concurrent: int = Field(0, ge=0, le=MAX_COUNT)
    tiers: dict[str, LLMTier] = Field(default_factory=dict)  # name -> model (``[llm.tiers.fast]``)
    stages: dict[str, str] = Field(default_factory=dict)  # stage -> tier name; unnamed stages: "default"
    prices: dict[str, ModelPrice] = Field(default_factory=dict)  # model -> price; none: no cost shown

    @model_validator(mode="before")
    @classmethod
    def _json_mode_replaced(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "json_mode" in data:
            raise ValueError('json_mode was replaced by structured_output: json_mode = true is structured_output = '
                             '"auto" (or "json_object"), json_mode = false is structured_output = "prompted"')
        return data

    @model_validator(mode="after")
    def _model_named(self) -> LLMSettings:
        if self.provider == "openai" and not self.model.strip():
            raise ValueError("model must be set when provider is 'openai'")
        if DEFAULT_TIER in self.tiers:
            raise ValueError(f"tiers: {DEFAULT_TIER!r} is [llm] itself and cannot be redefined")
        for stage, tier in self.stages.items():
            if stage not in LLM_STAGE_NAMES:
                raise ValueError(f"stages: {stage!r} is not a model stage; they are {', '.join(LLM_STAGE_NAMES)}")
            if tier not in self.tier_names():
                raise ValueError(f"stages.{stage}: unknown tier {tier!r}; the tiers are {', '.join(self.tier_names())}")
        return self

    def tier_names(self) -> list[str]:
        """The tiers a stage or a task may name: "default" ([llm] itself), then ``[llm.tiers]``."""
        return [DEFAULT_TIER, *sorted(self.tiers)]

    def tier_of(self, stage: str, task_tier: str | None = None) -> str:
        """The tier a stage runs on: its task's (``submit --tier``), else [llm.stages]' ("default": [llm] itself)."""
        return task_tier or self.stages.get(stage, DEFAULT_TIER)

    def tier(self, name: str) -> LLMSettings:
        """``[llm]`` as tier ``name`` sees it: its model, endpoint, key, budgets and window."""
        if name == DEFAULT_TIER:
            return self
        tier = self.tiers[name]
        update = {key: value for key, value in tier.model_dump(exclude={"price"}).items() if value is not None}
        return self.model_copy(update=update)

    def price(self, name: str) -> ModelPrice | None:
        """What tier ``name``'s model costs: its own price, else [llm.prices] of its model, else None."""
        tier = self.tiers.get(name)
        if tier is not None and tier.price is not None:
            return tier.price
        return self.prices.get(self.tier(name).model)


class McpServer(_Section):
    name: str = Field(pattern=r"^[A-Za-z][\w\-]*$")  # its tools are "<name>.<tool>"
    command: str = ""  # started over stdio ...
    url: str = ""  # ... or reached over Streamable HTTP ("http://127.0.0.1:8000/mcp"): exactly one of the two
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    # The effect class of a tool whose server's annotations say nothing (docs/tools.md, precedence).
    effect: Literal["pure", "idempotent", "effectful"] = "effectful"
    # Per tool, over its annotations and ``effect``: [mcp.servers.tools] git_log = "pure".
    tools: dict[str, Literal["pure", "idempotent", "effectful"]] = Field(default_factory=dict)
    timeout_s: float = Field(60.0, gt=0, le=DAY_S)
    # "machine": one copy per Thespian admin, shared by its workers; "worker": one per worker process.
    scope: Literal["machine", "worker"] = "machine"
    max_calls: int = Field(4, ge=1, le=1024)  # calls in flight at once on one copy; more wait

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if bool(self.command.strip()) == bool(self.url.strip()):
            raise ValueError(f"server {self.name!r}: set exactly one of command (stdio) and url (Streamable HTTP)")
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"server {self.name!r}: url must start with http:// or https://, got {self.url!r}")
        return self


class McpSettings(_Section):
    servers: list[McpServer] = Field(default_factory=list)
    start_timeout_s: float = Field(30.0, gt=0, le=DAY_S)
    # A server that failed is started again in the background after retry_backoff_s, doubling
    # after each failed start up to retry_backoff_max_s; calls to it fail at once meanwhile.
    retry_backoff_s: float = Field(1.0, gt=0, le=DAY_S)
    retry_backoff_max_s: float = Field(60.0, gt=0, le=DAY_S)

    @model_validator(mode="after")
    def _unique_names(self) -> McpSettings:
        names = [server.name for server in self.servers]
        if len(names) != len(set(names)):
            raise ValueError(f"server names must be unique, got {names}")
        return self


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class HttpSettings(_Section):
    """The HTTP gateway (docs/http.md): a process of the system serving the JSON API."""

    enabled: bool = False  # also: pegasus start --http PORT
    bind: str = "127.0.0.1"
    port: int = Field(8470, ge=1, le=65535)
    # A bind other than loopback needs TLS (both paths) or this explicit allow.
    allow_non_loopback: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    # A request body longer than this is refused (413) before it is read.
    max_body_bytes: int = Field(1048576, ge=1024, le=1 << 30)
    clients: int = Field(8, ge=1, le=256)  # connections to the supervisor for requests (one per call at a time)
    max_streams: int = Field(256, ge=1, le=100_000)  # event streams open at once (each holds its own connection)
    keepalive_s: float = Field(15.0, gt=0, le=DAY_S)  # an event stream's comment line when nothing happened for this long

    @model_validator(mode="after")
    def _safe_bind(self) -> HttpSettings:
        if bool(self.tls_cert) != bool(self.tls_key):
            raise ValueError("tls_cert and tls_key go together: give both or neither")
        if self.bind not in LOOPBACK_HOSTS and not self.tls_cert and not self.allow_non_loopback:
            raise ValueError(f"bind {self.bind!r} is not loopback: configure TLS (tls_cert, tls_key) or set "
                             "allow_non_loopback = true")
        return self


class StateSettings(_Section):
    home: str = ""  # empty: $PEGASUS_HOME, else ~/.pegasus


class StoreSettings(_Section):
    """Retention of finished tasks (pegasus.store.retention, docs/durability.md)."""

    # Days a finished task tree is kept after its last change; the supervisor deletes older ones hourly (their
    # transitions, checkpoints and journal with them; memory stays).  0: kept for good.
    retain_days: float = Field(0.0, ge=0, le=36500)
    # Milliseconds a commit of task reports that told no one anything waits for more reports to share it
    # (pegasus.store.drain: when stages wait, each report arrives alone).  0: each commits at once.
    commit_linger_ms: float = Field(20.0, ge=0, le=1000)


class LoggingSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    # Task text, prompts, model and tool output in the log; off: their length only (pegasus.logs).
    content: bool = False
    max_bytes: int = Field(10 * 1024 * 1024, ge=4096, le=MAX_BYTES)  # pegasus.jsonl is rotated past this size ...
    backups: int = Field(5, ge=1, le=1000)  # ... keeping this many older files (pegasus.jsonl.1 ...)

    @field_validator("level", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value


class MemorySettings(_Section):
    """Long-term memory (pegasus.memory, docs/agent-memory.md)."""

    facts_max_bytes: int = Field(65536, ge=1, le=1 << 30)  # UTF-8 bytes of every fact's current version together; past it: refused
    fact_versions_max: int = Field(20, ge=1, le=100_000)  # versions kept per fact path (older ones pruned)
    episodes_max: int = Field(10000, ge=1, le=MAX_COUNT)  # episodes kept; past it the oldest is dropped
    archive_max: int = Field(10000, ge=1, le=MAX_COUNT)  # archived task contexts kept; past it the oldest is dropped
    recall_k: int = Field(5, ge=0, le=100)  # memories given to a think / reason stage
    reflector: bool = True  # the post-task reflector writes facts and an episode after each done task
    embeddings_model: str = ""  # an /embeddings model; empty: full-text search (FTS5) only
    embeddings_base_url: str = ""  # empty: [llm] base_url
    embeddings_api_key_env: str = ""  # empty: [llm] api_key_env
    # One call's bound, never retried: a search or write from the CLI waits at most this long for a vector,
    # a task's recall too (then full text alone, said so), and a background batch tries again later.
    embeddings_timeout_s: float = Field(10.0, gt=0, le=600)
    embeddings_backfill_s: float = Field(10.0, gt=0, le=86400)  # between background batches
    embeddings_batch: int = Field(16, ge=1, le=256)  # rows given a vector per background batch


class AgentSettings(_Section):
    """Who the agent is (pegasus.memory.identity); ``<state dir>/identity.md`` wins when present."""

    name: str = "Pegasus"
    role: str = ""
    instructions: str = ""


class TelemetrySettings(_Section):
    """OpenTelemetry traces (docs/operations.md): a trace per task, exported over OTLP/HTTP by the processes that
    do the work.  Needs the ``telemetry`` extra (opentelemetry-sdk and its OTLP exporter)."""

    enabled: bool = False
    endpoint: str = "http://127.0.0.1:4318/v1/traces"  # an OTLP/HTTP (protobuf) traces endpoint: a Collector, Jaeger
    service_name: str = "pegasus"  # the spans' service.name
    export_delay_ms: int = Field(1000, ge=10, le=600_000)  # spans wait at most this long in a process before they go
