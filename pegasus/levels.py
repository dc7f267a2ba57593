"""A log line's level, as the cores' ``Log`` commands name it: ``logging``'s numbers, declared once.

Its own module, so a core names a level without loading structlog (``pegasus.logs`` does); the carriers
write a line with ``pegasus.logs.emit``.
"""

from __future__ import annotations

import enum
import logging


class Level(enum.IntEnum):
    DEBUG = logging.DEBUG
    INFO = logging.INFO
    WARNING = logging.WARNING
    ERROR = logging.ERROR
