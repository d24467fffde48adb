"""asv benchmarks of the JAX bridge (cbrtgrad.jax) against jnp.cbrt, both jitted.

Skipped where jax is not installed (``setup`` raises NotImplementedError):
jax is an extra, ``pip install 'cbrtgrad[jax]'``. The ratios of one run are
what to compare (``python tools/measure.py jax`` prints them side by side).
"""

import importlib.util

import numpy as np


def _jax():
    if importlib.util.find_spec("jax") is None:
        raise NotImplementedError("jax is not installed (pip install 'cbrtgrad[jax]')")
    import jax
    import jax.numpy as jnp

    import cbrtgrad.jax as cj

    return jax, jnp, cj


class JaxGradOfSum:
    """``jax.jit(jax.grad(lambda x: f(x).sum()))`` with cbrtgrad.jax.cbrt and jnp.cbrt."""

    params = ([1, 1_000_000], ["cbrtgrad.jax", "jnp"])
    param_names = ["n", "cbrt"]

    def setup(self, n, cbrt):
        jax, jnp, cj = _jax()
        f = cj.cbrt if cbrt == "cbrtgrad.jax" else jnp.cbrt
        self.step = jax.jit(jax.grad(lambda v: f(v).sum()))
        self.x = jnp.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
        self.step(self.x).block_until_ready()  # compile before timing

    def time_grad_of_sum(self, n, cbrt):
        self.step(self.x).block_until_ready()


class JaxForwardRoutes:
    """The jitted forward through each CPU route (the per-call cost at n = 1), and jnp.cbrt."""

    params = ([1, 1_000_000], ["ffi", "pure_callback", "jnp"])
    param_names = ["n", "route"]

    def setup(self, n, route):
        jax, jnp, cj = _jax()
        from cbrtgrad.jax._primitives import cbrt_p

        if route == "jnp":
            self.f = jax.jit(jnp.cbrt)
        else:
            if route == "ffi" and not cj.route("float32").startswith("ffi"):
                raise NotImplementedError(cj.route("float32"))
            name = "auto" if route == "ffi" else "callback"
            self.f = jax.jit(lambda v: cbrt_p.bind(v, route=name))
        self.x = jnp.asarray(np.random.default_rng(0).standard_normal(n).astype(np.float32))
        self.f(self.x).block_until_ready()

    def time_forward(self, n, route):
        self.f(self.x).block_until_ready()
