"""The package version: a leaf module, so that modules inside the package can read it
without importing the package itself (setup.cfg reads it as ``cbrtgrad._version.__version__``)."""

__version__ = "0.1.0"
