"""The registry's core behaviour with the always-available backends."""

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad import _config, backends


def test_unknown_backend_lists_known_ones():
    with pytest.raises(ValueError, match="known backends: .*cpu"):
        cg.cbrt(np.ones(2), backend="fortran")
    with pytest.raises(TypeError, match="backend must be a str"):
        cg.cbrt(np.ones(2), backend=3)


def test_explicit_and_context_backends_agree_on_exact_values():
    # NOTE: the numpy backend's bits are np.cbrt's, the platform libm's without
    # SVML (glibc: cbrt(27) = 3.0000000000000004): it is held to its own
    # explicit result; exact values are asked of cbrtgrad's backend only.
    x = np.array([8.0, -27.0, 2.0])
    explicit = cg.cbrt(x, backend="numpy")
    with backends.use_backend("numpy") as chosen:
        assert chosen is not None and chosen.name == "numpy"
        assert cg.cbrt(x).tobytes() == explicit.tobytes()
    np.testing.assert_array_equal(cg.cbrt(x[:2], backend="cpu"), [2.0, -3.0])
    with backends.use_backend("cpu") as chosen:
        assert chosen is not None and chosen.name == "cpu"
        np.testing.assert_array_equal(cg.cbrt(x[:2]), [2.0, -3.0])


def test_environment_variable(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_BACKEND", "nonsense")
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="unknown backend 'nonsense'"):
            cg.cbrt(np.ones(1))
    finally:
        monkeypatch.delenv("CBRTGRAD_BACKEND")
        _config.settings.cache_clear()


def test_numpy_backend_matches_np_cbrt():
    x = np.linspace(-5, 5, 11)
    np.testing.assert_array_equal(cg.cbrt(x, backend="numpy"), np.cbrt(x))


def test_small_calls_follow_use_backend_and_the_environment(monkeypatch):
    # The api keeps the automatic choice's answer for small plain arrays
    # (cbrtgrad.backends.host); a use_backend block and a CBRTGRAD_BACKEND read after
    # that must still decide. The numpy backend is told apart by its bits:
    # g / (3 y y) rounds three times, np.cbrt in float32 is not correctly rounded.
    x = np.linspace(0.5, 64.0, 1000, dtype=np.float32)
    y = np.linspace(1.0, 2.0, 1000)
    g = np.linspace(-3.0, 5.0, 1000)
    calls = {
        "cbrt": lambda: cg.cbrt(x),
        "cbrt out=": lambda: cg.cbrt(x, out=np.empty_like(x)),
        "cbrt_grad": lambda: cg.cbrt_grad(g, y),
        "cbrt_and_grad": lambda: cg.cbrt_and_grad(y, g)[1] - cg.cbrt_grad(g, cg.cbrt(y)),
    }
    kept = {name: call() for name, call in calls.items()}  # the cpu backend, kept
    with backends.use_backend("numpy"):
        numpy_bits = {name: call() for name, call in calls.items()}
    for name in ("cbrt", "cbrt_grad"):
        assert (numpy_bits[name] != kept[name]).any(), name  # the test can tell them apart
        np.testing.assert_array_equal(
            numpy_bits[name],
            cg.cbrt(x, backend="numpy") if name == "cbrt" else cg.cbrt_grad(g, y, backend="numpy"),
        )
    np.testing.assert_array_equal(numpy_bits["cbrt out="], numpy_bits["cbrt"])
    assert (kept["cbrt_and_grad"] == 0).all()
    monkeypatch.setenv("CBRTGRAD_BACKEND", "numpy")
    _config.settings.cache_clear()
    try:
        for name, call in calls.items():
            np.testing.assert_array_equal(call(), numpy_bits[name], err_msg=name)
    finally:
        monkeypatch.delenv("CBRTGRAD_BACKEND")
        _config.settings.cache_clear()
    for name, call in calls.items():
        np.testing.assert_array_equal(call(), kept[name], err_msg=name)


