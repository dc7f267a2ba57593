"""The supervisor: one actor per system, a thin carrier (``carrier``) over tables of rows.

``context`` is the state every row is given; ``replies`` answers requests; the
rows by conversation: ``tasks`` (requests about tasks), ``runs`` (task actors'
reports), ``children`` (pools and task actors supervised), ``store`` (the
store's health, backups), ``schedules``, ``webhooks``, ``memory``, ``stats``,
``lookups`` (requests that only read or write the store); ``commands`` carries
out Admission's commands; ``task_actors`` places runs on task actors.
"""

from actors.supervisor.carrier import Supervisor

__all__ = ["Supervisor"]
