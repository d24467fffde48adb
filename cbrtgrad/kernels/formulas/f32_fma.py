"""The float32 cube root in float32 arithmetic, fma and 32-bit integers only: for Metal GPUs.

Part of the one formula source, for targets without float64 (Apple GPUs, where
MLX runs ``mx.fast.metal_kernel``\\ s): :func:`cube_root_f32_fma` is written
once against a namespace of operations (``ops``, below) and turned into
kernel source by :mod:`cbrtgrad.kernels.handlers.metal_source`, which emits one
statement per operation. It is branch-free: every choice is a select, so
the source is straight-line code. Correctly rounded, the same bits as
:func:`cbrtgrad.kernels.formulas.f32`'s ``cube_root_f32`` (which computes in
float64): checked on all 2^32 inputs with the generated source compiled as
C++ on the CPU (tests/test_metal_source.py, slow), and on 10^6 random ones
in every run.

The algorithm, for ``|x|`` a finite nonzero float32:

1. Reduction, by integer operations: a subnormal's bits (an integer below
   2^23, converted exactly) times 2^-5 is ``|x| 2^144``, a normal float32, and
   its root comes out 2^48 too large. The exponent ``e`` of that normal value
   is split as ``e = 3k + j`` with ``0 <= j < 3``, and ``xr = 2^-3k |x|`` lies
   in [1, 8), its root in [1, 2): the root of ``x`` is ``2^k`` times it, an
   integer added to the exponent field at the end. No operation sees a
   subnormal or overflows (a GPU may flush subnormals).
2. ``r ~ xr^(-1/3)``: the bit trick with an integer third (the magic of
   ``formulas_f32``) and three Newton steps ``r - r (xr r^3 - 1) / 3``, the
   residual by one fma; ``y = xr r^2`` is then within about 2^-21.
3. One correction with an almost exact residual: ``y^2 = y2h + y2l`` and
   ``y2h y = y3h + y3l`` exactly (two fmas), ``xr - y3h`` is exact (Sterbenz:
   ``y3h`` is within a factor 2 of ``xr``), so ``R = ((xr - y3h) - y3l) -
   y2l y`` is ``xr - y^3`` within about 2^-45, and ``y + R r^2 / 3`` is the
   root within about 2^-40 (the quadratic term of Newton's step and the
   error of ``r^2 / 3``). ``t + err = y + R r^2/3`` exactly (TwoSum): ``t``
   rounds that sum to nearest, so it is the correctly rounded root unless
   the sum lies within ``TOLERANCE`` (2^-36, sixteen times the bound) of the
   midpoint ``m`` between ``t`` and its neighbour on ``err``'s side.
4. There, the exact sign of ``xr - m^3`` decides: with ``a`` the lower of the
   two neighbours and ``b`` half their gap (a power of two),
   ``m^3 = a^3 + 3a^2 b + 3a b^2 + b^3`` is eleven float32 terms, each exact
   (fma products of the exact ``a^2 = a2h + a2l``), and the sum of ``xr`` and
   their negations is taken by three passes of TwoSums (Ogita, Rump and
   Oishi's VecSum) and a last plain sum: accurate as in fourfold precision,
   an error below 2^-77 against a sum that is a nonzero multiple of 2^-72
   (``xr`` a multiple of 2^-23, ``m^3`` of 2^-72; no float32 cube root is a
   midpoint), so its sign is exact. The select takes this answer where step
   3 was unsure (about one input in 4,000) and ``t`` elsewhere.

Zeros, infinities and nans return ``x`` itself (a signaling nan quieted,
its payload kept), as ``formulas_f32`` does.

NOTE: no reassociation may happen (TwoSum and VecSum depend on each
rounding); contraction of a product into a sum is harmless: it makes an
intermediate more accurate, within the bounds above, and the exact test
uses only sums and explicit fmas. Metal compiles with fast math off by
default (docs/mlx.md).

``ops``: ``f32(v)``, ``u32(v)`` constants; ``add``, ``sub``, ``mul``,
``fma``, ``fabs`` (float32, each rounded once, fma exact); ``bits`` and
``flt`` (bit casts float32 <-> uint32), ``u2f`` (an unsigned integer below
2^31 to float32, exact below 2^24); ``band``, ``bor``, ``uadd``, ``usub``,
``shl``, ``shr``, ``udiv`` (uint32, wrapping), ``ilt``/``ige`` (int32
comparisons) and ``ult``, ``ule``, ``ueq`` (uint32), ``flt_lt``, ``fle``
(float32 comparisons), ``bnot``, ``bor_b`` (bools), ``select(c, a, b)``.
"""

from __future__ import annotations

from typing import Any

#: How near the midpoint (absolute, for a root in [1, 2)) the exact test takes over.
TOLERANCE = 2.0**-36
#: The float32 bit trick's magic (formulas_f32's ``_INV_CBRT_MAGIC32``).
MAGIC = 0x54A21E2E
NEWTON_STEPS = 3
VECSUM_PASSES = 3


def _two_sum(ops: Any, a: Any, b: Any) -> tuple[Any, Any]:
    # s + e == a + b exactly (Knuth's TwoSum: no condition on the magnitudes).
    s = ops.add(a, b)
    bb = ops.sub(s, a)
    e = ops.add(ops.sub(a, ops.sub(s, bb)), ops.sub(b, bb))
    return s, e


def _two_prod(ops: Any, a: Any, b: Any) -> tuple[Any, Any]:
    # p + e == a * b exactly (one fma).
    p = ops.mul(a, b)
    return p, ops.fma(a, b, ops.sub(ops.f32(0.0), p))


