"""cbrtgrad.jax under every transform, with jit on and under ``jax.disable_jit()``, and exported.

Each transform of ``cj.cbrt`` is checked twice: its bits against cbrtgrad's
api called outside XLA (the forward ``cbrt(x)``, or the kernel on the
tangent or cotangent, ``cbrt_grad(t, y)``), and its form (array type, dtype,
shape, weak type, or the exception) against the same transform of
``jnp.cbrt``, under the same ``jax.disable_jit()`` setting. ``jax.export``:
exported here, deserialized and run in a fresh process.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cbrtgrad

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")
ml_dtypes = pytest.importorskip("ml_dtypes")
cj = importlib.import_module("cbrtgrad.jax")
from jax.sharding import Mesh, PartitionSpec  # noqa: E402

from cbrtgrad.jax import _ffi  # noqa: E402
from cbrtgrad.jax._primitives import cbrt_grad_p, cbrt_p  # noqa: E402
from cbrtgrad.kernels.cpu import denormals  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DTYPES = {
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "float64": np.dtype(np.float64),
}
UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}
N = 64  # even: the vmapped transform splits it in two rows


@pytest.fixture(autouse=True)
def _ieee_quietly():
    # The references warn at y = 0 as numpy does; jax functions do not.
    with np.errstate(all="ignore"):
        yield


def _x64(on):
    # float64 needs x64 (jax.enable_x64, a context manager, as test_jax_bridge.py uses).
    return jax.enable_x64(True) if on else contextlib.nullcontext()


def _bits(a):
    a = np.asarray(a)
    return a.view(UINT[a.dtype.itemsize])


def _same_bits(got, expected):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    differ = np.flatnonzero(_bits(got).ravel() != _bits(expected).ravel())
    assert differ.size == 0, (
        f"{differ.size} elements differ, first at {differ[:5]}: "
        f"{got.ravel()[differ[:5]]} != {expected.ravel()[differ[:5]]}"
    )


def _operands(dtype):
    # Ordinary values of both signs, zeros, a subnormal, an inf and a nan.
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(N) * 30).astype(dtype)
    info = np.finfo(dtype)
    x[:6] = [0.0, -0.0, info.smallest_subnormal, -np.inf, np.nan, 8.0]
    t = rng.standard_normal(N).astype(dtype)
    return x, t


def _api_forward(x):
    out = np.empty(x.shape, x.dtype)
    cbrtgrad.cbrt(x, out=out)  # in its own dtype, half precision included
    return out


def _api_grad(t, y):
    out = np.empty(y.shape, y.dtype)
    cbrtgrad.cbrt_grad(t, y, out=out)
    return out


def _mesh():
    return Mesh(np.array(jax.devices()[:1]), ("i",))


# Each transform of a cube root f: (how to run it on x and t, what it computes:
# "y" = f(x), "dx" = the kernel on t or a cotangent of ones, cbrt_grad(., y)).
TRANSFORMS = {
    "eager": (lambda f, x, t: f(x), "y"),
    "jit": (lambda f, x, t: jax.jit(f)(x), "y"),
    "jit donate_argnums": (lambda f, x, t: jax.jit(f, donate_argnums=0)(jnp.array(x)), "y"),
    "vmap": (lambda f, x, t: jax.vmap(f)(x.reshape(2, -1)).reshape(-1), "y"),
    "scan": (
        lambda f, x, t: jax.lax.scan(lambda c, v: (c, f(v)), 0, x.reshape(2, -1))[1].reshape(-1),
        "y",
    ),
    "while_loop": (
        lambda f, x, t: jax.lax.while_loop(
            lambda s: s[0] < 1, lambda s: (s[0] + 1, f(s[1])), (0, x)
        )[1],
        "y",
    ),
    "cond": (lambda f, x, t: jax.lax.cond(x.size > 0, f, lambda v: v, x), "y"),
    "pmap": (lambda f, x, t: jax.pmap(f)(x[None])[0], "y"),
    "shard_map": (
        lambda f, x, t: jax.shard_map(
            f, mesh=_mesh(), in_specs=PartitionSpec("i"), out_specs=PartitionSpec("i")
        )(x),
        "y",
    ),
    "grad": (lambda f, x, t: jax.grad(lambda v: f(v).sum())(x), "ones"),
    "grad of remat": (lambda f, x, t: jax.grad(lambda v: jax.checkpoint(f)(v).sum())(x), "ones"),
    "jvp": (lambda f, x, t: jax.jvp(f, (x,), (t,))[1], "t"),
    "vjp": (lambda f, x, t: jax.vjp(f, x)[1](t)[0], "t"),
    "linearize": (lambda f, x, t: jax.linearize(f, x)[1](t), "t"),
    "vmap of grad": (lambda f, x, t: jax.vmap(jax.grad(f))(x), "ones"),
}


def _form(value):
    return type(value).__name__, np.dtype(value.dtype), value.shape, bool(value.weak_type)


def _run(f, transform, x, t):
    try:
        return TRANSFORMS[transform][0](f, x, t), None
    except Exception as exc:  # noqa: BLE001 - compared with jnp.cbrt's own failure
        return None, exc


@pytest.mark.parametrize("disable_jit", [False, True], ids=["jit on", "disable_jit"])
@pytest.mark.parametrize("name", sorted(DTYPES))
@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
def test_transform_bits_and_form_as_jnp(transform, name, disable_jit):
    dtype = DTYPES[name]
    x, t = _operands(dtype)
    with _x64(dtype == np.float64), jax.disable_jit(disable_jit):
        got, error = _run(cj.cbrt, transform, x, t)
        anchor, anchor_error = _run(jnp.cbrt, transform, x, t)
        assert jax.config.jax_disable_jit is disable_jit  # the caller's setting is kept
    if anchor_error is not None:  # the transform itself fails here: so must ours, alike
        assert type(error) is type(anchor_error), (error, anchor_error)
        return
    assert error is None, error
    assert _form(got) == _form(anchor)
    y = _api_forward(x)
    kind = TRANSFORMS[transform][1]
    if kind == "y":
        _same_bits(got, y)
    else:
        _same_bits(got, _api_grad(np.ones_like(t) if kind == "ones" else t, y))


@pytest.mark.parametrize("name", sorted(DTYPES))
def test_disable_jit_every_primitive_eagerly(name):
    # Both primitives bound directly, on both routes, with concrete values
    # seen inside a jax.jit-decorated function (jit is really off around them).
    dtype = DTYPES[name]
    x, t = _operands(dtype)
    y = _api_forward(x)
    seen = []

    @jax.jit
    def both(v, g, route):
        out = cbrt_p.bind(v, route=route)
        seen.append(np.asarray(out))  # a tracer here would raise
        return out, cbrt_grad_p.bind(g, out, route=route)

    with _x64(dtype == np.float64), jax.disable_jit():
        for route in ("auto", "callback"):
            out, dx = both(jnp.asarray(x), jnp.asarray(t), route)
            _same_bits(out, y)
            _same_bits(dx, _api_grad(t, y))
        _same_bits(cj.cbrt_grad(1.0, jnp.asarray(y)), _api_grad(np.ones_like(y), y))
    assert len(seen) == 2


def test_disable_jit_higher_derivatives_as_jitted():
    # The rule's own derivatives (cbrt_grad's JVP) with jit off and on.
    f = jax.grad(jax.grad(cj.cbrt))
    with jax.disable_jit():
        off = f(8.0)
        hess = jax.hessian(lambda v: cj.cbrt(v).sum())(jnp.array([8.0, 1.0]))
    _same_bits(off, jax.jit(f)(8.0))
    _same_bits(hess, jax.hessian(lambda v: cj.cbrt(v).sum())(jnp.array([8.0, 1.0])))


# -- jax.export ------------------------------------------------------------------------


def _random_bits(dtype, n, seed):
    rng = np.random.default_rng(seed)
    uint = UINT[np.dtype(dtype).itemsize]
    return rng.integers(0, np.iinfo(uint).max, n, dtype=uint, endpoint=True).view(dtype)


def _subprocess(code, **env):
    environment = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
        **env,
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, cwd=ROOT, timeout=300)  # fmt: skip


# The functions exported: (name, function, dtype, arguments: "x" or "t, y").
EXPORTS = [
    ("cbrt f32", cj.cbrt, np.float32, "x"),
    ("grad f32", jax.grad(lambda v: cj.cbrt(v).sum()), np.float32, "x"),
    ("cbrt_grad f32", cj.cbrt_grad, np.float32, "t, y"),
    ("cbrt f64", cj.cbrt, np.float64, "x"),
    ("vjp f64", lambda v, c: jax.vjp(cj.cbrt, v)[1](c)[0], np.float64, "x, t"),
    ("cbrt_grad f64", cj.cbrt_grad, np.float64, "t, y"),
]

_LOADER = """
import json, sys
import numpy as np, jax
jax.config.update("jax_enable_x64", True)
from jax import export
folder = sys.argv[1] if len(sys.argv) > 1 else {folder!r}
names = json.load(open(folder + "/names.json"))
programs = {{n: export.deserialize(bytearray(open(f"{{folder}}/{{i}}.bin", "rb").read()))
            for i, n in enumerate(names)}}
