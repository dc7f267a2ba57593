"""Pegasus: LLM agent tasks as explicit state machines on the actor model.

``pegasus`` is the domain (state machines, cognition, configuration, the store, the cores of every
actor) and never imports Thespian; ``actors`` is the Thespian runtime that drives it
(docs/architecture.md).
"""

__version__ = "0.1.0"
