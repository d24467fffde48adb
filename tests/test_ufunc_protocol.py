"""numpy's ufunc protocol (NEP 13): containers keep their type, and the real ufuncs.

A container that computes numpy ufuncs itself (``__array_ufunc__``: xarray,
pint, pandas, a container of one's own) is handed cbrtgrad's ufunc by the
functions as numpy hands it ``np.cbrt``; ``cbrtgrad.ufunc`` offers the same
ufuncs to whatever takes a ufunc. Every call form is run through ``np.cbrt``
(the gradient through numpy's own ufuncs, ``g / (3 y y)``), ``cbrtgrad.cbrt``
and ``cbrtgrad.ufunc.cbrt`` and compared: type, the container's own facts
(coordinates, units, index), dtype, shape, exception class, and values
(cbrtgrad's correctly rounded bits; numpy's within its bound).
"""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import cbrtgrad as cg
from cbrtgrad import ufunc as cu
from cbrtgrad.arrays.kinds import computes_ufuncs
from cbrtgrad.verification.reference import cbrt_reference

from ._agreement import NP_CBRT_STEPS, steps_apart
from .backends._cases import same_bits

xr = pytest.importorskip("xarray")
pint = pytest.importorskip("pint")
pd = pytest.importorskip("pandas")

UREG = pint.UnitRegistry()


class Box:
    """A container with nothing but ``__array_ufunc__``: no ``__array__``, no dtype."""

    def __init__(self, values):
        self.values = values

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        self.seen = ufunc
        unbox = [i.values if isinstance(i, Box) else i for i in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(o.values if isinstance(o, Box) else o for o in kwargs["out"])
        return Box(getattr(ufunc, method)(*unbox, **kwargs))


class Refusing:
    """A container that opts out of numpy's ufuncs (``__array_ufunc__ = None``)."""

    __array_ufunc__ = None

    def __init__(self, values):
        self.values = values


#: name -> (make a container from a numpy array, its numpy data, what must survive).
CONTAINERS = {
    "xarray.DataArray": (
        lambda a: xr.DataArray(a, dims="x", coords={"x": np.arange(a.size)}, attrs={"k": 1}),
        lambda c: c.values,
        lambda c: (c.dims, c.coords.to_index().tolist()),
    ),
    "xarray.Dataset": (
        lambda a: xr.Dataset({"v": ("x", a)}, coords={"x": np.arange(a.size)}),
        lambda c: c["v"].values,
        lambda c: (list(c.data_vars), c.coords.to_index().tolist()),
    ),
    "pint.Quantity": (
        lambda a: UREG.Quantity(a, "meter ** 3"),
        lambda c: c.magnitude,
        lambda c: str(c.units),
    ),
    "pandas.Series": (
        lambda a: pd.Series(a, index=np.arange(a.size) * 2, name="s"),
        lambda c: c.to_numpy(),
        lambda c: (c.index.tolist(), c.name),
    ),
    "Box": (Box, lambda c: c.values, lambda c: None),
}
#: pint computes a ufunc it knows by name with its own numpy function (np.cbrt):
#: units kept, numpy's bits.
NUMPY_BITS = {"pint.Quantity"}


def _inputs(dtype, n=4096):
    # Random magnitudes over 60 decades (8 in half precision): on them np.cbrt is not always
    # correctly rounded (SVML and glibc alike), so cbrtgrad's bits tell.
    rng = np.random.default_rng(7)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-1000, 1000, n).astype(dtype)
    decades = 4 if np.dtype(dtype).itemsize == 2 else 30
    x = rng.standard_normal(n) * 10.0 ** rng.integers(-decades, decades, n)
    x[:4] = [0.0, -0.0, 27.0, -8.0]
    return x.astype(dtype)


