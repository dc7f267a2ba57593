"""``python -m actors.cli``: the ``pegasus`` command line."""

import sys

from actors.cli import main

sys.exit(main())