inputs = {{n: list(np.load(f"{{folder}}/{{i}}.npz").values()) for i, n in enumerate(names)}}
try:
    programs[names[0]].call(*inputs[names[0]])
    print("ran before import")
except Exception as exc:
    print("before import:", str(exc).splitlines()[0])
import cbrtgrad.jax
from cbrtgrad.build import cache as _cache
if _cache.directory() is None:  # the cache is off: import cannot load the handlers
    cbrtgrad.jax.register_ffi_targets()
for i, n in enumerate(names):
    np.save(f"{{folder}}/{{i}}.out.npy", np.asarray(programs[n].call(*inputs[n])))
print("done")
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    # Exported and serialized here; deserialized and run in a fresh process.
    pytest.importorskip("flatbuffers")  # jax's serialization format
    folder = tmp_path_factory.mktemp("exported")
    expected = {}
    for i, (name, function, dtype, arguments) in enumerate(EXPORTS):
        x = np.concatenate([_random_bits(dtype, 4096, i), _operands(dtype)[0]])
        t = _random_bits(dtype, x.size, 100 + i)
        values = {"x": (x,), "x, t": (x, t), "t, y": (t, cbrtgrad.cbrt(x))}[arguments]
        with _x64(dtype == np.float64):
            program = jax.export.export(jax.jit(function), disabled_checks=cj.export_checks())(
                *values
            )
            expected[name] = np.asarray(jax.jit(function)(*values))
        (folder / f"{i}.bin").write_bytes(program.serialize())
        np.savez(folder / f"{i}.npz", *values)
    (folder / "names.json").write_text(json.dumps([e[0] for e in EXPORTS]))
    done = _subprocess(_LOADER.format(folder=str(folder)))
    assert done.returncode == 0, done.stderr
    return folder, expected, done.stdout.splitlines()


