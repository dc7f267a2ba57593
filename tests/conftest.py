"""Suite-wide settings: nothing is written to the working directory by the tests."""

from hypothesis import settings

# Hypothesis keeps an example database in ./.hypothesis by default; the suite
# writes nothing to the working directory, so keep none.
settings.register_profile("pegasus", database=None)
settings.load_profile("pegasus")
