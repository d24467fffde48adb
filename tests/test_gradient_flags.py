"""The gradient's IEEE flags: the rule of docs/accuracy.md ("IEEE flags"), numpy's where it can be.

The reference is numpy's ``g / (3*y*y)`` in the same dtype, as
``np.divide(g, np.multiply(np.multiply(y, y), 3))``, and the flags are what
``np.errstate`` observes. Where cbrtgrad computes ``3 y^2`` exactly (float32
always, in float64; float64 for ``2^-400 <= |y| < 2^400``, where every cube
root lies) its flags are those of the one correctly rounded division
``g / (3 y^2)``, worked out here in exact rational arithmetic: numpy's own
differ from those only through its rounding of ``3*y*y`` (a product that
under- or overflows, or a rounded divisor that moves the quotient across a
threshold or onto a float: :func:`_explained`). For the other float64 ``y``
(no cube root is there) cbrtgrad computes numpy's divisor and then
``g * (1 / d)``, and raises that evaluation's flags.

Before, the float64 loops raised the flags of the operations they compute on
the way (issue 38): ``1 / 0`` raised divide by zero for every ``g``, the
correction and the rounding test underflowed for normal results near 2^-1022,
an exact subnormal result underflowed, and the vector loop raised invalid for
an infinite ``g``. Checked for tables of classes (zeros, infinities, nans,
subnormal, tiny and huge operands, results at the thresholds) and random
pairs, at the start and the end of arrays that span the vector loop and its
scalar tail, on both CPU backends and for the fused kernel; and the flags'
audit itself (kernels/cpu/grad_flags.py) across its blocks, in place, for a
broadcast ``g`` and for a ufunc inner loop called once per row.
"""

from __future__ import annotations

import platform
import warnings
from fractions import Fraction

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad.kernels.cpu import fpstatus
from cbrtgrad.kernels.cpu.grad_flags import AUDIT_BLOCK

pytestmark = pytest.mark.skipif(not fpstatus.AVAILABLE, reason="the IEEE flags cannot be read")

BACKENDS = ("cpu", "parallel")
DTYPES = (np.float32, np.float64)
SIZES = (1, 3, 4, 8, 37)
KINDS = {
    "divide by zero": "divide",
    "overflow": "overflow",
    "underflow": "underflow",
    "invalid value": "invalid",
}
_BITS = {np.dtype(np.float32): np.uint32, np.dtype(np.float64): np.uint64}
# The refined range of |y| of the float64 kernel (formulas_f64.py).
_REFINED = (2.0**-400, 2.0**400)
_ON_X86 = platform.machine().lower() in {"x86_64", "amd64", "i686", "x86"}


def _kinds(call) -> frozenset[str]:
    """The conditions a call signals under np.errstate(all="warn"), by kind."""
    with warnings.catch_warnings(record=True) as caught, np.errstate(all="warn"):
        warnings.simplefilter("always")
        call()
    found = set()
    for w in caught:
        assert w.category is RuntimeWarning, w
        found.add(KINDS[str(w.message).split(" encountered")[0]])
    return frozenset(found)


def _numpy(g, y) -> np.ndarray:
    return np.divide(g, np.multiply(np.multiply(y, y), 3))


def _signaling(dtype) -> np.generic:
    bits = 0x7FA00000 if np.dtype(dtype) == np.float32 else 0x7FF4000000000000
    return np.array([bits], _BITS[np.dtype(dtype)]).view(dtype)[0]


def _is_signaling(v: np.generic) -> bool:
    bits = int(np.array([v]).view(_BITS[v.dtype])[0])
    quiet = 1 << (22 if v.dtype == np.float32 else 51)
    return bool(np.isnan(v)) and not bits & quiet


def _one(v: np.generic) -> np.ndarray:
    return np.array([v], v.dtype)


