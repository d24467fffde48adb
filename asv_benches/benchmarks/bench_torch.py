"""asv benchmarks of the PyTorch bridge (``cbrtgrad.torch``) against PyTorch's own ops.

Skipped where PyTorch is not installed (``setup`` raises NotImplementedError).
The cases are ``python tools/measure.py torch``'s (tools/measuring/pytorch.py), with
PyTorch on numba's number of threads:

* forward plus backward of ``cbrt(x).sum()`` on 10^6 float32, through the
  bridge and through ``torch.sign(x) * x.abs().pow(1/3)``, and their ratio;
* one call on one element: ``cbrtgrad.torch.cbrt`` and ``torch.exp``, on a tensor
  that needs no gradient and on one that requires grad;
* the bridge's step under ``torch.compile`` (inductor, compiled in setup) and eager.

NOTE: 10^6 elements go to the parallel backend (the automatic choice), whose
loops each benchmark process loads or compiles itself (see ``__init__.py``).
"""

import importlib.util

import numpy as np

from cbrtgrad.cli.bench.timing import best_times

N = 1_000_000


def _torch():
    if importlib.util.find_spec("torch") is None:
        raise NotImplementedError("PyTorch is not installed (the torch extra)")
    import numba
    import torch

    import cbrtgrad.torch as ct

    torch.set_num_threads(numba.get_num_threads())
    return torch, ct


def _step(x, loss):
    def run():
        x.grad = None
        loss(x).backward()

    return run


class TorchForwardBackward:
    """``cbrt(x).sum().backward()`` on 10^6 float32: the bridge and PyTorch's expression."""

    timeout = 180

    def setup(self):
        torch, ct = _torch()
        a = np.random.default_rng(0).standard_normal(N).astype(np.float32)
        self.x = torch.from_numpy(a).requires_grad_(True)
        self.bridge = _step(self.x, lambda t: ct.cbrt(t).sum())
        self.expression = _step(self.x, lambda t: (torch.sign(t) * t.abs().pow(1 / 3)).sum())
        self.bridge()  # load the kernels before timing

    def time_bridge(self):
        self.bridge()

    def time_torch_expression(self):
        self.expression()

    def track_speedup_vs_torch_expression(self):
        ours, theirs = best_times([self.bridge, self.expression], 5)
        return theirs / ours

    track_speedup_vs_torch_expression.unit = "x"


class TorchOneElement:
    """One call on a one-element float32 tensor: ``cbrtgrad.torch.cbrt`` and ``torch.exp``.

    On a tensor that needs no gradient (the kernel's call alone) and on one
    that requires grad (through the ``autograd.Function``), each against
    ``torch.exp`` on the same tensor in the same run. With the bridge's C++
    entry, as after ``cbrtgrad warm``, where a compiler can build it (the
    first setup in a fresh cache builds it, some 20 s).
    """

    timeout = 120

    def setup(self):
        torch, ct = _torch()
        from cbrtgrad.torch import _native

        if _native.compiler() is not None:  # what `cbrtgrad warm` builds (then cached)
            _native.build()
        self.one = torch.ones(1)
        self.tracked = torch.ones(1, requires_grad=True)
        self.cbrt, self.exp = ct.cbrt, torch.exp
        self.cbrt(self.one)
        self.cbrt(self.tracked)

    def time_bridge_cbrt(self):
        self.cbrt(self.one)

    def time_torch_exp(self):
        self.exp(self.one)

    def time_bridge_cbrt_requires_grad(self):
        self.cbrt(self.tracked)

    def track_ratio_to_torch_exp(self):
        ours, theirs = best_times([lambda: self.cbrt(self.one), lambda: self.exp(self.one)], 5)
        return ours / theirs

    track_ratio_to_torch_exp.unit = "x"

    def track_requires_grad_ratio_to_torch_exp(self):
        t = self.tracked
        ours, theirs = best_times([lambda: self.cbrt(t), lambda: self.exp(t)], 5)
        return ours / theirs

    track_requires_grad_ratio_to_torch_exp.unit = "x"


class TorchCompile:
    """The bridge's forward plus backward under ``torch.compile`` (inductor) and eager."""

    timeout = 300

    def setup(self):
        torch, ct = _torch()
        a = np.random.default_rng(0).standard_normal(N).astype(np.float32)
        self.x = torch.from_numpy(a).requires_grad_(True)
        compiled = torch.compile(lambda t: ct.cbrt(t).sum(), fullgraph=True)
        self.compiled = _step(self.x, compiled)
        self.eager = _step(self.x, lambda t: ct.cbrt(t).sum())
        self.compiled()  # compile before timing
        self.eager()

    def time_compiled(self):
        self.compiled()

    def time_eager(self):
        self.eager()

    def track_compiled_over_eager(self):
        compiled, eager = best_times([self.compiled, self.eager], 5)
        return compiled / eager

    track_compiled_over_eager.unit = "x"
