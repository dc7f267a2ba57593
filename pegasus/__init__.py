"""Pegasus: LLM agent tasks as explicit state machines on the actor model.

The package is split in two on purpose:

* ``pegasus`` (this package) is the domain: state machines, models, cognition,
  configuration and codecs.  ``pegasus.task`` and ``pegasus.cognitive`` are pure:
  they do no I/O and never import Thespian (a test keeps it so).
* ``actors`` is the Thespian runtime that drives the domain: supervisor, task
  actors, stage pools and the system start/attach code.
"""

__version__ = "0.1.0"
