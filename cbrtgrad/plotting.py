"""Deprecated: the figure of ``cbrtgrad bench --plot`` moved to :mod:`cbrtgrad.bench.plotting`.

Every public name of this module still works, as the same object, with a
``DeprecationWarning`` that names its new module (issue 25).
"""

from .bench._moved import redirect

__getattr__, __all__ = redirect(
    __name__,
    {"cbrtgrad.bench.plotting": ["INSTALL_HINT", "check_path", "plot_curve", "require_matplotlib"]},
)
