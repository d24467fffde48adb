"""Every traced or transformed call of cbrtgrad.torch takes the ops' own rules.

Each class of transform is run on ``cbrt``, ``cbrt_grad`` and ``cbrt_and_grad``
and on the same expressions written with PyTorch's own ops
(``sign(x) |x|^(1/3)`` and ``g / (3 y^2)``) under the same transform; the
values must agree (the expressions are not correctly rounded, so to a
tolerance), and every tangent, cotangent and batch must be there (a zero or
missing tangent, a refused transform, a Python node in a saved trace fail):

* forward mode under ``torch.compile`` (``jvp``, ``jacfwd``, ``forward_ad``), the
  ``dual_level`` outside or inside the compiled function;
* reverse mode of ``torch.func`` under ``torch.compile`` (``grad``, ``vjp``, ``jacrev``);
* PyTorch's batched gradients (``jacobian``/``hessian(vectorize=True)``,
  ``is_grads_batched``, ``gradcheck(check_batched_grad=True)``);
* TorchScript: ``torch.jit.script`` and ``trace``, saved and loaded in a new process.
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import pytest

torch = pytest.importorskip("torch")
import cbrtgrad.torch as ct  # noqa: E402

F64 = torch.float64
X = torch.tensor([8.0, -27.0, 0.5, -3.0], dtype=F64)  # no 0: the expression is nan there
G = torch.tensor([1.5, -0.25, 2.0, 3.0], dtype=F64)
Y = ct.cbrt(X)


def _cbrt_ref(x):
    return torch.sign(x) * x.abs().pow(1 / 3)


def _grad_ref(g, y):
    return g / (3 * y * y)


def _fused_ref(x, g):
    y = _cbrt_ref(x)
    return y, _grad_ref(g, y)


# (name, cbrtgrad's function, PyTorch's expression, its inputs)
CASES = [
    ("cbrt", ct.cbrt, _cbrt_ref, (X,)),
    ("cbrt_grad", ct.cbrt_grad, _grad_ref, (G, Y)),
    ("cbrt_and_grad", ct.cbrt_and_grad, _fused_ref, (X, G)),
]
IDS = [c[0] for c in CASES]


def _close(actual, expected):
    torch.testing.assert_close(actual, expected, rtol=1e-12, atol=1e-14)


def _flat(value):
    return torch.cat([v.reshape(-1) for v in value]) if isinstance(value, tuple) else value


def _tangents(args):
    return tuple(torch.linspace(0.5, 2.0, a.numel(), dtype=a.dtype).reshape(a.shape) for a in args)


# Inductor's own modules use torch.jit.script_method, which torch 2.13 deprecates.
_INDUCTOR_WARNS = pytest.mark.filterwarnings(
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"
)


# -- forward mode ------------------------------------------------------------------


def _jvp(fn, args):
    def run(*primals):
        return _flat(torch.func.jvp(fn, primals, _tangents(primals))[1])

    return run


def _jacfwd(fn, args):
    def run(*primals):
        argnums = tuple(range(len(primals)))
        return _flat(torch.func.jacfwd(lambda *a: _flat(fn(*a)), argnums=argnums)(*primals))

    return run


def _dual(fn, args):
    def run(*primals):
        fa = torch.autograd.forward_ad
        with fa.dual_level():
            duals = [fa.make_dual(p, t) for p, t in zip(primals, _tangents(primals), strict=True)]
            out = fn(*duals)
            outs = out if isinstance(out, tuple) else (out,)
            tangents = [fa.unpack_dual(o).tangent for o in outs]
        assert all(t is not None for t in tangents), "a tangent went missing"
        return torch.cat([t.reshape(-1) for t in tangents])

    return run


FORWARD = {"jvp": _jvp, "jacfwd": _jacfwd, "forward_ad": _dual}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("mode", list(FORWARD))
@pytest.mark.parametrize(("name", "fn", "ref", "args"), CASES, ids=IDS)
def test_forward_mode_under_compile_is_the_expressions(backend, mode, name, fn, ref, args):
    torch._dynamo.reset()
    expected = FORWARD[mode](ref, args)(*args)
    eager = FORWARD[mode](fn, args)(*args)
    if mode == "forward_ad":  # dual tensors into a compiled function
        compiled = FORWARD[mode](torch.compile(fn, backend=backend), args)(*args)
    else:
        compiled = torch.compile(FORWARD[mode](fn, args), backend=backend)(*args)
    assert torch.count_nonzero(expected) > 0
    _close(eager, expected)
    _close(compiled, expected)


@_INDUCTOR_WARNS
def test_forward_mode_under_inductor_is_the_expressions():
    # One inductor case (it compiles slowly on 2 cores): the reproducer.
    torch._dynamo.reset()
    t = torch.ones_like(X)
    compiled = torch.compile(lambda a, b: torch.func.jvp(ct.cbrt, (a,), (b,))[1], fullgraph=True)
    _close(compiled(X, t), torch.func.jvp(_cbrt_ref, (X,), (t,))[1])


# -- forward mode with the dual level inside the compiled function ------------------
# A compiled graph enters a dual_level written inside it without forward_ad's
# Python level counter, so nothing that reads the counter may decide forward mode.


def _inside(fn, which, set_up):
    """A function making its own dual level and dual tensors, for ``torch.compile``.

    ``which`` says which inputs get a tangent; ``set_up`` is how the call sits
    in the level: plainly, under ``torch.no_grad`` (forward mode needs no grad
    mode), after a graph break, or in a function dynamo does not trace.
    """
    skipped = torch._dynamo.disable(lambda *a: fn(*a))

    def run(*args):
        fa = torch.autograd.forward_ad
        with fa.dual_level():
            duals = [
                fa.make_dual(a, t) if w else a
                for a, t, w in zip(args, _tangents(args), which, strict=True)
            ]
            if set_up == "no_grad":
                with torch.no_grad():
                    out = fn(*duals)
            elif set_up == "graph_break":
                torch._dynamo.graph_break()
                out = fn(*duals)
            elif set_up == "not_traced":
                out = skipped(*duals)
            else:
                out = fn(*duals)
            outs = out if isinstance(out, tuple) else (out,)
            return tuple(fa.unpack_dual(o).tangent for o in outs)

    return run


def _which(args):
    # Every input with a tangent, then each input alone (the other a plain tensor).
    n = len(args)
    return [(True,) * n] + ([tuple(i == j for j in range(n)) for i in range(n)] if n > 1 else [])


INSIDE = [
    pytest.param(
        name, fn, ref, args, which, id=f"{name}-{''.join('t' if w else '-' for w in which)}"
    )
    for name, fn, ref, args in CASES
    for which in _which(args)
]


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("set_up", ["plain", "no_grad", "graph_break", "not_traced"])
@pytest.mark.parametrize(("name", "fn", "ref", "args", "which"), INSIDE)
def test_dual_level_inside_compile_is_the_expressions(backend, set_up, name, fn, ref, args, which):
    torch._dynamo.reset()
    # One graph where nothing breaks it: the level, the duals and the op all compiled.
    fullgraph = set_up in ("plain", "no_grad")
    expected = torch.compile(_inside(ref, which, set_up), backend=backend, fullgraph=fullgraph)
    compiled = torch.compile(_inside(fn, which, set_up), backend=backend, fullgraph=fullgraph)
    expected, compiled = expected(*args), compiled(*args)
    # A tangent wherever the expression has one; where it has none (cbrt_and_grad's
    # y from g alone), None or zeros (the Function's jvp gives zeros there).
    assert all(c is not None for c, e in zip(compiled, expected, strict=True) if e is not None), (
        "a tangent went missing"
    )
    compiled = _zeros_for_none(compiled)
    expected = _zeros_for_none(expected)
    assert torch.count_nonzero(expected) > 0
    _close(compiled, expected)
    # The same bits as the level in eager code.
    assert torch.equal(compiled, _zeros_for_none(_inside(fn, which, "plain")(*args)))


def _zeros_for_none(tangents):
    # Every output has X's shape.
    parts = [torch.zeros_like(X) if t is None else t for t in tangents]
    return torch.cat([p.reshape(-1) for p in parts])


def _sin_inside(x, t):
    fa = torch.autograd.forward_ad
    with fa.dual_level():
        return fa.unpack_dual(torch.sin(fa.make_dual(x, t))).tangent


@_INDUCTOR_WARNS
def test_dual_level_inside_inductor_is_the_expression():
    # One inductor case (it compiles slowly on 2 cores): the reproducer,
    # with torch.sin as the framework's own op under the same construction.
    torch._dynamo.reset()
    t = torch.ones_like(X)
    sin = torch.compile(_sin_inside, fullgraph=True)(X, t)
    _close(sin, torch.cos(X))
    (compiled,) = torch.compile(_inside(ct.cbrt, (True,), "plain"), fullgraph=True)(X)
    _close(compiled, torch.func.jvp(_cbrt_ref, (X,), _tangents((X,)))[1])


# -- reverse mode of torch.func under torch.compile -----------------------------------


def _grad(fn, args):
    def run(*primals):
        argnums = tuple(range(len(primals)))
        grads = torch.func.grad(lambda *a: _flat(fn(*a)).square().sum(), argnums=argnums)(*primals)
        return torch.cat([v.reshape(-1) for v in grads])

    return run


def _vjp(fn, args):
    def run(*primals):
        out, pull = torch.func.vjp(lambda *a: _flat(fn(*a)), *primals)
        return torch.cat(
            [v.reshape(-1) for v in pull(torch.linspace(1, 2, out.numel(), dtype=F64))]
        )

    return run


def _jacrev(fn, args):
    def run(*primals):
        argnums = tuple(range(len(primals)))
        return _flat(torch.func.jacrev(lambda *a: _flat(fn(*a)), argnums=argnums)(*primals))

    return run


REVERSE = {"grad": _grad, "vjp": _vjp, "jacrev": _jacrev}


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
@pytest.mark.parametrize("mode", list(REVERSE))
@pytest.mark.parametrize(("name", "fn", "ref", "args"), CASES, ids=IDS)
def test_torch_func_reverse_mode_under_compile_is_the_expressions(
    backend, mode, name, fn, ref, args
):
    torch._dynamo.reset()
    expected = REVERSE[mode](ref, args)(*args)
    compiled = torch.compile(REVERSE[mode](fn, args), backend=backend, fullgraph=True)(*args)
    _close(compiled, expected)


@_INDUCTOR_WARNS
def test_torch_func_grad_under_inductor_is_the_expressions():
    torch._dynamo.reset()
    compiled = torch.compile(torch.func.grad(lambda a: ct.cbrt(a).sum()), fullgraph=True)
    _close(compiled(X), torch.func.grad(lambda a: _cbrt_ref(a).sum())(X))


# -- PyTorch's batched gradients (legacy batched tensors) -----------------------------


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize(("name", "fn", "ref", "args"), CASES, ids=IDS)
def test_vectorized_jacobian_is_the_expressions(strategy, name, fn, ref, args):
    jac = torch.autograd.functional.jacobian

    def flat(f):
        return lambda *a: _flat(f(*a))

    expected = jac(flat(ref), args, vectorize=True, strategy=strategy)
    actual = jac(flat(fn), args, vectorize=True, strategy=strategy)
    for a, e in zip(actual, expected, strict=True):
        _close(a, e)


@pytest.mark.parametrize("outer", ["reverse-mode", "forward-mode"])
@pytest.mark.parametrize(("name", "fn", "ref", "args"), CASES, ids=IDS)
def test_vectorized_hessian_is_the_expressions(outer, name, fn, ref, args):
    def loss(f):
        return lambda *a: _flat(f(*a)).square().sum()

    hessian = torch.autograd.functional.hessian
    expected = hessian(loss(ref), args, vectorize=True, outer_jacobian_strategy=outer)
    actual = hessian(loss(fn), args, vectorize=True, outer_jacobian_strategy=outer)
    _close(
        torch.stack([torch.cat([b.reshape(-1) for b in a]) for a in actual]),
        torch.stack([torch.cat([b.reshape(-1) for b in e]) for e in expected]),
    )


@pytest.mark.parametrize(("name", "fn", "ref", "args"), CASES, ids=IDS)
def test_batched_grads_are_the_expressions(name, fn, ref, args):
    def grads(f):
        inputs = [a.clone().requires_grad_(True) for a in args]
        out = _flat(f(*inputs))
        batch = torch.stack([torch.linspace(1, 2, out.numel(), dtype=F64) * k for k in (1, -3)])
        return torch.autograd.grad(out, inputs, batch, is_grads_batched=True)

    for a, e in zip(grads(fn), grads(ref), strict=True):
        assert a.shape[0] == 2
        _close(a, e)


@pytest.mark.parametrize(("name", "fn", "ref", "args"), CASES, ids=IDS)
def test_gradcheck_with_batched_grads(name, fn, ref, args):
    inputs = tuple(a.clone().requires_grad_(True) for a in args)
    assert torch.autograd.gradcheck(
        fn, inputs, check_batched_grad=True, check_forward_ad=True, check_batched_forward_grad=True
    )
    assert torch.autograd.gradgradcheck(fn, inputs, check_batched_grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_vectorized_jacobian_in_other_dtypes(dtype):
    # bfloat16 reached numpy through a dtype view, which the batched tensors refuse.
    x = X.to(dtype)
    jac = torch.autograd.functional.jacobian(ct.cbrt, x, vectorize=True)
    assert torch.equal(torch.diagonal(jac), ct.cbrt_grad(torch.ones_like(x), ct.cbrt(x)))
    assert torch.count_nonzero(jac - torch.diag(torch.diagonal(jac))) == 0


# -- TorchScript ----------------------------------------------------------------------


def _lab_f(t: torch.Tensor) -> torch.Tensor:
    # kornia's rgb_to_lab: the cube root above a threshold, a line below it.
    return torch.where(t > 0.008856, ct.cbrt(t), 7.787 * t + 4.0 / 29.0)


def _lab_ref(t: torch.Tensor) -> torch.Tensor:
    return torch.where(t > 0.008856, _cbrt_ref(t), 7.787 * t + 4.0 / 29.0)


def _both(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    y, dx = ct.cbrt_and_grad(x, g)
    return ct.cbrt_grad(g, y) + dx + ct.cbrt(x.to(torch.int64) ** 3)  # integers: default dtype


def _both_ref(g: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    y = _cbrt_ref(x)
    return 2 * _grad_ref(g, y) + _cbrt_ref((x.to(torch.int64) ** 3).to(F64))


def _quiet():
    context = warnings.catch_warnings()
    context.__enter__()
    # TorchScript is deprecated; a TracerWarning stays an error (the suite's filterwarnings).
    warnings.simplefilter("ignore", DeprecationWarning)
    return context


@pytest.mark.parametrize("how", ["script", "trace"])
def test_torchscript_records_the_ops_and_saves(how, tmp_path):
    rgb = torch.tensor([0.001, 0.2, 0.9, 0.008], dtype=F64)
    context = _quiet()
    try:
        if how == "script":
            lab, both = torch.jit.script(_lab_f), torch.jit.script(_both)
            direct = torch.jit.script(ct.cbrt)
            _close(direct(torch.tensor([8, 27])), torch.tensor([2.0, 3.0]))
        else:
            lab = torch.jit.trace(_lab_f, rgb)
            both = torch.jit.trace(_both, (G, X))
        graphs = str(lab.inlined_graph) + str(both.inlined_graph)
        assert "cbrtgrad::cube_root(" in graphs and "PythonOp" not in graphs
        for op in ("cube_root_grad", "cube_root_and_grad"):
            assert f"cbrtgrad::{op}(" in str(both.inlined_graph)
        _close(lab(rgb), _lab_ref(rgb))
        _close(both(G, X), _both_ref(G, X))
        torch.jit.save(lab, str(tmp_path / "lab.pt"))
        torch.jit.save(both, str(tmp_path / "both.pt"))
    finally:
        context.__exit__(None, None, None)
    code = f"""
