"""The error root of Pegasus.  Every error Pegasus raises derives from PegasusError
and carries the data a caller needs (task id, state, event) as attributes."""

from __future__ import annotations


class PegasusError(Exception):
    """Root of every error Pegasus raises on purpose."""


class ConfigError(PegasusError):
    """A configuration file or environment override is invalid; names the key."""


class CodecError(PegasusError):
    """Bytes that are not a Pegasus record, or of an unknown version or type."""
