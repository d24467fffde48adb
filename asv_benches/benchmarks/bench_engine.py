"""asv benchmarks of the graph engine (time and peak memory)."""

import numpy as np

import cbrtgrad as cg

#: Depth of the chain and number of cycles: far past Python's recursion limit
#: (1000) and long enough for a leak of 100 bytes a cycle to show (2 MB), in
#: about a second each on a 2-core machine.
DEPTH = 20_000
CYCLES = 20_000


class EngineForwardBackward:
    """``cg.cbrt(x).sum().backward()`` against a bare ``np.cbrt`` forward."""

    params = ([1, 1_000, 1_000_000], ["cpu", "numpy"])
    param_names = ["n", "backend"]

    def setup(self, n, backend):
        self.a = np.random.default_rng(0).standard_normal(n).astype(np.float32)
        self.x = cg.Tensor(self.a, requires_grad=True)
        cg.cbrt(self.x, backend=backend).sum().backward()  # compile before timing

    def time_forward_backward(self, n, backend):
        self.x.grad = None
        cg.cbrt(self.x, backend=backend).sum().backward()

    def peakmem_forward_backward(self, n, backend):
        self.x.grad = None
        cg.cbrt(self.x, backend=backend).sum().backward()


class EngineAnchor:
    """The anchor of ``EngineForwardBackward``: a bare ``np.cbrt`` forward."""

    params = EngineForwardBackward.params[:1]
    param_names = ["n"]

    def setup(self, n):
        self.a = np.random.default_rng(0).standard_normal(n).astype(np.float32)

    def time_numpy_cbrt_anchor(self, n):
        np.cbrt(self.a)


class EngineDeepChain:
    """Backward through a chain ``DEPTH`` nodes deep (no recursion)."""

    timeout = 120

    def setup(self):
        self.x = cg.Tensor(np.ones(4), requires_grad=True)

    def _run(self):
        y = self.x
        for _ in range(DEPTH):
            y = y * 1.0
        self.x.grad = None
        cg.cbrt(y).sum().backward()

    def time_deep_chain(self):
        self._run()

    def peakmem_deep_chain(self):
        self._run()


class EngineCycles:
    """``CYCLES`` build-and-backward cycles: peak memory must stay flat."""

    timeout = 300

    def setup(self):
        self.x = cg.Tensor(np.linspace(1.0, 2.0, 16), requires_grad=True)

    def peakmem_cycles(self):
        for _ in range(CYCLES):
            self.x.grad = None
            (cg.cbrt(self.x) * 2.0 + self.x).sum().backward()

    def time_double_backward(self):
        cg.grad(cg.grad(lambda t: cg.cbrt(t).sum()))(np.float64(8.0))
