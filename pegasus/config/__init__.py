"""Configuration: the settings' sections (``sections``) and the whole, read from its layers (``settings``).

Every name is imported from here: ``from pegasus.config import Settings, load``.
"""

from pegasus.config.sections import (
    AgentSettings, CognitionSettings, ConventionSettings, DAY_S, DEFAULT_HOME, DEFAULT_TIER, Gate, HttpSettings,
    LLMSettings, LLMTier, LLM_STAGE_NAMES, LOOPBACK_HOSTS, LoggingSettings, MAX_BYTES, MAX_COUNT, MAX_POOL_WORKERS,
    McpServer, McpSettings, MemorySettings, ModelPrice, PoolSettings, RetrySettings, RuntimeSettings,
    StateSettings, StoreSettings, SubtaskSettings, SystemSettings, TelemetrySettings, ToolSettings,
    VerificationSettings, home_dir,
)
from pegasus.config.settings import (
    ENV_PREFIX, Settings, env_layer, from_layers, load, parse, parse_toml, shipped_text,
)

__all__ = [
    "DAY_S", "DEFAULT_HOME", "DEFAULT_TIER", "ENV_PREFIX", "LLM_STAGE_NAMES", "LOOPBACK_HOSTS", "MAX_BYTES",
    "MAX_COUNT", "MAX_POOL_WORKERS", "AgentSettings", "CognitionSettings", "ConventionSettings", "Gate",
    "HttpSettings", "LLMSettings", "LLMTier", "LoggingSettings", "McpServer", "McpSettings", "MemorySettings",
    "ModelPrice", "PoolSettings", "RetrySettings", "RuntimeSettings", "Settings", "StateSettings", "StoreSettings",
    "SubtaskSettings", "SystemSettings", "TelemetrySettings", "ToolSettings", "VerificationSettings", "env_layer",
    "from_layers",
    "home_dir", "load", "parse", "parse_toml", "shipped_text",
]
