"""Suite-wide settings: nothing is written to the working directory, and no time limit is a test's.

Hypothesis keeps an example database in ./.hypothesis by default; the suite writes nothing to the
working directory, so keep none.  Its per-example deadline (200 ms) and its too_slow health check
are wall-clock limits a loaded machine breaks: off for every property test (a time is a benchmark's).
"""

from hypothesis import HealthCheck, settings

settings.register_profile("pegasus", database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pegasus")
