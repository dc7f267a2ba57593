"""The stage worker's pure core: ``pegasus.worker.core.WorkerCore`` and what it is told and asks
(``inputs``, ``commands``); its calls to the machine's MCP host (``host_calls``)."""