def test_small_cpu_size_is_the_parallel_threshold(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", "5")
    _config.settings.cache_clear()
    try:
        assert backends._registry.small_cpu_size(_config.settings()) == 5
        assert cg.cbrt(np.full(4, 8.0)).tolist() == [2.0] * 4
        # From 5 elements on, the parallel backend: the same bits.
        assert cg.cbrt(np.full(5, 8.0)).tolist() == [2.0] * 5
    finally:
        monkeypatch.delenv("CBRTGRAD_PARALLEL_MIN")
        _config.settings.cache_clear()


def test_settings_cache_clear_drops_what_the_small_calls_keep(monkeypatch):
    # The small calls never read the settings (cbrtgrad.backends.host.keep_choice):
    # settings.cache_clear() drops their kept answer, and the next call,
    # on the general route, keeps the new one.
    from cbrtgrad.backends import host as _host

    _host.keep_choice()
    kept = _config.settings()
    assert _config.settings() is kept and _host.KEPT[0] is kept
    monkeypatch.setenv("CBRTGRAD_PARALLEL_MIN", "7")
    assert _config.settings() is kept  # read once, until cleared
    _config.settings.cache_clear()
    try:
        assert _host.KEPT == [None, 0]
        assert cg.cbrt(np.full(3, 8.0)).tolist() == [2.0] * 3
        renewed = _config.settings()
        assert renewed is not kept and renewed.parallel_min_size == 7
        assert _host.KEPT == [renewed, backends._registry.small_cpu_size(renewed)]
    finally:
        monkeypatch.delenv("CBRTGRAD_PARALLEL_MIN")
        _config.settings.cache_clear()


def test_explicit_cpu_backend_wins_on_the_small_calls(monkeypatch):
    # backend="cpu" takes the small calls' route (one ufunc call) whatever
    # use_backend or CBRTGRAD_BACKEND say, with the cpu backend's bits, out=
    # included; the numpy backend is told apart by its bits, as above.
    x = np.linspace(0.5, 64.0, 1000, dtype=np.float32)
    y = np.linspace(1.0, 2.0, 1000)
    g = np.linspace(-3.0, 5.0, 1000)
    out32, out64, pair = np.empty_like(x), np.empty_like(y), (np.empty_like(y), np.empty_like(y))
    calls = {
        "cbrt": lambda: cg.cbrt(x, backend="cpu"),
        "cbrt out=": lambda: cg.cbrt(x, out32, backend="cpu").copy(),
        "cbrt_grad": lambda: cg.cbrt_grad(g, y, backend="cpu"),
        "cbrt_grad out=": lambda: cg.cbrt_grad(g, y, out=out64, backend="cpu").copy(),
        "cbrt_and_grad": lambda: np.stack(cg.cbrt_and_grad(y, g, backend="cpu")),
        "cbrt_and_grad out=": lambda: np.stack(cg.cbrt_and_grad(y, g, pair, backend="cpu")),
        "Tensor cbrt": lambda: cg.cbrt(cg.Tensor(x, requires_grad=True), backend="cpu").numpy(),
    }
    with backends.use_backend("cpu"):
        expected = {name: call() for name, call in calls.items()}
    assert (expected["cbrt"] != np.cbrt(x)).any()  # numpy's float32 bits differ somewhere
    # Another explicit backend never takes the cpu route: the numpy backend's bits.
    numpy_fused = cg.cbrt_and_grad(x, x, backend="numpy")[0]
    assert numpy_fused.tobytes() == cg.cbrt(x, backend="numpy").tobytes()
    assert numpy_fused.tobytes() != expected["cbrt"].tobytes()
    np.testing.assert_array_equal(expected["cbrt out="], expected["cbrt"])
    np.testing.assert_array_equal(expected["cbrt_and_grad"][1], cg.cbrt_grad(g, cg.cbrt(y)))
    with backends.use_backend("numpy"):
        for name, call in calls.items():
            assert call().tobytes() == expected[name].tobytes(), name
    monkeypatch.setenv("CBRTGRAD_BACKEND", "numpy")
    _config.settings.cache_clear()
    try:
        for name, call in calls.items():
            assert call().tobytes() == expected[name].tobytes(), name
        # A "cpu" that is not the interned literal takes the general route:
        # the same bits (the small route compares the name by identity).
        built = "".join(["c", "p", "u"])
        assert built == "cpu" and built is not cg.api._CPU
        assert cg.cbrt(x, backend=built).tobytes() == expected["cbrt"].tobytes()
        assert cg.cbrt_grad(g, y, backend=built).tobytes() == expected["cbrt_grad"].tobytes()
        fused = np.stack(cg.cbrt_and_grad(y, g, backend=built))
        assert fused.tobytes() == expected["cbrt_and_grad"].tobytes()
        with pytest.raises(TypeError, match="cbrtgrad: out"):
            cg.cbrt(x, out=[0.0] * 1000, backend="cpu")
        with pytest.raises(TypeError, match="cbrtgrad"):
            cg.cbrt(x, out=np.empty(1000, np.int32), backend="cpu")
    finally:
        monkeypatch.delenv("CBRTGRAD_BACKEND")
        _config.settings.cache_clear()


@pytest.mark.parametrize("call", ["api", "backend"])
def test_small_fused_out_pair_keeps_the_fused_rule(call):
    # The small fused calls hand a ready out pair to the two ufuncs
    # (_ufunc_args.ready_pair): every input read before an output is written,
    # y before dx, for y over x, dx over g, y and dx the same array, and
    # y over g (not ready: the general route's temporaries).
    fused = (
        (lambda x, g, out: cg.cbrt_and_grad(x, g, out, backend="cpu"))
        if call == "api"
        else backends.get_backend("cpu").cube_root_and_grad
    )
    rng = np.random.default_rng(5)
    x0, g0 = rng.uniform(-9, 9, 100), rng.uniform(-2, 2, 100)
    y_expected, dx_expected = cg.cbrt(x0), cg.cbrt_grad(g0, cg.cbrt(x0))
    for y_is, dx_is in (("x", "g"), ("x", "new"), ("new", "x"), ("g", "x"), ("g", "new")):
        x, g = x0.copy(), g0.copy()
        named = {"x": x, "g": g}
        y = named.get(y_is, np.empty(100))
        dx = named.get(dx_is, np.empty(100))
        result = fused(x, g, (y, dx))
        assert result[0] is y and result[1] is dx
        np.testing.assert_array_equal(dx, dx_expected, err_msg=f"y={y_is}, dx={dx_is}")
        if y is not dx:
            np.testing.assert_array_equal(y, y_expected, err_msg=f"y={y_is}, dx={dx_is}")
    a = np.empty(100)
    fused(x0, g0, (a, a))
    np.testing.assert_array_equal(a, dx_expected)  # y then dx: out=(a, a) holds dx
    with pytest.raises(TypeError, match="cbrtgrad: out"):
        fused(x0, g0, (np.empty(100, np.float32), np.empty(100)))