def _moderate(dtype, n, seed=11):
    # Gradient operands away from 0 and overflow: the checks are on bits, not IEEE flags.
    rng = np.random.default_rng(seed)
    magnitude = 10.0 ** rng.uniform(-6, 6, n)
    return (magnitude * rng.choice([-1.0, 1.0], n)).astype(dtype)


def _correct(x, dtype):
    # The correctly rounded cube root of x computed in ``dtype`` (x cast to it first).
    hi, _ = cbrt_reference(np.asarray(x).astype(dtype))
    return hi.astype(dtype)


def _outcome(call):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a UnitStrippedWarning is a failure
        try:
            return call(), None
        except Exception as error:  # noqa: BLE001 - the class is what is compared
            return None, type(error)


def _same_container(got, expected, name):
    make, data, facts = CONTAINERS[name]
    assert type(got) is type(expected)
    assert facts(got) == facts(expected)
    assert np.shape(data(got)) == np.shape(data(expected))


@pytest.mark.parametrize("name", list(CONTAINERS))
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, np.int16, np.int64])
@pytest.mark.parametrize(
    "form",
    [
        pytest.param({}, id="plain"),
        pytest.param({"dtype": np.float64}, id="dtype=float64"),
        pytest.param({"dtype": np.float32}, id="dtype=float32"),
    ],
)
def test_cbrt_of_a_container_is_numpys_call_with_cbrtgrads_bits(name, dtype, form):
    make, data, facts = CONTAINERS[name]
    x = _inputs(dtype)
    expected, np_error = _outcome(lambda: np.cbrt(make(x), **form))
    for label, function in (("cbrtgrad.cbrt", cg.cbrt), ("cbrtgrad.ufunc.cbrt", cu.cbrt)):
        got, error = _outcome(lambda f=function: f(make(x), **form))
        assert error is np_error, label
        if error is not None:
            continue
        _same_container(got, expected, name)
        values = np.asarray(data(got))
        # The dtype: the function's one rule on the numpy data where the
        # container has a numpy dtype (a Dataset, a Box have none); else the
        # ufunc's loop selection; pint's np.cbrt's own for the ufunc.
        if name in NUMPY_BITS and function is cu.cbrt:
            dt = np.cbrt(x, **form).dtype
        elif function is cg.cbrt and isinstance(getattr(make(x), "dtype", None), np.dtype):
            dt = cg.cbrt(x, **form).dtype
        else:
            dt = cu.cbrt(x, **form).dtype
        assert values.dtype == dt, label
        if dt not in NP_CBRT_STEPS:
            continue  # float16: pint's np.cbrt, numpy's own loop
        reference = _correct(x, dt)
        if name in NUMPY_BITS:
            assert (steps_apart(values, reference) <= NP_CBRT_STEPS[values.dtype]).all()
        else:
            assert same_bits(values, reference), label
    if np_error is None:
        numpy_values = np.asarray(data(expected))
        if numpy_values.dtype in NP_CBRT_STEPS:  # float16 results: numpy's own loop
            reference = _correct(x, numpy_values.dtype)
            assert (steps_apart(numpy_values, reference) <= NP_CBRT_STEPS[reference.dtype]).all()


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_an_unsupported_dtype_is_refused_as_numpy_refuses_it(name):
    make, _, _ = CONTAINERS[name]
    x = np.array([8.0 + 1j, 27.0])
    _, np_error = _outcome(lambda: np.cbrt(make(x)))
    for function in (cg.cbrt, cu.cbrt):
        _, error = _outcome(lambda f=function: f(make(x)))
        assert error is np_error is TypeError


