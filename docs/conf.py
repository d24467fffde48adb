"""Sphinx configuration of the cbrtgrad documentation.

Build (as ``tests/test_docs.py`` does, warnings as errors)::

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html

The pages are markdown (myst-parser); the API reference comes from the
NumPy-style docstrings (autodoc + numpydoc); the performance figures are files
that ``docs/make_plots.py`` writes into ``docs/generated/``, so the build
itself measures nothing; ``_ext/generated_tables.py`` renders the short tables
that open the performance and accuracy pages from those files. The built site
needs no network (MathJax is copied into it); ``tools/check_docs_site.py``
checks that in a headless browser.
"""

from __future__ import annotations

import os
import sys

# Document the package of this source tree, not whatever copy is installed.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))
# The site's own extension: the short tables read from docs/generated/.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "_ext")))

import cbrtgrad  # noqa: E402

project = "cbrtgrad"
author = "the cbrtgrad developers"
copyright = "the cbrtgrad developers"
release = version = cbrtgrad.__version__

extensions = [
    "myst_parser",
    "numpydoc",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    # MathJax itself, copied into the build's _static/mathjax (the package
    # vendors MathJax 3.2.2 and sets mathjax_path), so that the maths renders
    # offline: without it the pages load MathJax from a CDN.
    "sphinx-mathjax-offline",
    "generated_tables",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]
templates_path: list[str] = []

# Markdown: $...$ and $$...$$ maths, ``:::`` fences, heading anchors for links.
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence"]
myst_heading_anchors = 3

# API reference: types live in the numpydoc sections, so signatures stay short.
autodoc_typehints = "none"
autodoc_member_order = "bysource"
autosummary_generate = False
numpydoc_show_class_members = False
numpydoc_xref_param_type = False
# Docstring rules numpydoc enforces on every documented object (a violation is
# a warning, so an error here): sections in order and well formed, parameters
# documented and spelled as in the signature, a one-line summary, examples.
numpydoc_validation_checks = {
    "GL02",  # closing quotes on their own line
    "GL03",  # no double blank lines
    "GL06",  # unknown section
    "GL07",  # sections in the wrong order
    "GL09",  # deprecation warning placement
    "GL10",  # reST directive spelling
    "SS01",  # a summary exists
    "SS02",  # summary starts with a capital letter
    "SS03",  # summary ends with a period
    "SS06",  # summary fits on one line
    "PR01",  # every parameter documented
    "PR02",  # no unknown parameters
    "PR03",  # parameters in signature order
    "PR06",  # type names: int, str, bool (not integer, string, boolean)
    "PR10",  # "name : type" spacing
    "RT02",  # return type, not a name
}
# Examples (numpydoc's EX01) are required of every public function and class
# by tests/test_docs.py instead: here EX01 would also demand one of every
# property and every op node. numpydoc validates a class docstring against
# its constructor's signature; for an enum and a typing.Protocol that is
# the machinery's (``value, names, ...``, ``*args, **kwargs``), not theirs.
# The enum's members are documented by ``#:`` comments, which have no quotes
# for GL02 to place.
numpydoc_validation_exclude = {
    r"^cbrtgrad\.AmpPolicy$",
    r"^cbrtgrad\.AmpPolicy\.",
    r"^cbrtgrad\.engine\.Saves$",
    r"^cbrtgrad\.engine\.Saves\.",
    r"^cbrtgrad\.backends\.Backend$",
}

# Nitpicky: every cross-reference must resolve. Names outside this project are
# not resolvable offline (no intersphinx: the build must not need the network),
# so they are listed here, and only they.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(numpy|scipy|matplotlib|dask|numba|mpmath|jax|torch)(\..*)?"),
    (r"py:.*", r"(contextlib|collections|typing|time|argparse|enum)\..*"),
]

html_theme = "pydata_sphinx_theme"
html_title = f"cbrtgrad {release}"
html_theme_options = {
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
# No left sidebar: every page is at the top level, so the theme's section
# navigation would be an empty column; the pages are in the top bar.
html_sidebars: dict[str, list[str]] = {"**": []}
html_static_path: list[str] = []
html_show_sourcelink = False
