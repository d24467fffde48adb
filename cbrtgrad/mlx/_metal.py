"""cbrtgrad's float32 cube root as an ``mx.fast.metal_kernel``, for Apple GPUs (not run here).

The kernel's source is generated from the float32-only formula
(:mod:`cbrtgrad.kernels.formulas.f32_fma`, float32 arithmetic, fma and
32-bit integers: Metal GPUs have no float64) by
:mod:`cbrtgrad.kernels.handlers.metal_source`, whose C++ form of the same statements
gives cbrtgrad's float32 bits on all 2^32 inputs on the CPU
(tests/test_metal_source.py). MLX compiles ``metal_kernel`` sources with its
``"safe"`` math mode by default (fast math off; docs/mlx.md). Forward only,
float32 only; NOTE: it has never run on Apple hardware.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import mlx.core as mx

from ..kernels.handlers.metal_source import metal_body
from ._operands import as_float

#: Threads per threadgroup.
THREADGROUP = 256


@lru_cache(maxsize=1)
def metal_kernel() -> Any:
    """The ``mx.fast.metal_kernel`` (input ``inp``, output ``out``), made once.

    Examples
    --------
    >>> metal_kernel() is metal_kernel()
    True
    """
    return mx.fast.metal_kernel(
        name="cbrtgrad_cube_root_f32",
        input_names=["inp"],
        output_names=["out"],
        source=metal_body(),
    )


def metal_cbrt(x: Any) -> Any:
    """The float32 cube root on MLX's GPU (Metal), correctly rounded: cbrtgrad's bits.

    Not differentiable (use :func:`cbrtgrad.mlx.cbrt`, which runs on the CPU
    device and has the gradient), and never run on Apple hardware: its
    arithmetic is checked on the CPU only (docs/mlx.md).

    Parameters
    ----------
    x : mx.array or array_like
        float32 (bool and integers become float32, as in :func:`cbrtgrad.mlx.cbrt`).

    Returns
    -------
    mx.array
        float32, on the GPU stream.

    Raises
    ------
    TypeError
        For any dtype but float32 once converted (float16, bfloat16, float64, complex).
    RuntimeError
        MLX's own, where there is no Metal GPU ("[metal_kernel] No Metal back-end.").

    Examples
    --------
    >>> import mlx.core as mx
    >>> try:
    ...     y = metal_cbrt(mx.array([-27.0, 8.0]))
    ... except RuntimeError as exc:  # no Metal GPU here
    ...     y = str(exc)
    >>> y if isinstance(y, str) else y.tolist()
    '[metal_kernel] No Metal back-end.'
    """
    x = as_float(x, function="metal_cbrt")
    if x.dtype != mx.float32:
        raise TypeError(
            f"cbrtgrad.mlx.metal_cbrt: x has dtype {x.dtype}; the Metal kernel is float32 only "
            "(cbrtgrad.mlx.cbrt takes every float dtype, on the CPU device)"
        )
    if x.size == 0:
        return x
    (out,) = metal_kernel()(
        inputs=[x],
        grid=(x.size, 1, 1),
        threadgroup=(min(THREADGROUP, x.size), 1, 1),
        output_shapes=[x.shape],
        output_dtypes=[mx.float32],
        stream=mx.gpu,
    )
    return out