@pytest.mark.parametrize("name", ["xarray.DataArray", "pint.Quantity", "Box"])
def test_out_is_handed_over_as_numpy_hands_it(name):
    # xarray refuses its objects as out= (NotImplementedError); pint and the
    # Box take them: the same answer as np.cbrt's, with cbrtgrad's bits written.
    make, data, _ = CONTAINERS[name]
    x = _inputs(np.float64, 64)
    targets = {f: make(np.zeros(64)) for f in (np.cbrt, cg.cbrt, cu.cbrt)}
    outcomes = {f: _outcome(lambda f=f: f(make(x), out=targets[f])) for f in targets}
    np_error = outcomes[np.cbrt][1]
    for function in (cg.cbrt, cu.cbrt):
        assert outcomes[function][1] is np_error
        if np_error is None and name not in NUMPY_BITS:
            assert same_bits(np.asarray(data(targets[function])), _correct(x, np.float64))


@pytest.mark.parametrize("name", [n for n in CONTAINERS if n not in NUMPY_BITS])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("g_kind", ["container", "ndarray", "scalar"])
def test_cbrt_grad_of_containers_is_the_expressions_call(name, dtype, g_kind):
    make, data, _ = CONTAINERS[name]
    y = cg.cbrt(_moderate(dtype, 256))
    g_plain = _moderate(dtype, 256, seed=12)
    g = {"container": make(g_plain), "ndarray": g_plain, "scalar": 1.0}[g_kind]
    g_values = {"container": g_plain, "ndarray": g_plain, "scalar": 1.0}[g_kind]
    # numpy's ufuncs under the same protocol: g / (3 y y).
    expected, np_error = _outcome(lambda: np.divide(g, np.multiply(3, np.multiply(make(y), y))))
    for function in (cg.cbrt_grad, cu.cbrt_grad):
        got, error = _outcome(lambda f=function: f(g, make(y)))
        assert error is np_error
        if error is None:
            _same_container(got, expected, name)
            values = np.asarray(data(got))
            assert values.dtype == np.asarray(data(expected)).dtype
            assert same_bits(values, cg.cbrt_grad(g_values, y))


def test_pint_refuses_the_gradient_it_does_not_know():
    # pint takes only the ufuncs it knows by name: numpy's TypeError for
    # cbrt_grad, never units stripped (warnings are errors here).
    y = UREG.Quantity(np.array([2.0, 3.0]), "meter")
    with pytest.raises(TypeError, match="cbrt_grad"):
        cg.cbrt_grad(np.ones(2), y)


def test_cbrt_and_grad_of_a_container_is_its_two_ufuncs():
    x = _moderate(np.float64, 256)
    g = _moderate(np.float64, 256, seed=12)
    make = CONTAINERS["xarray.DataArray"][0]
    y, dx = cg.cbrt_and_grad(make(x), make(g))
    expected_y, expected_dx = cg.cbrt_and_grad(x, g)
    for got, expected in ((y, expected_y), (dx, expected_dx)):
        assert type(got) is xr.DataArray and got.dims == ("x",)
        assert same_bits(got.values, expected)
    box_y, box_dx = cg.cbrt_and_grad(Box(x), g)
    assert type(box_y) is Box and type(box_dx) is Box
    assert same_bits(box_dx.values, expected_dx)


def test_a_container_is_handed_the_public_ufunc_and_keeps_large_arrays():
    box = Box(np.array([8.0]))
    cg.cbrt(box)
    assert box.seen is cu.cbrt
    cg.cbrt_grad(np.ones(1), box)
    assert box.seen is cu.cbrt_grad
    # Above the size where the automatic choice goes parallel, as small.
    x = _inputs(np.float64, 2_000_000)
    da = xr.DataArray(x.reshape(1000, 2000), dims=("a", "b"), coords={"a": np.arange(1000)})
    got = cg.cbrt(da)
    assert type(got) is xr.DataArray and got.dims == ("a", "b") and got.coords.equals(da.coords)
    assert same_bits(got.values, cg.cbrt(x).reshape(1000, 2000))


def test_opting_out_is_refused_as_numpy_refuses_it():
    r = Refusing(np.array([8.0]))
    for function in (np.cbrt, cg.cbrt, cu.cbrt):
        with pytest.raises(TypeError, match="does not support ufuncs"):
            function(r)
    with pytest.raises(TypeError, match="does not support ufuncs"):
        cg.cbrt_grad(np.ones(1), r)


