"""The cuda backend's kernels, under numba's simulator here, against the cpu backend bit for bit."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad.arrays.kinds import is_device_array
from cbrtgrad.backends import get_backend

from ._cases import DTYPES, cases, same_bits

cuda = pytest.importorskip("numba.cuda", reason="numba-cuda is not installed")
cpu = get_backend("cpu")
gpu = get_backend("cuda")


# The simulator's threads do not inherit np.errstate: its scalar warnings at
# y = 0 and on overflow are the IEEE cases the cpu kernels flag too.
@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("dtype", DTYPES)
def test_kernels_same_bits_as_cpu(dtype):
    # More elements than the simulator's 64 threads: the grid-stride loop runs.
    x = cases(dtype, 600)
    g = cases(dtype, 600)[::-1].copy()
    with np.errstate(all="ignore"):
        y_ref = cpu.cube_root(x)
        dx_ref = cpu.cube_root_grad(g, y_ref)
        y = gpu.cube_root(cuda.to_device(x)).copy_to_host()
        dx = gpu.cube_root_grad(cuda.to_device(g), cuda.to_device(y_ref)).copy_to_host()
        yf, dxf = gpu.cube_root_and_grad(cuda.to_device(x), cuda.to_device(g))
    assert same_bits(y, y_ref)
    assert same_bits(dx, dx_ref)
    assert same_bits(yf.copy_to_host(), y_ref) and same_bits(dxf.copy_to_host(), dx_ref)


def test_float16_and_integers_through_the_public_functions():
    h = np.array([[8.0, -27.0], [0.5, 6.1e-5]], np.float16)
    y = cbrtgrad.cbrt(cuda.to_device(h))
    assert y.dtype == np.float32 and y.shape == (2, 2)
    assert same_bits(y.copy_to_host(), cbrtgrad.cbrt(h, backend="cpu"))
    i = np.arange(-10, 10)
    assert same_bits(
        cbrtgrad.cbrt(cuda.to_device(i)).copy_to_host(), cbrtgrad.cbrt(i, backend="cpu")
    )
    x = np.linspace(1.0, 9.0, 12).reshape(3, 4).astype(np.float32)
    yd, dxd = cbrtgrad.cbrt_and_grad(cuda.to_device(x), cuda.to_device(np.ones_like(x)))
    yc, dxc = cbrtgrad.cbrt_and_grad(x, np.ones_like(x), backend="cpu")
    assert same_bits(yd.copy_to_host(), yc) and same_bits(dxd.copy_to_host(), dxc)


def test_out_stream_and_explicit_copies():
    x = np.linspace(-8.0, 8.0, 100)
    ref = cpu.cube_root(x)
    stream = cuda.stream()
    out = cuda.device_array(100, np.float64)
    assert gpu.cube_root(cuda.to_device(x), out=out, stream=stream) is out
    stream.synchronize()
    assert same_bits(out.copy_to_host(), ref)
    assert same_bits(gpu.cube_root(x, copy_host=True), ref)
    host_out = np.empty(100)
    assert gpu.cube_root(x, out=host_out, copy_host=True) is host_out
    assert same_bits(host_out, ref)
    assert gpu.cube_root(np.float64(-27.0), copy_host=True) == -3.0
    empty = gpu.cube_root(cuda.to_device(np.empty(0)))
    assert empty.shape == (0,)


def test_bad_input_is_a_clear_error():
    d = cuda.to_device(np.ones((4, 4)))
    with pytest.raises(TypeError, match="x is a host ndarray"):
        gpu.cube_root(np.ones(3))
    with pytest.raises(TypeError, match="out is a host ndarray"):
        gpu.cube_root(d, out=np.empty((4, 4)))
    with pytest.raises(ValueError, match="x must be a C-contiguous device array"):
        gpu.cube_root(d[:, ::2])
    with pytest.raises(ValueError, match="broadcasts only a g of one element"):
        gpu.cube_root_grad(d, cuda.to_device(np.ones(4)))
    with pytest.raises(ValueError, match="where=True"):
        gpu.cube_root(d, where=cuda.to_device(np.ones((4, 4), bool)))
    with pytest.raises(TypeError, match="out has dtype float32; expected float64"):
        gpu.cube_root(d, out=cuda.device_array((4, 4), np.float32))
    with pytest.raises(ValueError, match=r"out has shape \(16,\); expected \(4, 4\)"):
        gpu.cube_root(d, out=cuda.device_array(16, np.float64))
    with pytest.raises(TypeError, match="complex128"):
        gpu.cube_root(cuda.to_device(np.ones(2, complex)))
    with pytest.raises(TypeError, match="out must be a tuple"):
        gpu.cube_root_and_grad(d, d, out=cuda.device_array((4, 4)))


def test_launch_config_one_tile_per_block_up_to_the_grid_limit():
    from cbrtgrad.kernels.cuda.elementwise import launch_config

    for per_thread in (4, 8):
        tile = 256 * per_thread
        assert launch_config(2**28, 256, 2**31 - 1, per_thread) == (2**28 // tile, 256)
        assert launch_config(2**28 + 1, 256, 2**31 - 1, per_thread) == (2**28 // tile + 1, 256)
        # More tiles than the grid may have: the blocks loop over them.
        assert launch_config(2**44, 256, 2**31 - 1, per_thread) == (2**31 - 1, 256)
        assert launch_config(1, 256, 2**31 - 1, per_thread) == (1, 256)
        assert launch_config(10**6, 256, 3, per_thread) == (3, 256)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("n", [0, 1, 127, 128, 129, 255, 256, 257, 300, 777])
def test_every_tile_shape_and_in_place(n):
    # The simulator's grid is 2 blocks of 32 threads, 4 or 8 elements each
    # (tiles of 128 or 256): full tiles, a short last tile, the blocks' loop
    # over tiles, and out=x (each thread loads its elements before it stores).
    x = cases(np.float64, max(n, 1))[:n].copy()
    g = np.linspace(-3.0, 3.0, n)
    with np.errstate(all="ignore"):
        y_ref = cpu.cube_root(x)
        dx_ref = cpu.cube_root_grad(g, y_ref)
    xd = cuda.to_device(x)
    assert gpu.cube_root(xd, out=xd) is xd
    assert same_bits(xd.copy_to_host(), y_ref)
    gd = cuda.to_device(g)
    assert same_bits(gpu.cube_root_grad(gd, xd, out=gd).copy_to_host(), dx_ref)
    yf, dxf = gpu.cube_root_and_grad(cuda.to_device(x), cuda.to_device(g))
    assert same_bits(yf.copy_to_host(), y_ref) and same_bits(dxf.copy_to_host(), dx_ref)


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_select_form_the_sweep_times_gives_the_same_bits(dtype):
    # tools/gpu_check.py --sweep times the kernels built from the
    # select-based formulas too (kernels.cuda.FORMS): the same bits.
    from cbrtgrad.kernels.cuda import elementwise as kernels

    x = cases(dtype, 200)
    g = cases(dtype, 200)[::-1].copy()
    y, dx = cuda.device_array_like(x), cuda.device_array_like(x)
    with np.errstate(all="ignore"):
        y_ref, dx_ref = cpu.cube_root_and_grad(x, g)
    dt = np.dtype(dtype)
    fused = kernels.kernel("fused", dt, (dt, dt), form="select")
    fused[2, kernels.threads_per_block()](cuda.to_device(x), cuda.to_device(g), y, dx, x.size)
    assert same_bits(y.copy_to_host(), y_ref) and same_bits(dx.copy_to_host(), dx_ref)
    with pytest.raises(ValueError, match="form must be one of"):
        kernels.python_kernel("forward", dt, (dt,), form="fast")


def test_simulator_fma_is_exact():
    from cbrtgrad.kernels.cuda.primitives import exact_fma

    rng = np.random.default_rng(5)
    for a, b, c in rng.standard_normal((300, 3)) * 10.0 ** rng.integers(-5, 5, (300, 3)):
        expected = float(Fraction(a) * Fraction(b) + Fraction(c))
        assert float(exact_fma(a, b, c)) == expected
    assert math.isnan(exact_fma(np.inf, 0.0, 1.0))
    assert exact_fma(1e308, 10.0, 0.0) == np.inf
    assert str(exact_fma(-0.0, 2.0, -0.0)) == "-0.0"


def _nearest_float32(exact: Fraction) -> np.float32:
    # The float32 nearest to a rational, by exact distance (ties to even).
    near = np.float32(float(exact))
    around = [np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf))]
    return min(around, key=lambda v: (abs(Fraction(float(v)) - exact), int(v.view(np.int32)) & 1))


def test_simulator_fma32_is_exact_where_float64_would_round_twice():
    from cbrtgrad.kernels.cuda.primitives import exact_fma32

    # a b + c = 2^26 + 4 + 0.98 2^-27: float64 rounds it to 2^26 + 4, a float32
    # midpoint, which float32 then rounds to even, 2^26; the fma gives 2^26 + 8.
    a = np.float32(11865889 * 2.0**-22)
    b = np.float32(11860678 * 2.0**-23)
    c = np.float32(2.0**26)
    assert np.float32(np.float64(a) * np.float64(b) + np.float64(c)) == c
    assert exact_fma32(a, b, c) == c + np.float32(8.0)
    rng = np.random.default_rng(6)
    values = rng.standard_normal((300, 3)) * 10.0 ** rng.integers(-5, 5, (300, 3))
    for a, b, c in values.astype(np.float32):
        exact = Fraction(float(a)) * Fraction(float(b)) + Fraction(float(c))
        assert exact_fma32(a, b, c) == _nearest_float32(exact)
    assert math.isnan(exact_fma32(np.float32(np.inf), np.float32(0.0), np.float32(1.0)))
    big = np.float32(3e38)
    assert exact_fma32(big, np.float32(2.0), np.float32(0.0)) == np.inf
    assert str(exact_fma32(np.float32(-0.0), np.float32(2.0), np.float32(-0.0))) == "-0.0"
    assert exact_fma32(np.float32(np.inf), np.float32(1.0), np.float32(-3e38)) == np.inf


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
def test_float16_and_mixed_device_gradients_stay_on_the_device():
    # Device arrays have no astype: the public functions leave the cast to the
    # cuda kernels, which read float16 into the float32 kernel.
    y = np.array([2.0, -3.0, 0.5, 4.0], np.float16)
    g = np.array([12.0, 27.0, 0.75, 1.0], np.float16)
    dx = cbrtgrad.cbrt_grad(cuda.to_device(g), cuda.to_device(y))
    assert is_device_array(dx) and dx.dtype == np.float32
    assert same_bits(dx.copy_to_host(), cbrtgrad.cbrt_grad(g, y, backend="cpu"))
    mixed = cbrtgrad.cbrt_grad(cuda.to_device(g), cuda.to_device(y.astype(np.float64)))
    assert mixed.dtype == np.float64
    assert same_bits(mixed.copy_to_host(), cbrtgrad.cbrt_grad(g, y.astype(np.float64)))
    yf, dxf = cbrtgrad.cbrt_and_grad(cuda.to_device(y), cuda.to_device(g))
    assert is_device_array(yf) and yf.dtype == dxf.dtype == np.float32
    assert same_bits(dxf.copy_to_host(), cbrtgrad.cbrt_and_grad(y, g, backend="cpu")[1])


@pytest.mark.parametrize("name", ["cpu", "numpy", "parallel"])
def test_host_backends_refuse_simulator_device_arrays(name):
    x = cuda.to_device(np.ones(3))
    assert not get_backend(name).accepts(x)
    with pytest.raises(ValueError, match=f"backend '{name}' cannot take an input of type"):
        cbrtgrad.cbrt(x, backend=name)
    # The automatic choice sends them to the device, where the result stays.
    assert is_device_array(cbrtgrad.cbrt(x))


def _check_float16_readers(bits: np.ndarray) -> None:
    # A GPU's cvt.f32.f16 makes every nan the canonical one; the kernels read
    # float16 as bits and convert in integers, as numpy does (payloads kept).
    from cbrtgrad.kernels.cuda.elementwise import _half_readers
    from cbrtgrad.kernels.cuda.primitives import simulating

    want = bits.view(np.float16).astype(np.float32)
    if simulating():  # device functions run on the host only in the simulator
        to_single, to_double = _half_readers()
        got = np.array([to_single(b) for b in bits], dtype=np.float32)
        assert same_bits(got, want)
        with np.errstate(invalid="ignore"):  # signaling nans are quieted, by both
            wide = want[::97].astype(np.float64)
            assert same_bits(np.array([to_double(b) for b in bits[::97]]), wide)
        # Through a kernel too: nans with payloads, subnormals, infinities, zeros.
        h = bits[(bits % 61 == 0) | (bits >= 0xFC00) | (bits < 0x0400)].view(np.float16)
    else:
        h = bits.view(np.float16)  # all of them, on a GPU
    with np.errstate(all="ignore"):
        assert same_bits(cbrtgrad.cbrt(cuda.to_device(h)).copy_to_host(), cbrtgrad.cbrt(h))


def test_float16_bits_read_as_numpy_converts_them():
    # Every sign and exponent (subnormals, infinities and nans included) with
    # the mantissas at both ends and the middle, and every 61st pattern: the
    # conversion's cases. All 65,536 in the slow test below (12 s simulated).
    bits = np.arange(2**16, dtype=np.uint16)
    mantissa = bits & 0x3FF
    edges = np.isin(mantissa, [0, 1, 2, 0x1FF, 0x200, 0x201, 0x3FE, 0x3FF])
    _check_float16_readers(bits[edges | (bits % 61 == 0)])


@pytest.mark.slow
def test_float16_bits_read_as_numpy_converts_them_all_65536():
    _check_float16_readers(np.arange(2**16, dtype=np.uint16))


def test_stream_arguments_and_libraries():
    from cbrtgrad.backends import _device_arrays as arrays

    assert arrays.stream_handle(None) == 0 and arrays.stream_handle(7) == 7

    class Protocol:  # the CUDA stream protocol (CuPy, PyTorch, numba)
        def __cuda_stream__(self):  # type: ignore[no-untyped-def]
            return (0, 1234)

    assert arrays.stream_handle(Protocol()) == 1234
    for bad in (True, 1.5, "0", object()):
        with pytest.raises(TypeError, match="stream must be a numba, CuPy or PyTorch CUDA stream"):
            arrays.stream_handle(bad)
    assert arrays.library_of(cuda.to_device(np.ones(2))) == "numba"


@pytest.mark.filterwarnings("ignore:.*encountered in:RuntimeWarning")
@pytest.mark.parametrize("n", [5, 300])
def test_fused_outputs_may_be_its_inputs(n):
    # Each thread reads x[i] and g[i] before it writes y[i] and dx[i], in
    # full tiles and in the last one: y may be x or g, dx may be x or g.
    x = np.linspace(-27.0, 27.0, n)
    g = np.cos(x)
    with np.errstate(all="ignore"):
        y_ref, dx_ref = cpu.cube_root_and_grad(x, g)
    for y_is, dx_is in (("g", "buf"), ("x", "g"), ("buf", "x"), ("g", "x")):
        arrays = {"x": cuda.to_device(x), "g": cuda.to_device(g), "buf": cuda.device_array(n)}
        y, dx = gpu.cube_root_and_grad(arrays["x"], arrays["g"], out=(arrays[y_is], arrays[dx_is]))
        assert same_bits(y.copy_to_host(), y_ref), (y_is, dx_is)
        assert same_bits(dx.copy_to_host(), dx_ref), (y_is, dx_is)
