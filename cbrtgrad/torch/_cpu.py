"""The ops on CPU tensors: numpy views of the tensors, cbrtgrad's api, no copy.

A CPU tensor of any strides is a numpy array over the same memory
(``Tensor.numpy()``); the result is allocated by PyTorch (contiguous, as the
ops' fake implementations say) and written through the api's ``out=``, so
the bits are cbrtgrad's own. Half precision is rounded once, exactly, into a
half ``out=`` by the api (:mod:`cbrtgrad.arrays.half`): PyTorch's casts from
float64 to float16 round twice. numpy has no bfloat16: a bfloat16 tensor is
viewed as int16 and reinterpreted as ml_dtypes' bfloat16.

NOTE: hot path: a contiguous float32 or float64 tensor below the size from
which the api takes the parallel backend (:func:`_small`) is one call of the
cpu backend's ufunc (the one the api's own hot path calls) on its numpy
view, and PyTorch takes over the array numpy allocates for the result
(``torch.from_numpy``): the api's bits, in a third less time than a tensor
from ``torch.empty`` and ``out=`` on one element. Such a result's storage is
numpy's, so it cannot be resized (``resize_``, or an ``out=`` of another
shape), as the gradient of a sum here never could; it is otherwise an
ordinary contiguous tensor. The forward needs no ``np.errstate`` (its ufunc
raises no flag); the gradient's, through a function decorated with it (numpy
2's ``errstate`` decorator keeps its state per call, so threads and nested
calls are safe).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.autograd import forward_ad

from .. import api
from ..arrays import half as _half
from ..backends.host import KEPT, forward_of, gradient_of, selected_backend
from ..kernels import SERIAL_BLOCK
from ..kernels.cpu.denormals import IEEEDenormals
from . import _native
from ._arguments import NUMPY
from ._native import NATIVE  # the C++ entry for small calls where built, else None

#: The most elements each kernel of the entry takes, besides the api's small size
#: (``KEPT[1]``): above ``SERIAL_BLOCK`` the fused one is the api's one pass over memory.
_ENTRY_CAP = {"cube_root": SERIAL_BLOCK << 8, "cube_root_grad": SERIAL_BLOCK << 8}
_ENTRY_CAP["cube_root_and_grad"] = SERIAL_BLOCK + 1
_is_compiling = torch.compiler.is_compiling  # NOTE: dynamo folds it by its identity


def entry_result(kernel: str, first: Any, second: Any = None) -> Any:
    """What the C++ entry (:mod:`._native`) gives for ``kernel(first[, second])``, or None.

    None where the entry is not built here, or where it cannot see whether
    it may run: ``torch.compile``'s tracing, forward mode, ``use_backend``.
    It tests the rest itself and answers None for a call it declines, and
    NotImplemented for one whose dtype's loops it does not hold yet (they are
    compiled, or loaded from the kernel cache, then, once per dtype). NOTE: hot
    path: the public functions ask it first, the Functions' kernels too.
    """
    if _is_compiling():  # first: dynamo folds it, and traces none of the rest
        return None
    native = NATIVE[0]
    if (
        native is None
        or getattr(forward_ad, "_current_level", 0) >= 0
        or selected_backend() is not None
    ):
        return None
    function = getattr(native, kernel)
    limit = KEPT[1] if KEPT[1] < _ENTRY_CAP[kernel] else _ENTRY_CAP[kernel]
    result = function(first, limit) if second is None else function(first, second, limit)
    if result is NotImplemented:
        _native.set_loops(native, first.dtype)
        result = function(first, limit) if second is None else function(first, second, limit)
    return result


class _Quiet(IEEEDenormals):
    """Around the kernels' calls on the Python route: numpy's warnings off, subnormals kept.

    Where the gradient meets y = 0 it is ±inf or nan, as IEEE division gives
    it, and a signalling nan is quieted; PyTorch's own ops do not warn there,
    so numpy's floating-point warnings are off. And the calling thread's
    flush-to-zero mode (``torch.set_flush_denormal(True)``: FTZ and DAZ) is
    cleared inside (:class:`IEEEDenormals`), as the C++ entry's loops and the
    JAX bridge clear it, so that every route gives cbrtgrad's bits: under DAZ
    a subnormal ``g`` would read as 0, a subnormal gradient would be flushed,
    and ml_dtypes' bfloat16 subnormals would widen to 0. (The float32 and
    float64 cube roots never meet a subnormal in their arithmetic: their
    small route skips this.)
    """

    __slots__ = ("_errstate",)

    def __enter__(self) -> _Quiet:
        self._errstate = np.errstate(all="ignore")
        self._errstate.__enter__()
        super().__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        super().__exit__(*exc)
        self._errstate.__exit__(*exc)


@np.errstate(all="ignore")  # as _Quiet, with numpy's errstate as a decorator (0.7 against 0.9 µs)
def _quietly(ufunc: np.ufunc, *arrays: np.ndarray) -> Any:
    with IEEEDenormals():
        return ufunc(*arrays)


def _small(t: torch.Tensor) -> bool:
    """Whether the api would call the cpu backend's ufunc on ``t``'s float32/float64 view.

    NOTE: hot path (one-element calls): the api's own test (a size below
    the one from which the automatic choice takes the parallel backend,
    outside ``use_backend``), on a contiguous tensor, whose ufunc result
    numpy allocates C-contiguous (the ops' fake kernels say contiguous).
    PyTorch takes that result over (:func:`_tensor`): cheaper than a
    result allocated by PyTorch and a second numpy view (one call fewer on
    the one-element call), and the bits are the api's
    (the same ufunc).
    """
    return t.numel() < KEPT[1] and selected_backend() is None and t.is_contiguous()


def _view(t: torch.Tensor) -> np.ndarray:
    # Tensor.numpy() refuses a tensor that requires grad (in a Function's
    # forward); force=True detaches it (and, on a CPU float tensor, does no
    # more), in less time than detach() then numpy(). It also refuses a view
    # with the negative bit (``z.conj().imag``), whose memory holds the
    # values negated: force=True gives them resolved, as a copy.
    if t.requires_grad:
        return t.numpy(force=True)
    try:
        return t.numpy()
    except RuntimeError:
        if not t.is_neg():
            raise
        return t.numpy(force=True)


def _tensor(result: Any) -> torch.Tensor:
    # A ufunc's result over a 0-d input is a numpy scalar; PyTorch takes arrays.
    return torch.from_numpy(result if type(result) is np.ndarray else np.asarray(result))


def host_array(t: torch.Tensor) -> np.ndarray:
    """The numpy array over a CPU tensor's memory (its strides, no copy).

    Examples
    --------
    >>> t = torch.tensor([1.0, 2.0], dtype=torch.bfloat16)
    >>> a = host_array(t)
    >>> a.dtype.name, a.tolist()
    ('bfloat16', [1.0, 2.0])
    >>> a[0] = 4  # the tensor's own memory
    >>> t
    tensor([4., 2.], dtype=torch.bfloat16)
    """
    if t.requires_grad:  # Tensor.numpy() refuses it (a tensor that needs none is not detached)
        t = t.detach()
    if t.is_neg():  # a negative-bit view (``z.conj().imag``): its values, resolved (a copy)
        t = t.resolve_neg()
    if t.dtype is not torch.bfloat16:
        return t.numpy()
    bfloat16 = _half.bfloat16()
    if bfloat16 is None:
        raise TypeError(
            "cbrtgrad.torch: bfloat16 tensors need ml_dtypes (numpy has no bfloat16): "
            "python -m pip install 'cbrtgrad[torch]'"
        )
    return t.view(torch.int16).numpy().view(bfloat16)


def _empty(shape: torch.Size, dtype: torch.dtype) -> tuple[torch.Tensor, np.ndarray]:
    out = torch.empty(shape, dtype=dtype)
    return out, host_array(out)


def cube_root(x: torch.Tensor) -> torch.Tensor:
    """``cbrt(x)`` in ``x``'s dtype, correctly rounded.

    Examples
    --------
    >>> cube_root(torch.tensor([-8.0, 27.0], dtype=torch.float16))
    tensor([-2.,  3.], dtype=torch.float16)
    """
    y = entry_result("cube_root", x)
    if y is not None:
        return y  # type: ignore[no-any-return]
    forward = forward_of(NUMPY.get(x.dtype))
    if (  # NOTE: hot path: _small, written out (a call less)
        forward is not None
        and x.numel() < KEPT[1]
        and selected_backend() is None
        and x.is_contiguous()
    ):
        # No np.errstate: the forward ufunc raises no floating-point flag
        # (every float32 was tried, and float64's specials, subnormals,
        # signalling nans and every exponent: tests/test_torch_small_calls.py).
        y = forward(_view(x))
        return torch.from_numpy(y if type(y) is np.ndarray else np.asarray(y))
    out, target = _empty(x.shape, x.dtype)
    with _Quiet():
        api.cbrt(host_array(x), out=target)
    return out


def cube_root_grad(g: torch.Tensor, y: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    """``g / (3 y^2)`` of one dtype, broadcast to ``shape``, correctly rounded in it.

    Examples
    --------
    >>> g, y = torch.tensor([12.0, 0.0]), torch.tensor([2.0, 0.0])
    >>> cube_root_grad(g, y, torch.Size([2]))
    tensor([1., nan])
    """
    dx = entry_result("cube_root_grad", g, y)
    if dx is not None:
        return dx  # type: ignore[no-any-return]
    gradient = gradient_of(NUMPY.get(y.dtype))
    if gradient is not None and g.dtype is y.dtype and g.shape == y.shape and _small(y):
        if g.is_contiguous() or not any(g.stride()):  # numpy's result then C-contiguous
            return _tensor(_quietly(gradient, _view(g), _view(y)))
    if _broadcast_constant(g, y, shape):
        # The gradient of a sum: one value broadcast (stride 0). Without out=
        # the backends read it once (their constant-g kernel, twice as fast
        # at 10^6 elements) into a new C-contiguous array, which PyTorch takes
        # over without a copy.
        with _Quiet():
            return torch.from_numpy(api.cbrt_grad(host_array(g), host_array(y)))
    out, target = _empty(shape, y.dtype)
    with _Quiet():
        api.cbrt_grad(host_array(g), host_array(y), out=target)
    return out


def _broadcast_constant(g: torch.Tensor, y: torch.Tensor, shape: torch.Size) -> bool:
    return (
        y.dtype in (torch.float32, torch.float64)
        and g.dtype is y.dtype
        and g.shape == y.shape == shape
        and y.dim() > 0
        and y.is_contiguous()
        and not any(g.stride())
    )


def cube_root_and_grad(
    x: torch.Tensor, g: torch.Tensor, shape: torch.Size
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(cbrt(x), g / (3 y^2))`` of one dtype, both of the broadcast ``shape``.

    Half precision is the two ops in turn (the gradient from the rounded
    ``y``, the bits of ``cbrt_grad(g, cbrt(x))``); float32 and float64 the
    api's fused kernel, which gives those bits in one pass.

    Examples
    --------
    >>> cube_root_and_grad(torch.tensor([8.0]), torch.tensor([12.0]), torch.Size([1]))
    (tensor([2.]), tensor([1.]))
    """
    if x.dtype in (torch.float16, torch.bfloat16):
        y = cube_root(x.expand(shape))
        return y, cube_root_grad(g, y, shape)
    pair = entry_result("cube_root_and_grad", x, g)
    if pair is not None:
        return pair  # type: ignore[no-any-return]
    forward, gradient = forward_of(NUMPY[x.dtype]), gradient_of(NUMPY[x.dtype])
    if (
        forward is not None
        and gradient is not None
        and x.shape == g.shape
        and 0 < x.dim()
        and x.numel() <= SERIAL_BLOCK  # above it the api's fused kernel (one pass)
        and _small(x)
        and g.is_contiguous()
    ):
        ya = forward(_view(x))
        return torch.from_numpy(ya), torch.from_numpy(_quietly(gradient, _view(g), ya))
    y, y_target = _empty(shape, x.dtype)
    dx, dx_target = _empty(shape, x.dtype)
    with _Quiet():
        api.cbrt_and_grad(host_array(x), host_array(g), out=(y_target, dx_target))
    return y, dx