import torch, cbrtgrad.torch
x = torch.tensor([0.001, 0.2, 0.9, 0.008], dtype=torch.float64)
g = torch.tensor([1.5, -0.25, 2.0, 3.0], dtype=torch.float64)
print(torch.jit.load({str(tmp_path / "lab.pt")!r})(x).tolist())
print(torch.jit.load({str(tmp_path / "both.pt")!r})(g, x).tolist())
"""
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    lab_values, both_values = (eval(line) for line in run.stdout.split("\n")[:2])
    _close(torch.tensor(lab_values, dtype=F64), _lab_ref(rgb))
    _close(torch.tensor(both_values, dtype=F64), _both_ref(G, rgb))


def test_torchscript_gradients_are_the_expressions():
    context = _quiet()
    try:
        scripted = torch.jit.script(_lab_f)
    finally:
        context.__exit__(None, None, None)
    x = torch.tensor([0.001, 0.2, 0.9], dtype=F64, requires_grad=True)
    (dx,) = torch.autograd.grad(scripted(x).sum(), x)
    (expected,) = torch.autograd.grad(_lab_ref(x).sum(), x)
    _close(dx, expected)


def test_torchscript_refuses_a_number_by_name():
    def f(g: torch.Tensor) -> torch.Tensor:
        return ct.cbrt_grad(g, 2.0)

    context = _quiet()
    try:
        scripted = torch.jit.script(f)
    finally:
        context.__exit__(None, None, None)
    with pytest.raises(torch.jit.Error, match="TypeError: cbrtgrad.torch: in TorchScript, g and y"):
        scripted(torch.ones(2))
