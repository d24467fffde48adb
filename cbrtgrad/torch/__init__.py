"""The PyTorch bridge: cbrtgrad's correctly rounded cube root and gradient on tensors.

``cbrt``, ``cbrt_grad`` and ``cbrt_and_grad`` take and return
``torch.Tensor``; they are custom operators of the ``cbrtgrad`` namespace
(``torch.ops.cbrtgrad.cube_root``, ``cube_root_grad`` and
``cube_root_and_grad``), so they differentiate (twice and more), trace under
``torch.compile(fullgraph=True)`` and transform under ``torch.func``.
docs/pytorch.md describes the bridge; only this subpackage imports torch
(``import cbrtgrad`` never does).

Examples
--------
>>> import torch, cbrtgrad.torch as ct
>>> x = torch.tensor([-27.0, 8.0], requires_grad=True)
>>> y = ct.cbrt(x)
>>> y.sum().backward()
>>> y.detach(), x.grad
(tensor([-3.,  2.]), tensor([0.0370, 0.0833]))
"""

try:
    import torch as _torch  # noqa: F401  (the one place the bridge asks for torch)
except ImportError as exc:
    raise ImportError(
        "cbrtgrad.torch needs PyTorch, which is not installed: "
        "python -m pip install 'cbrtgrad[torch]'"
    ) from exc

from ._functions import cbrt, cbrt_and_grad, cbrt_grad

__all__ = ["cbrt", "cbrt_and_grad", "cbrt_grad"]