def _sign_of_sum(ops: Any, terms: list[Any]) -> Any:
    # Whether the exact sum of ``terms`` is positive (step 4 of the module's docstring).
    v = list(terms)
    for _ in range(VECSUM_PASSES):
        for i in range(1, len(v)):
            v[i], v[i - 1] = _two_sum(ops, v[i], v[i - 1])
    total = v[0]
    for value in v[1:]:
        total = ops.add(total, value)
    return ops.flt_lt(ops.f32(0.0), total)


def _reduce(ops: Any, iax: Any) -> tuple[Any, Any, Any, Any]:
    # Step 1: (xr in [1, 8), k, subnormal, special) for |x|'s bits.
    special = ops.bor_b(ops.ueq(iax, ops.u32(0)), ops.ule(ops.u32(0x7F800000), iax))
    subnormal = ops.ult(iax, ops.u32(0x00800000))
    scaled = ops.bits(ops.mul(ops.u2f(iax), ops.f32(2.0**-5)))
    normal = ops.select(special, ops.u32(0x3F800000), ops.select(subnormal, scaled, iax))
    # e + 129 = 3 q + j with q = (e + 129) // 3 >= 1, so k = q - 43 = floor(e / 3).
    biased = ops.uadd(ops.shr(normal, ops.u32(23)), ops.u32(2))  # e + 129, in [3, 256]
    q = ops.udiv(biased, ops.u32(3))
    three_k = ops.usub(ops.uadd(q, ops.uadd(q, q)), ops.u32(129))  # 3k, wrapping for k < 0
    xr = ops.flt(ops.usub(normal, ops.shl(three_k, ops.u32(23))))
    k = ops.usub(q, ops.u32(43))
    return xr, k, subnormal, special


def _exact_choice(ops: Any, xr: Any, lo: Any, hi: Any, half_gap: Any) -> Any:
    # Step 4: hi if xr > m^3 with m = lo + half_gap, else lo.
    a2h, a2l = _two_prod(ops, lo, lo)
    p1, p2 = _two_prod(ops, a2h, lo)
    p3, p4 = _two_prod(ops, a2l, lo)
    b3 = ops.mul(ops.f32(3.0), half_gap)
    q1, q2 = _two_prod(ops, a2h, b3)
    q3, q4 = _two_prod(ops, a2l, b3)
    bb3 = ops.mul(b3, half_gap)
    s1, s2 = _two_prod(ops, lo, bb3)
    cube = ops.mul(ops.mul(half_gap, half_gap), half_gap)
    zero = ops.f32(0.0)
    negated = [ops.sub(zero, v) for v in (p1, p2, p3, p4, q1, q2, q3, q4, s1, s2, cube)]
    return ops.select(_sign_of_sum(ops, [xr, *negated]), hi, lo)


def cube_root_f32_fma(ops: Any, x: Any) -> Any:
    """The correctly rounded cube root of the float32 ``x``, written against ``ops``.

    Parameters
    ----------
    ops : namespace
        The operations of the module's docstring (for example
        :class:`cbrtgrad.kernels.handlers.metal_source.SourceOps`, which records them
        as source text).
    x : value
        A float32 value of ``ops``.

    Returns
    -------
    value
        The float32 result, of ``ops``.

    Examples
    --------
    >>> from cbrtgrad.kernels.handlers.metal_source import SourceOps
    >>> ops = SourceOps()
    >>> result = cube_root_f32_fma(ops, ops.input("x"))
    >>> len(ops.lines) > 100, "double" in "\\n".join(ops.lines)
    (True, False)
    """
    ix = ops.bits(x)
    iax = ops.band(ix, ops.u32(0x7FFFFFFF))
    xr, k, subnormal, special = _reduce(ops, iax)
    # Step 2.
    rb = ops.bits(xr)
    r = ops.flt(ops.usub(ops.u32(MAGIC), ops.udiv(rb, ops.u32(3))))
    for _ in range(NEWTON_STEPS):
        residual = ops.fma(ops.mul(xr, r), ops.mul(r, r), ops.f32(-1.0))
        r = ops.fma(ops.mul(r, residual), ops.f32(-1.0 / 3.0), r)
    w = ops.mul(r, r)
    y = ops.mul(xr, w)
    # Step 3.
    y2h, y2l = _two_prod(ops, y, y)
    y3h, y3l = _two_prod(ops, y2h, y)
    big = ops.sub(ops.sub(ops.sub(xr, y3h), y3l), ops.mul(y2l, y))
    correction = ops.mul(big, ops.mul(w, ops.f32(1.0 / 3.0)))
    t, err = _two_sum(ops, y, correction)
    down = ops.flt_lt(err, ops.f32(0.0))
    tb = ops.bits(t)
    neighbour = ops.flt(ops.select(down, ops.usub(tb, ops.u32(1)), ops.uadd(tb, ops.u32(1))))
    half_gap = ops.mul(ops.fabs(ops.sub(neighbour, t)), ops.f32(0.5))
    near = ops.fle(ops.fabs(ops.sub(ops.fabs(err), half_gap)), ops.f32(TOLERANCE))
    lo = ops.select(down, neighbour, t)
    hi = ops.select(down, t, neighbour)
    root = ops.select(near, _exact_choice(ops, xr, lo, hi, half_gap), t)
    # The exponent back (2^k, and 2^-48 for a subnormal x), the sign, the specials.
    shift = ops.uadd(
        ops.shl(k, ops.u32(23)),
        ops.select(subnormal, ops.u32(-(48 << 23) & 0xFFFFFFFF), ops.u32(0)),
    )
    out = ops.bor(ops.uadd(ops.bits(root), shift), ops.band(ix, ops.u32(0x80000000)))
    quiet = ops.select(ops.ult(ops.u32(0x7F800000), iax), ops.u32(0x400000), ops.u32(0))
    return ops.flt(ops.select(special, ops.bor(ix, quiet), out))
