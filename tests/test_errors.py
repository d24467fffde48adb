"""docs/errors.md: every documented exception, each pinned by a test that exists.

Also the few errors no other test module pins.
"""

from __future__ import annotations

import inspect
import pathlib
import re

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad import _config

ROOT = pathlib.Path(__file__).resolve().parents[1]
TABLE = ROOT / "docs" / "errors.md"
_TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")


def _rows():
    rows = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if line.startswith("| `") and "::" in line:
            cells = [c.strip() for c in line.strip("|").split("|")]
            rows.append(cells)
    return rows


def test_every_row_names_a_test_that_exists():
    rows = _rows()
    assert len(rows) >= 25
    for cells in rows:
        refs = _TEST_REF.findall(cells[-1])
        assert refs, f"row names no test: {cells}"
        for path, name in refs:
            source = (ROOT / path).read_text(encoding="utf-8")
            assert re.search(rf"^def {name}\(", source, re.M), f"{path}::{name} does not exist"


def _names(cell):
    return [n.strip().strip("`") for n in cell.split(",")]


def test_every_row_names_a_real_exception():
    import builtins

    known = {**vars(builtins), **vars(cg), **vars(cg.backends)}
    for cells in _rows():
        for name in _names(cells[0]):
            found = known.get(name)
            assert isinstance(found, type) and issubclass(found, Exception), name


def _raises_sections():
    """Exception names in the numpydoc ``Raises`` sections of the public functions."""
    names = set()
    for attr in cg.__all__:
        obj = getattr(cg, attr)
        for member in [obj, *(getattr(obj, m) for m in ("backward",) if hasattr(obj, m))]:
            doc = inspect.getdoc(member) or ""
            match = re.search(r"Raises\n-+\n(.*?)(\n\n[A-Z][A-Za-z ]+\n-+|\Z)", doc, re.S)
            if match:
                for line in match.group(1).splitlines():
                    if line and not line.startswith(" "):
                        names.update(n.strip() for n in line.split(","))
    return names


def test_every_documented_raise_is_in_the_table():
    listed = {n for cells in _rows() for n in _names(cells[0])}
    assert _raises_sections() <= listed, _raises_sections() - listed
    assert {"BackendUnavailableError", "GradcheckError", "FloatingPointError"} <= listed


# -- errors pinned here ----------------------------------------------------------
def test_backend_must_be_a_string():
    with pytest.raises(TypeError, match="backend must be a str, got int"):
        cg.cbrt(np.ones(2), backend=3)


def test_errstate_raise_turns_the_singularity_into_floating_point_error():
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        cg.cbrt_grad(np.ones(1), np.zeros(1), backend="numpy")
    with np.errstate(divide="raise"), pytest.raises(FloatingPointError):
        cg.cbrt_grad(np.ones(1), np.zeros(1), backend="cpu")


def test_bad_op_schema():
    with pytest.raises(ValueError, match="identifier"):
        cg.OpSchema(name="cube root")
    with pytest.raises(TypeError, match="AmpPolicy"):
        cg.OpSchema(name="op", amp_policy="fp32")
    with pytest.raises(ValueError, match="arity"):
        cg.OpSchema(name="op", arity=0)
    with pytest.raises(TypeError, match="saves must be a Saves"):
        cg.OpSchema(name="op", saves="output")


def test_bad_environment_integer(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", "many")
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_PARALLEL_MIN must be an integer"):
            _config.settings()
        monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", "-1")
        _config.settings.cache_clear()
        with pytest.raises(ValueError, match="must be >= 0"):
            _config.settings()
    finally:
        monkeypatch.delenv("CBRTGRAD_PARALLEL_MIN")
        _config.settings.cache_clear()


def test_fused_out_must_be_a_pair_of_the_right_shape():
    with pytest.raises(TypeError, match=r"out must be a tuple \(y, dx\)"):
        cg.cbrt_and_grad(np.ones(3), np.ones(3), out=np.empty(3))
    with pytest.raises(ValueError, match=r"out\[dx\] has shape \(2,\); expected \(3,\)"):
        cg.cbrt_and_grad(np.ones(3), np.ones(3), out=(np.empty(3), np.empty(2)))
    with pytest.raises(ValueError, match="x and g could not be broadcast"):
        cg.cbrt_and_grad(np.ones(3), np.ones(2))


@pytest.mark.parametrize("backend", ["cpu", None])
def test_an_out_numpy_refuses_is_worded_as_for_every_backend(backend):
    # The cpu backend's out= goes to numpy's ufunc machinery unchecked
    # (cbrtgrad.backends.host); what numpy refuses gets cbrtgrad's words.
    x, g = np.ones(3), np.full(3, 3.0)
    read_only = np.empty(3)
    read_only.flags.writeable = False
    refused = [
        (np.empty(4), ValueError, r"out has shape \(4,\); the operands broadcast to \(3,\)"),
        (np.empty(3, np.int64), TypeError, "cannot write a float64 result into out of dtype int64"),
        (read_only, ValueError, "out is read-only"),
    ]
    for out, error, message in refused:
        with pytest.raises(error, match=message):
            cg.cbrt(x, out=out, backend=backend)
        with pytest.raises(error, match=message):
            cg.cbrt_grad(g, x, out=out, backend=backend)
    # What numpy takes, as before: the operands broadcast up to out's shape,
    # a same-kind cast into float32, out=x in place.
    wide = np.empty((2, 3))
    assert cg.cbrt(np.full(3, 8.0), out=wide, backend=backend) is wide
    assert (wide == 2.0).all()
    narrow = np.empty(3, np.float32)
    assert cg.cbrt_grad(g, x, out=narrow, backend=backend) is narrow
    assert (narrow == 1.0).all()
    y = np.full(3, 27.0)
    assert cg.cbrt(y, out=y, backend=backend) is y and (y == 3.0).all()
