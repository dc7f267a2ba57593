"""How many requests the llm pool sends one endpoint at once (``[llm] max_concurrent``).

Held to the endpoint's limit, a request waits in the pool's queue, where no stage deadline runs,
instead of inside a server that decodes one at a time.  A base_url's limit is the least
``max_concurrent`` of the tiers using it; with none set (auto) it is 1 once a worker saw the server
decode one at a time (the ladder's ``serial``), else none beyond the pool's workers.  Pure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pegasus.config import DEFAULT_TIER, LLMSettings


class EndpointLimits:
    def __init__(self, llm: LLMSettings) -> None:
        tiers = {name: llm.tier(name) for name in (DEFAULT_TIER, *llm.tiers)}
        self.endpoint = {name: config.base_url for name, config in tiers.items()}  # tier -> its base_url
        self.fixed: dict[str, int] = {}  # base_url -> the least max_concurrent set on its tiers
        for name, config in tiers.items():
            if config.max_concurrent:
                endpoint = self.endpoint[name]
                self.fixed[endpoint] = min(self.fixed.get(endpoint, config.max_concurrent), config.max_concurrent)
        self.serial: frozenset[str] = frozenset()  # base_urls seen decoding one request at a time

    def learn(self, known: Mapping[str, Mapping[str, Any]]) -> None:
        """Take in what the pool knows of endpoints (keys are pegasus.llm.ladder's: [base_url, model, ...])."""
        self.serial = frozenset(json.loads(key)[0] for key, fields in known.items() if fields.get("serial"))

    def of(self, tier: str) -> tuple[str, int]:
        """The tier's base_url and how many requests it may be sent at once (0: no limit of its own)."""
        endpoint = self.endpoint.get(tier, self.endpoint[DEFAULT_TIER])
        return endpoint, self.fixed.get(endpoint) or (1 if endpoint in self.serial else 0)
