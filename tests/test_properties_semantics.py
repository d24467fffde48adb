"""A bounded property run: every public function, every host backend, against numpy's semantics.

For ``out=`` that overlaps the inputs (any view of one buffer), ``where=``,
ndarray subclasses and ``np.errstate``, each drawn case is run as drawn and
compared with the same backend on fresh copies, written out as a numpy ufunc
would (only where ``where`` selects; ``y`` before ``dx``): the whole buffer
bit for bit (within numpy's bound on the ``numpy`` backend, whose bits depend on the
layout: tests/_agreement.py), the result's type, and the same exception or warnings. The IEEE
conditions of masked-out elements must not be signalled. Bounded to
``EXAMPLES`` cases per test (issue 24); dask and the engine have their own
tests of these classes (tests/test_aliasing.py, tests/test_fp_state.py,
tests/engine/test_protocols.py).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cbrtgrad as cg

from ._agreement import agree

HOST = ("cpu", "numpy", "parallel")
EXAMPLES = 25
N = 6


class Sub(np.ndarray):
    """A subclass without a ufunc override."""


VALUES = st.sampled_from([0.0, -0.0, 1.0, -8.0, 27.0, 1e-300, 1e300, np.inf, -np.inf, np.nan, 0.5])


@st.composite
def cases(draw, arity):
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    with np.errstate(over="ignore"):
        buffer = np.array(draw(st.lists(VALUES, min_size=4 * N, max_size=4 * N)), dtype)

    def view():
        start = draw(st.integers(0, 2 * N))
        step = draw(st.sampled_from([1, 1, 2, -1]))
        if step > 0:
            return (start, start + step * N, step)
        return (start + N - 1, None if start == 0 else start - 1, -1)

    inputs = [view() for _ in range(arity)]
    outs = [draw(st.one_of(st.none(), st.just(0))) for _ in range(1)]
    out_views = [view(), view()] if outs[0] is not None else None
    where = draw(st.one_of(st.just(True), st.lists(st.booleans(), min_size=N, max_size=N)))
    subclass = draw(st.booleans())
    mode = draw(st.sampled_from(["ignore", "warn", "raise"]))
    return buffer, inputs, out_views, where, subclass, mode


def _slice(buffer, spec):
    return buffer[slice(*spec)]


def _run(call, mode):
    """(result or the exception type, the sorted RuntimeWarning messages)."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all=mode, under="ignore"):
        warnings.simplefilter("always")
        try:
            result = call()
        except FloatingPointError as exc:
            result = exc.args[0]
    messages = sorted({str(w.message) for w in caught if w.category is RuntimeWarning})
    return result, messages


def _bits(a):
    return np.ascontiguousarray(a).view(np.uint8)


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("name", ["cbrt", "cbrt_grad"])
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_single_output_functions_as_numpy_ufuncs(backend, name, data):
    func = getattr(cg, name)
    arity = 1 if name == "cbrt" else 2
    buffer, inputs, out_views, where, subclass, mode = data.draw(cases(arity))
    mask = where if where is True else np.array(where)
    drawn = buffer.copy()
    args = [_slice(drawn, s) for s in inputs]
    if subclass:
        args = [a.view(Sub) for a in args]
    out = None if out_views is None else _slice(drawn, out_views[0])
    got, got_warnings = _run(lambda: func(*args, out=out, where=mask, backend=backend), mode)

    expected_buffer = buffer.copy()
    fresh = [_slice(buffer, s).copy() for s in inputs]
    if mask is True:
        selected = fresh
    else:
        selected = [a[mask] for a in fresh]
    reference, ref_warnings = _run(lambda: func(*selected, backend=backend), mode)
    if isinstance(reference, str):  # a FloatingPointError: the same one, and no result
        assert got == reference
        return
    assert got_warnings == ref_warnings
    if out is not None:
        target = _slice(expected_buffer, out_views[0])
        if mask is True:
            target[...] = reference
        else:
            target[mask] = reference
        assert agree(drawn, expected_buffer, backend)
        assert got is out
    else:
        assert np.array_equal(_bits(drawn), _bits(expected_buffer))  # inputs untouched
        values = np.asarray(got)
        compared = values if mask is True else values[mask]
        assert agree(compared, np.asarray(reference), backend)
        assert type(got) is (Sub if subclass else np.ndarray)


@pytest.mark.parametrize("backend", HOST)
@settings(max_examples=EXAMPLES)
@given(data=st.data())
def test_cbrt_and_grad_as_a_two_output_ufunc(backend, data):
    buffer, inputs, out_views, _, subclass, mode = data.draw(cases(2))
    drawn = buffer.copy()
    x, g = (_slice(drawn, s) for s in inputs)
    if subclass:
        x, g = x.view(Sub), g.view(Sub)
    out = None if out_views is None else tuple(_slice(drawn, s) for s in out_views)
    got, got_warnings = _run(lambda: cg.cbrt_and_grad(x, g, out=out, backend=backend), mode)
    fresh = [_slice(buffer, s).copy() for s in inputs]
    reference, ref_warnings = _run(lambda: cg.cbrt_and_grad(*fresh, backend=backend), mode)
    if isinstance(reference, str):
        assert got == reference
        return
    assert got_warnings == ref_warnings
    expected = buffer.copy()
    if out is not None:
        _slice(expected, out_views[0])[...] = reference[0]
        _slice(expected, out_views[1])[...] = reference[1]
        assert got[0] is out[0] and got[1] is out[1]
    else:
        for r, e in zip(got, reference, strict=True):
            assert agree(np.asarray(r), e, backend)
            assert type(r) is (Sub if subclass else np.ndarray)
    assert agree(drawn, expected, backend)
