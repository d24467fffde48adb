"""The project's tools: fits, checks and the measuring code behind the docs (not shipped).

A package so that ``tools.measuring`` imports by name from the repository's
root (the test suite, ``docs/make_plots.py``, asv with the root on its path);
the scripts beside it run by hand, ``python tools/NAME.py``.
"""
