"""Test-only: a census of the modules each process of a system holds (tests/integration/test_lean_imports.py).

On this directory's path with ``PEGASUS_TEST_MODULE_CENSUS=<dir>``, every process started from here on
appends to ``<dir>/<pid>`` what it holds when it starts or is forked, and each module it asks for later: a
finder first on ``sys.meta_path`` is asked for every module not yet loaded, by any way of importing, and
only writes its name down.  Without the variable it does nothing.
"""

import os
import sys

_DIR = os.environ.get("PEGASUS_TEST_MODULE_CENSUS")


def _record(names):
    with open(os.path.join(_DIR, str(os.getpid())), "a", encoding="utf-8") as out:
        out.write("".join(f"{name}\n" for name in names))


class _Census:
    @staticmethod
    def find_spec(name, path=None, target=None):
        _record([name])
        return None  # the next finder loads it


if _DIR:
    _record(list(sys.modules))
    sys.meta_path.insert(0, _Census)
    os.register_at_fork(after_in_child=lambda: _record(list(sys.modules)))