@pytest.mark.parametrize("name", list(CONTAINERS))
def test_where_and_a_backend_with_a_container_are_clear_errors(name):
    make, _, _ = CONTAINERS[name]
    x = make(np.array([8.0, 27.0]))
    with pytest.raises(TypeError, match=rf"cbrt takes no where= with a {type(x).__name__}"):
        cg.cbrt(x, where=np.array([True, False]))
    with pytest.raises(TypeError, match=r"cbrt_grad takes no where="):
        cg.cbrt_grad(np.ones(2), x, where=False)
    with pytest.raises(ValueError, match=r"backend='parallel' cannot run a"):
        cg.cbrt(x, backend="parallel")
    # backend="cpu" is the ufunc's own: accepted.
    assert type(cg.cbrt(x, backend="cpu")) is type(x)


def test_arrays_with_their_own_routes_are_not_handed_over():
    torch = pytest.importorskip("torch")
    dask_array = pytest.importorskip("dask.array")
    x = np.array([8.0, 27.0])
    masked = np.ma.masked_array(x, [False, True])
    lazy = dask_array.from_array(x, chunks=1)
    tensor = cg.Tensor(x)
    for value in (x, masked, lazy, tensor, torch.tensor(x), x.view(np.recarray), 2.0, [8.0]):
        assert not computes_ufuncs(value)
    assert type(cg.cbrt(masked)) is np.ma.MaskedArray and cg.cbrt(masked).mask.tolist() == [
        False,
        True,
    ]
    assert type(cg.cbrt(lazy)) is type(lazy)
    assert type(cg.cbrt(tensor)) is cg.Tensor
    assert all(computes_ufuncs(make(x)) for make, _, _ in CONTAINERS.values())


# -- cbrtgrad.ufunc: real numpy ufuncs ------------------------------------------------


@pytest.mark.parametrize(
    ("ours", "theirs"), [(lambda: cu.cbrt, np.cbrt), (lambda: cu.cbrt_grad, np.arctan2)]
)
def test_the_ufuncs_are_numpy_ufuncs(ours, theirs):
    ufunc = ours()
    assert isinstance(ufunc, np.ufunc)
    assert (ufunc.nin, ufunc.nout, ufunc.nargs) == (theirs.nin, theirs.nout, theirs.nargs)
    assert ufunc.__name__ in ("cbrt", "cbrt_grad") and ufunc.identity is None
    assert ufunc.types == (["f->f", "d->d"] if ufunc.nin == 1 else ["ff->f", "dd->d"])
    # The methods as numpy has them for a ufunc of this arity without an identity.
    operands = (np.array([8.0, 27.0, 64.0]),) * ufunc.nin
    for method in ("reduce", "accumulate", "outer", "reduceat"):
        args = operands if method != "reduceat" else (operands[0], [0, 2])
        _, error = _outcome(lambda m=method, a=args: getattr(ufunc, m)(*a[: max(1, ufunc.nin)]))
        _, np_error = _outcome(lambda m=method, a=args: getattr(theirs, m)(*a[: max(1, ufunc.nin)]))
        assert error is np_error, method