def _exact_flags(g: np.generic, divisor: Fraction) -> frozenset[str]:
    """The flags of one correctly rounded ``g / divisor`` in g's dtype (finite nonzero g).

    x86 detects tininess after rounding: the quotient is tiny when, rounded
    to the format's precision with an unbounded exponent, it is below the
    least normal, i.e. below the midpoint of that and its predecessor (the
    tie goes to the least normal, whose significand is even). The float64
    gradient follows x86 on every CPU; the float32 one, and numpy, follow
    the CPU (arm64 detects tininess before rounding).
    """
    info = np.finfo(g.dtype)
    p, emin, emax = info.nmant + 1, info.minexp, info.maxexp - 1
    q = abs(Fraction(float(g)) / divisor)
    if q >= (2 - Fraction(1, 2**p)) * Fraction(2) ** emax:
        return frozenset({"overflow"})
    after = _ON_X86 or g.dtype == np.float64
    tiny = q < Fraction(2) ** emin * ((1 - Fraction(1, 2 ** (p + 1))) if after else 1)
    inexact = (q * Fraction(2) ** (p - 1 - emin)).denominator != 1
    return frozenset({"underflow"}) if tiny and inexact else frozenset()


def _refined(y: np.generic) -> bool:
    return y.dtype == np.float32 or _REFINED[0] <= abs(float(y)) < _REFINED[1]


def rule(g: np.generic, y: np.generic) -> frozenset[str]:
    """The flags docs/accuracy.md gives cbrtgrad's gradient of one element."""
    if y == 0 or not np.isfinite(y):
        return _kinds(lambda: _numpy(_one(g), _one(y)))  # d = 0 or inf: exact, numpy's g / d
    if not _refined(y):

        def formula() -> None:
            d = np.multiply(np.multiply(_one(y), _one(y)), 3)
            if d[0] == 0:
                np.divide(_one(g), d)
            else:
                np.multiply(_one(g), np.divide(1, d))

        return _kinds(formula)
    if np.isnan(g):
        return frozenset({"invalid"}) if _is_signaling(g) else frozenset()
    if g == 0 or np.isinf(g):
        return frozenset()
    return _exact_flags(g, 3 * Fraction(float(y)) ** 2)


def _explained(g: np.generic, y: np.generic) -> bool:
    """Whether numpy's flags may differ from the rule's for this element, and why.

    Either numpy's divisor ``3*(y*y)`` raised a flag of its own, or rounding
    it changed the flags of the one division (the exact flags of ``g`` over
    numpy's rounded divisor are not those over ``3 y^2``), or cbrtgrad
    computes ``g * (1 / d)`` there (float64 ``y`` outside the refined range).
    """
    if not _refined(y):
        return True
    if _kinds(lambda: np.multiply(np.multiply(_one(y), _one(y)), 3)):
        return True
    if np.isnan(g) or g == 0 or np.isinf(g):
        return False
    d = np.multiply(np.multiply(y, y), y.dtype.type(3))
    return _exact_flags(g, Fraction(float(d))) != _exact_flags(g, 3 * Fraction(float(y)) ** 2)


def _values(dtype) -> tuple[list[np.generic], list[np.generic]]:
    """(g, y) classes: zeros, infinities, nans, subnormal, tiny, huge and ordinary values."""
    t = np.dtype(dtype).type
    info = np.finfo(dtype)
    sub, tiny, big = info.smallest_subnormal, info.tiny, info.max
    common = [0.0, -0.0, 1.0, -2.5, np.inf, -np.inf, np.nan, -np.nan, sub, -sub * 5, tiny, big]
    if dtype == np.float32:
        g_extra = [1e-30, -3e-38, 1e30, 6e37]
        # 1e-20 and 1e25: numpy's y*y under- and overflows in float32.
        y_extra = [1e-20, 1e25, 0.5, 1.75e-13, 3.1e12, np.float32(1 / np.sqrt(3))]
    else:
        g_extra = [1e-300, -3e-308, 1e300, 1.6e308, 2.0**-969, 3 * 2.0**-1000]
        # 1e-160 and 2**511: no cube root; 1e-160's 3*y*y is subnormal and its
        # reciprocal overflows, 2**511's reciprocal is subnormal.
        y_extra = [0.5, 2.0**-358, 2.0**341, 2.0**-400, 2.0**400, 1e-160, 2.0**511, 1e-200]
        y_extra.append(1 / np.sqrt(3))
    gs = [t(v) for v in common + g_extra] + [_signaling(dtype)]
    ys = [t(v) for v in common + y_extra] + [_signaling(dtype)]
    return gs, ys