@pytest.mark.skipif(not denormals.AVAILABLE, reason="the FFI route is for x86-64 and ARM64")
@pytest.mark.parametrize("name", [e[0] for e in EXPORTS])
def test_exported_program_runs_in_a_fresh_process_bit_for_bit(exported, name):
    folder, expected, _ = exported
    index = [e[0] for e in EXPORTS].index(name)
    got = np.load(folder / f"{index}.out.npy")
    _same_bits(got, expected[name])
    # And cbrtgrad's api outside XLA, for the forward.
    if name.startswith("cbrt "):
        x = np.load(folder / f"{index}.npz")["arr_0"]
        _same_bits(got, cbrtgrad.cbrt(x))


@pytest.mark.skipif(not denormals.AVAILABLE, reason="the FFI route is for x86-64 and ARM64")
def test_it_is_the_import_that_registers_the_handlers(exported):
    # Before `import cbrtgrad.jax` the fresh process cannot run the program.
    _, _, lines = exported
    assert lines[0].startswith("before import:") and "cbrtgrad_forward_float32" in lines[0]
    assert lines[-1] == "done"


def test_export_without_the_checks_is_refused_by_jax():
    with pytest.raises(ValueError, match="custom calls whose targets have no compatibility"):
        jax.export.export(jax.jit(cj.cbrt))(np.float32([8.0]))


