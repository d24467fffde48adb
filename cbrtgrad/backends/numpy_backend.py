"""The ``numpy`` backend: ``np.cbrt`` and the numpy gradient expression.

A reference and a fallback that needs nothing compiled; numpy's SVML cube
root is fast but not correctly rounded (up to 1.93 ulp in float32).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._layout import is_device_array
from ._protocol import Availability


class NumpyBackend:
    """``np.cbrt`` forward, ``g / (3 * y * y)`` backward."""

    name = "numpy"

    def availability(self) -> Availability:
        return Availability(True, "numpy is always available")

    def accepts(self, x: Any) -> bool:
        return not is_device_array(x)

    def cube_root(self, x: Any, out: Any = None, *, where: Any = True, dtype: Any = None) -> Any:
        return np.cbrt(x, out=out, where=where, dtype=dtype)

    def cube_root_grad(self, g: Any, y: Any, out: Any = None, *, where: Any = True) -> Any:
        denominator = np.multiply(y, y)
        np.multiply(denominator, 3, out=denominator)
        return np.divide(g, denominator, out=out, where=where)

    def cube_root_and_grad(self, x: Any, g: Any, out: Any = None) -> tuple[Any, Any]:
        y_out, dx_out = (None, None) if out is None else out
        y = np.cbrt(x, out=y_out)
        return y, self.cube_root_grad(g, y, out=dx_out)