def _threshold_pairs(dtype) -> list[tuple[np.generic, np.generic]]:
    """Quotients at, just inside and just outside the underflow and overflow thresholds."""
    t = np.dtype(dtype).type
    info = np.finfo(dtype)
    p, emin = info.nmant + 1, info.minexp
    tiny, sub = t(info.tiny), t(info.smallest_subnormal)
    one, half = t(1), t(0.5)
    three_tiny = tiny * t(3)  # 3y^2 = 3 for y = 1: exact quotients
    pairs = [
        (three_tiny, one),  # 2^emin exactly: normal
        (np.nextafter(three_tiny, t(0)), one),  # just below 2^emin: tiny, inexact
        (np.nextafter(three_tiny, t(1)), one),
        (t(3) * (tiny - sub), one),  # the largest subnormal, exactly: no underflow
        (t(3) * sub, one),  # the least subnormal, exactly: no underflow
        (t(3) * sub * t(7), -one),
        (sub, one),  # a third of it: rounds to 0
        (t(2) * sub, one),  # two thirds: rounds to the least subnormal
        (sub, half),
        (-tiny, t(2)),
        (tiny * t(0.75), half),  # 2^emin exactly, 3 y^2 = 3/4
    ]
    # 4g/3 (y = 1/2) below the overflow threshold (2 - 2^-p) 2^emax, a float
    # (2^(emax+1) (1 - 2^-k)), at 2^(emax+1) (overflow), and about the
    # largest float.
    for k in (1, 10, p - 3):
        pairs.append((t(3 * 2.0 ** (info.maxexp - 2 - k)) * t(2.0**k - 1), half))
    pairs.append((t(3 * 2.0 ** (info.maxexp - 2)), half))
    big = t(info.max)
    pairs += [(big * t(0.75), half), (np.nextafter(big * t(0.75), t(0)), half), (big, t(2))]
    # numpy's quotient a subnormal exactly, the exact one not a float.
    eleven = t(1.1)
    pairs.append((np.multiply(np.multiply(eleven, eleven), t(3)) * t(2.0 ** (emin - 1)), eleven))
    # Just below 2^emin but not tiny after rounding (x86), inexact: no flag
    # (3 y^2 has more bits than the format: the quotient of its rounding).
    if dtype == np.float64:
        pairs.append((t(6.675221575533746e-308), t(1.0000000000009095)))
    else:
        pairs.append((t(3.5264898e-38), t(1.000001)))
    # Exact subnormal quotients over 3 y^2 = 12 and 3 y^2 = 3 2^40.
    pairs.append((t(12) * sub * t(5), t(2)))
    pairs.append((t(3 * 2.0 ** (emin - p + 41)), t(2.0**20)))
    return pairs


def _random_pairs(dtype, n: int, seed: int) -> list[tuple[np.generic, np.generic]]:
    """y a cube root (as cbrtgrad gives them), g such that the quotients span both thresholds."""
    rng = np.random.default_rng(seed)
    info = np.finfo(dtype)
    lo, hi = info.minexp - info.nmant, info.maxexp
    x = (2.0 ** rng.uniform(lo, hi, n) * rng.choice([-1, 1], n)).astype(dtype)
    y = cg.cbrt(x[np.isfinite(x) & (x != 0)])
    # 3 y^2 g^-1 in the range of the quotient: results from far below the
    # least subnormal to beyond the largest float.
    log_y = np.log2(np.abs(y.astype(np.float64)))
    log_g = rng.uniform(lo - 4, hi + 4, y.size) + 2 * log_y + np.log2(3)
    log_g = np.clip(log_g, lo, hi - 1)
    g = (2.0**log_g * rng.choice([-1, 1], y.size)).astype(dtype)
    return list(zip(g, y, strict=True))


def _arrays(g, y, size: int, at: int) -> tuple[np.ndarray, np.ndarray]:
    """Arrays of ``size`` ordinary pairs (no flag: 1 / 12) with (g, y) at ``at``."""
    ga = np.full(size, 1.0, g.dtype)
    ya = np.full(size, 2.0, y.dtype)
    ga[at] = g
    ya[at] = y
    return ga, ya


def _check(g, y, expected: frozenset[str], backend: str, size: int) -> None:
    """cbrtgrad's flags for (g, y) at the start and the end of arrays of ``size``."""
    for at in sorted({0, size - 1}):
        ga, ya = _arrays(g, y, size, at)
        got = _kinds(lambda a=ga, b=ya: cg.cbrt_grad(a, b, backend=backend))
        assert got == expected, (g, y, size, at, backend)
        with np.errstate(all="raise"):
            if expected:
                with pytest.raises(FloatingPointError):
                    cg.cbrt_grad(ga, ya, backend=backend)
            else:
                cg.cbrt_grad(ga, ya, backend=backend)


