"""The command line: ``cbrtgrad info``, ``verify``, ``bench`` and ``warm``."""
