"""The ``numpy`` backend: ``np.cbrt`` and the numpy gradient expression.

A reference and a fallback that needs nothing compiled; numpy's SVML cube
root is fast but not correctly rounded (up to 1.93 ulp in float32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..arrays import dtypes as _dtypes
from ..arrays.kinds import is_device_array
from ..arrays.ufunc_args import check_out
from ._layout import fused_by_parts, masked
from ._protocol import Availability


class NumpyBackend:
    """``np.cbrt`` forward, ``g / (3 * y * y)`` backward."""

    name = "numpy"

    def availability(self) -> Availability:
        return Availability(True, "numpy is always available")

    def accepts(self, x: Any) -> bool:
        return not is_device_array(x)

    def cube_root(self, x: Any, out: Any = None, *, where: Any = True, dtype: Any = None) -> Any:
        # The one dtype rule for a direct call too (float16 in float32), not np.cbrt's.
        compute = _dtypes.compute_dtype_of(x) if dtype is None else dtype
        out = check_out(out, (x,), compute, where)  # a direct call's, with cbrtgrad's words
        return np.cbrt(x, out=out, where=where, dtype=compute)

    def cube_root_grad(
        self, g: Any, y: Any, out: Any = None, *, where: Any = True, dtype: Any = None
    ) -> Any:
        if dtype is None:
            dtype = _dtypes.compute_dtype_of(g, y, argument="g, y")
        out = check_out(out, (g, y), dtype, where)
        if where is not True:
            # Only where selects, as one ufunc with where= would (no flags
            # from the other elements' y * y).
            return masked(
                lambda gs, ys: self.cube_root_grad(gs, ys, dtype=dtype), (g, y), where, out
            )
        denominator = np.multiply(y, y, dtype=dtype)
        # In place saves an allocation; a 0-d y gives a numpy scalar, which cannot be out=.
        denominator = np.multiply(
            denominator, 3, out=denominator if isinstance(denominator, np.ndarray) else None
        )
        return np.divide(g, denominator, out=out, where=where, dtype=dtype)

    def cube_root_and_grad(
        self, x: Any, g: Any, out: Any = None, *, dtype: Any = None
    ) -> tuple[Any, Any]:
        return fused_by_parts(self, x, g, out, dtype)
