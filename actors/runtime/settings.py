"""A system's settings as its state directory holds them (``settings.json``, written by ``pegasus start``).

Read by the guardian for each supervisor it starts, by the gateway process and the dashboard: its own
module, so those two load neither the guardian nor the actors it creates.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from actors.runtime.spec import SETTINGS_FILE
from pegasus.config import Settings
from pegasus.errors import PegasusError


class SettingsUnusable(PegasusError):
    """The state directory's settings are missing or invalid: no supervisor can be configured from them."""


def read_settings(state_dir: Path) -> Settings:
    path = Path(state_dir) / SETTINGS_FILE
    try:
        return Settings.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise SettingsUnusable(f"no settings at {path}: start the system with pegasus start") from None
    except (OSError, ValidationError) as exc:
        raise SettingsUnusable(f"the settings at {path} cannot be used: {exc}") from None
