"""The stage pool's pure core: ``pegasus.pool.core.PoolCore`` and what it is told and asks (``inputs``, ``commands``).

Nothing is imported here: actors/runtime/system.py reads ``placement`` without loading the core.
"""