@pytest.mark.skipif(not denormals.AVAILABLE, reason="the FFI route is for x86-64 and ARM64")
def test_export_checks_name_every_target_an_export_emits():
    listed = {c.is_custom_call() for c in cj.export_checks()}
    assert listed == set(cj.register_ffi_targets())
    texts = []
    for dtype in (np.float32, np.float64):
        with _x64(dtype == np.float64):
            x = np.ones(3, dtype)
            program = jax.export.export(
                jax.jit(lambda v: jax.vjp(cj.cbrt, v)[1](v)[0]), disabled_checks=cj.export_checks()
            )(x)
            texts.append(program.mlir_module())
    emitted = {
        name
        for text in texts
        for name in (
            "cbrtgrad_forward_float32",
            "cbrtgrad_forward_float64",
            "cbrtgrad_grad_float32",
            "cbrtgrad_grad_float64",
        )
        if f"@{name}(" in text
    }
    assert emitted == listed


@pytest.mark.skipif(not denormals.AVAILABLE, reason="the FFI route is for x86-64 and ARM64")
def test_export_names_one_thread_handlers_whatever_the_parallel_setting(monkeypatch):
    # CBRTGRAD_JAX_PARALLEL_MIN is the exporting process's setting: jit takes
    # the threaded handlers, an export the one-thread ones the loader registers.
    from cbrtgrad import _config

    monkeypatch.setenv("CBRTGRAD_JAX_PARALLEL_MIN", "1")
    _config.settings.cache_clear()
    try:
        x = np.ones(8, np.float32)
        assert "cbrtgrad_forward_float32_threads" in jax.jit(cj.cbrt).lower(x).as_text()
        text = jax.export.export(jax.jit(cj.cbrt), disabled_checks=cj.export_checks())(x)
        assert "@cbrtgrad_forward_float32(" in text.mlir_module()
        assert "_threads" not in text.mlir_module()
    finally:
        monkeypatch.delenv("CBRTGRAD_JAX_PARALLEL_MIN")
        _config.settings.cache_clear()


@pytest.mark.parametrize(
    ("function", "dtype", "platforms", "why"),
    [
        (cj.cbrt, np.float16, None, "in half precision"),
        (
            lambda v: jax.grad(lambda a: cj.cbrt(a).sum())(v),
            ml_dtypes.bfloat16,
            None,
            "in half precision",
        ),
        (lambda v: cbrt_p.bind(v, route="callback"), np.float32, None, "with route='callback'"),
        (cj.cbrt, np.float32, ("cuda",), "on a platform other than the CPU"),
        (cj.cbrt, np.float32, ("cpu", "cuda"), "on a platform other than the CPU"),
    ],
    ids=["float16", "bfloat16 grad", "callback route", "cuda", "cpu and cuda"],
)
def test_export_of_a_callback_route_is_a_value_error_saying_why(function, dtype, platforms, why):
    x = np.ones(3, dtype)
    export = jax.export.export(jax.jit(function), platforms=platforms,
                               disabled_checks=cj.export_checks())  # fmt: skip
    with pytest.raises(ValueError, match=rf"cbrtgrad\.jax: the \w+ kernel on {np.dtype(dtype)} "
                       rf"cannot be exported: {why}"):  # fmt: skip
        export(x)


def test_import_loads_the_handlers_from_the_cache_and_never_compiles(tmp_path):
    # A fresh process: with the cache warm, import registers the four
    # one-thread handlers, loaded; with an empty cache, none, and compiles nothing.
    code = (
        "import json, cbrtgrad.jax\n"
        "from cbrtgrad.jax import _ffi\n"
        "from cbrtgrad.build import compile as _compile\n"
        "print(json.dumps([sorted(n for n in _ffi._TARGETS.values() if n),"
        " _compile.built_kernels()]))\n"
    )
    assert cj.register_ffi_targets()  # the test process's cache holds them now, where it is on
    warm = _subprocess(code)
    assert warm.returncode == 0, warm.stderr
    registered, built = json.loads(warm.stdout.splitlines()[-1])
    from cbrtgrad.build import cache as _cache

    if _cache.directory() is not None and denormals.AVAILABLE:
        assert registered == sorted(_ffi.name_of(k, d, False) for k, d in _ffi.EXPORTED)
        assert built and set(built.values()) == {"loaded"}
    cold = _subprocess(code, CBRTGRAD_CACHE_DIR=str(tmp_path))
    assert cold.returncode == 0, cold.stderr
    assert json.loads(cold.stdout.splitlines()[-1]) == [[], {}]