def test_reduce_of_cbrt_is_refused_with_numpys_words():
    with pytest.raises(ValueError, match="reduce only supported for binary functions") as ours:
        cu.cbrt.reduce(np.array([8.0, 27.0]))
    with pytest.raises(ValueError) as numpys:
        np.cbrt.reduce(np.array([8.0, 27.0]))
    assert str(ours.value) == str(numpys.value)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_at_scatters_cbrtgrads_bits_as_np_cbrt_at(dtype):
    x = _inputs(dtype, 64)
    indices = np.array([3, 5, 5, 63, 0])  # 5 twice: applied twice, as numpy's .at does
    ours, theirs = x.copy(), x.copy()
    cu.cbrt.at(ours, indices)
    np.cbrt.at(theirs, indices)
    expected = x.copy()
    for i in indices:
        expected[i] = cg.cbrt(expected[i : i + 1])[0]
    assert same_bits(ours, expected)
    assert (steps_apart(theirs, expected) <= 2 * NP_CBRT_STEPS[np.dtype(dtype)]).all()
    g = np.ones(64, dtype)
    y = cg.cbrt(np.abs(x) + 1).astype(dtype)
    scattered = y.copy()
    cu.cbrt_grad.at(scattered, [1, 2], g[:2])  # .at(a, i, b): a[i] = cbrt_grad(a[i], b)
    assert same_bits(scattered[1:3], cg.cbrt_grad(y[1:3], g[:2]))


@pytest.mark.parametrize(
    ("dtype", "loop"),
    [(np.float16, "float32"), (np.int8, "float32"), (np.uint16, "float32"), (np.bool_, "float32"),
     (np.int32, "float64"), (np.int64, "float64"), (np.float32, "float32")],
)  # fmt: skip
def test_numpys_loop_selection_picks_the_dtype(dtype, loop):
    x = np.array([1, 0, 1], dtype)
    got = cu.cbrt(x)
    assert got.dtype == loop
    assert same_bits(got, cg.cbrt(x.astype(loop)))
    assert cu.cbrt(x, dtype=np.float64).dtype == np.float64


def test_apply_ufunc_with_the_ufunc_keeps_coordinates_and_bits():
    x = _moderate(np.float32, 4096)
    da = xr.DataArray(x, dims="x", coords={"x": np.arange(x.size)})
    got = xr.apply_ufunc(cu.cbrt, da)
    expected = xr.apply_ufunc(np.cbrt, da)
    assert type(got) is type(expected) and got.coords.equals(expected.coords)
    assert got.dtype == expected.dtype == np.float32
    assert same_bits(got.values, cg.cbrt(x))
    grad = xr.apply_ufunc(cu.cbrt_grad, xr.ones_like(got), got)
    assert same_bits(grad.values, cg.cbrt_grad(np.ones_like(x), cg.cbrt(x)))


def test_the_ufuncs_match_the_functions_on_plain_arrays():
    for dtype in (np.float64, np.float32):
        x = _moderate(dtype, 4096)
        assert same_bits(cu.cbrt(x), cg.cbrt(x))
        y = cg.cbrt(x)
        assert same_bits(cu.cbrt_grad(x, y), cg.cbrt_grad(x, y))
        out = np.empty_like(x)
        assert cu.cbrt(x, out=out) is out and same_bits(out, cg.cbrt(x))
        assert same_bits(cu.cbrt(x[::-3]), cg.cbrt(x[::-3]))


def test_the_module_builds_nothing_at_import_and_names_its_attributes():
    code = (
        "import sys, cbrtgrad, cbrtgrad.ufunc as u; "
        "assert 'numba' not in sys.modules, 'numba imported'; "
        "assert {'cbrt', 'cbrt_grad'} <= set(dir(u)); "
        "assert 'numba' not in sys.modules, 'dir built a ufunc'; "
        "import numpy as np; assert isinstance(u.cbrt, np.ufunc); print('ok')"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    with pytest.raises(AttributeError, match="has no attribute 'cube_root'"):
        cu.cube_root  # noqa: B018 - the attribute read is the test


def test_the_ufuncs_take_no_where():
    # numba-built ufuncs refuse where= (numpy's ValueError); the functions take it.
    x, mask = np.array([8.0, 27.0]), np.array([True, False])
    with pytest.raises(ValueError, match="ARRAYMASK"):
        cu.cbrt(x, out=np.zeros(2), where=mask)
    assert cg.cbrt(x, out=np.zeros(2), where=mask).tolist() == [2.0, 0.0]
