"""The shipped default configuration, installed as the package ``pegasus.defaults``."""