def _table(dtype) -> list[tuple[np.generic, np.generic]]:
    gs, ys = _values(dtype)
    return [(g, y) for g in gs for y in ys] + _threshold_pairs(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_the_rule_is_numpys_but_for_its_rounding_of_3yy(dtype):
    # The reference itself: wherever the rule and numpy's expression differ,
    # numpy's divisor 3*y*y is why (or cbrtgrad's g * (1/d) outside the
    # refined float64 range); and both kinds of difference do occur.
    differ = []
    for g, y in _table(dtype) + _random_pairs(dtype, 300, seed=5):
        mine = rule(g, y)
        numpys = _kinds(lambda g=g, y=y: _numpy(_one(g), _one(y)))
        if mine != numpys:
            assert _explained(g, y), (g, y, mine, numpys)
            differ.append((g, y, mine, numpys))
    # numpy's y*y underflows, so 1 / (3*y*y) divides by zero, where the
    # quotient overflows (float32); cbrtgrad's g * (1 / d) outside the cube
    # roots' range (float64).
    t = np.dtype(dtype).type
    if dtype == np.float32:
        small_y = t(1e-25)
        assert rule(t(1), small_y) == {"overflow"}
        assert _kinds(lambda: _numpy(_one(t(1)), _one(small_y))) == {"underflow", "divide"}
    else:
        # 1e-160: no cube root; 3*y*y is subnormal and cbrtgrad's 1 / (3*y*y)
        # overflows, where numpy's 1e-300 / (3*y*y) is 3.3e19.
        assert rule(t(1e-300), t(1e-160)) == {"underflow", "overflow"}
        assert _kinds(lambda: _numpy(_one(t(1e-300)), _one(t(1e-160)))) == {"underflow"}
    # g = numpy's 3*y*y times 2^(emin - 1): numpy's quotient is that
    # subnormal exactly (no flag), the exact one is not a float (underflow).
    y = t(1.1)
    g = np.multiply(np.multiply(y, y), t(3)) * t(2.0 ** (np.finfo(dtype).minexp - 1))
    assert rule(g, y) == {"underflow"}
    assert not _kinds(lambda: _numpy(_one(g), _one(y)))
    assert (g, y, frozenset({"underflow"}), frozenset()) in differ
    assert differ


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_flags_of_every_class(dtype, backend, size):
    for g, y in _table(dtype):
        _check(g, y, rule(g, y), backend, size)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_flags_of_random_pairs(dtype, backend):
    for g, y in _random_pairs(dtype, 150, seed=7):
        _check(g, y, rule(g, y), backend, 8)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_no_flag_inside_the_correctly_rounded_range(dtype, backend):
    # Issue 38: 1e-300 / 3 raised underflow, and so did about 2 % of random
    # pairs whose result is normal (the correction and the rounding test
    # underflow below about 2^-860).
    rng = np.random.default_rng(3)
    n = 3 * AUDIT_BLOCK + 11
    info = np.finfo(dtype)
    span = 300 if dtype == np.float64 else 40
    y = cg.cbrt((2.0 ** rng.uniform(-span, span, n)).astype(dtype)).astype(np.float64)
    # Quotients log-uniform over the normal range (float64: from 2^-968).
    low = -968 if dtype == np.float64 else info.minexp
    log_g = rng.uniform(low, info.maxexp - 1, n) + np.log2(3 * y**2)
    keep = (log_g > info.minexp) & (log_g < info.maxexp - 1)
    g = (2.0 ** log_g[keep]).astype(dtype)
    y = y[keep].astype(dtype)
    with np.errstate(all="raise"):
        cg.cbrt_grad(g, y, backend=backend)
        cg.cbrt_grad(np.array([1e-300], dtype), np.ones(1, dtype), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_fused_kernel(dtype, backend):
    # cbrt_and_grad: the forward raises nothing but for a signaling nan, so
    # its flags are the gradient's of (g, cbrt(x)).
    t = np.dtype(dtype).type
    info = np.finfo(dtype)
    xs = [0.0, -0.0, 1.0, -8.0, np.inf, -np.inf, np.nan, info.tiny, info.smallest_subnormal]
    xs = [t(v) for v in xs + [info.max, 1e-30]]
    gs, _ = _values(dtype)
    for x in xs:
        y = cg.cbrt(_one(x))[0]
        for g in gs:
            expected = rule(g, y)
            for size in (1, 8, 37):
                xa, ga = _arrays(x, g, size, size - 1)  # the others: x = 1, g = 2
                got = _kinds(lambda a=xa, b=ga: cg.cbrt_and_grad(a, b, backend=backend))
                assert got == expected, (x, g, size, backend)


def test_the_issue_examples():
    with np.errstate(divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        dx = cg.cbrt_grad(np.ones(8), np.zeros(8))
        assert np.all(dx == np.inf)
        x = cg.Tensor(np.zeros(8), requires_grad=True)  # the engine's backward at 0
        cg.cbrt(x).sum().backward()
        assert np.all(x.grad == np.inf)
    assert _kinds(lambda: cg.cbrt_grad(np.zeros(8), np.zeros(8))) == {"invalid"}
    assert not _kinds(lambda: cg.cbrt_grad(np.full(8, np.inf), np.zeros(8)))
    with np.errstate(all="raise"):
        assert cg.cbrt_grad(np.array([1e-300]), np.array([1.0]))[0] == 1e-300 / 3


def _underflow_layouts(dtype):
    """g, y of 3 audit blocks and a bit, their quotients normal but for ``legit``."""
    t = np.dtype(dtype).type
    n = 3 * AUDIT_BLOCK + 5
    # Normal results that the float64 loop's correction underflows for, and
    # one truly tiny one (the least subnormal over 3: rounds to 0).
    spurious = t(1e-300) if dtype == np.float64 else t(1e-37)
    g = np.full(n, spurious, dtype)
    y = np.ones(n, dtype)
    return g, y, t(np.finfo(dtype).smallest_subnormal)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_the_audit_keeps_what_an_earlier_block_raised(dtype, backend):
    # The flags are audited per block of AUDIT_BLOCK elements: one raised by
    # an earlier block stays, one spurious in a later block goes.
    g, y, tiny = _underflow_layouts(dtype)
    assert not _kinds(lambda: cg.cbrt_grad(g, y, backend=backend))
    for at in (0, AUDIT_BLOCK - 1, AUDIT_BLOCK, 2 * AUDIT_BLOCK + 7, g.size - 1):
        gl = g.copy()
        gl[at] = tiny
        assert _kinds(lambda a=gl: cg.cbrt_grad(a, y, backend=backend)) == {"underflow"}, at
    # In place (the inputs are kept for the audit), and with a broadcast g.
    for out in ("g", "y"):
        gl, yl = g.copy(), y.copy()
        gl[AUDIT_BLOCK + 3] = tiny
        target = gl if out == "g" else yl
        got = _kinds(lambda a=gl, b=yl, o=target: cg.cbrt_grad(a, b, out=o, backend=backend))
        assert got == {"underflow"}, out
        gl, yl = g.copy(), y.copy()
        target = gl if out == "g" else yl
        assert not _kinds(lambda a=gl, b=yl, o=target: cg.cbrt_grad(a, b, out=o, backend=backend))
    assert not _kinds(lambda: cg.cbrt_grad(g[:1], y, backend=backend))
    assert _kinds(lambda: cg.cbrt_grad(np.array([tiny]), y, backend=backend)) == {"underflow"}


def test_the_audit_keeps_what_an_earlier_inner_loop_call_raised():
    # Rows of a 2-D array that numpy cannot flatten: one inner-loop call per
    # row between numpy's clear and its check of the flags.
    g, _, tiny = _underflow_layouts(np.float64)
    n = g.size
    base_g = np.full((3, 2 * n), g[0])
    rows_y = np.ones((3, 2 * n))[:, :n]
    assert not _kinds(lambda: cg.cbrt_grad(base_g[:, :n], rows_y, backend="cpu"))
    for row in (0, 2):
        legit = base_g.copy()
        legit[row, 5] = tiny
        assert _kinds(lambda a=legit: cg.cbrt_grad(a[:, :n], rows_y, backend="cpu")) == {
            "underflow"
        }
    # Strided operands go through the gather buffers of the same loop.
    assert not _kinds(lambda: cg.cbrt_grad(base_g[:, ::2], rows_y, backend="cpu"))
