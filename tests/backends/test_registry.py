"""The registry, the environment variable and the automatic choice."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import cbrtgrad
from cbrtgrad import _config
from cbrtgrad.backends import (
    Backend,
    BackendUnavailableError,
    _catalog,
    _registry,
    auto_choice,
    availability,
    available,
    describe_auto_choice,
    get_backend,
    known,
    use_backend,
)


@pytest.fixture
def env(monkeypatch):
    """Set environment variables and re-read the settings around a test."""

    def set_env(**values: str) -> None:
        for key, value in values.items():
            monkeypatch.setenv(key, value)
        _config.settings.cache_clear()

    yield set_env
    monkeypatch.undo()
    _config.settings.cache_clear()


def test_every_backend_is_known_and_probes_without_raising():
    assert set(known()) == {"cpu", "numpy", "parallel", "cuda", "accelerate"}
    for name in known():
        status = availability(name)
        assert isinstance(status.available, bool) and status.reason
    assert {"cpu", "numpy", "parallel"} <= set(available())


def test_backends_implement_the_protocol():
    for name in available():
        backend = get_backend(name)
        assert isinstance(backend, Backend)
        assert backend.name == name


def test_unknown_name_lists_known_ones():
    with pytest.raises(ValueError, match="unknown backend 'gpu'.*cpu, numpy, parallel, cuda"):
        get_backend("gpu")
    with pytest.raises(ValueError, match="unknown backend"):
        cbrtgrad.cbrt(np.ones(2), backend="tpu")
    with pytest.raises(TypeError, match="backend must be a str"):
        get_backend(3)  # type: ignore[arg-type]


@pytest.mark.skipif(sys.platform == "darwin", reason="Accelerate exists on macOS")
def test_unavailable_backend_says_why(env):
    env(CBRTGRAD_ACCELERATE=_config.ACCELERATE_DEFAULT)
    with pytest.raises(BackendUnavailableError, match="'accelerate' is unavailable: not macOS"):
        get_backend("accelerate")
    env(CBRTGRAD_ACCELERATE="/nonexistent/libvforce.so")
    with pytest.raises(BackendUnavailableError, match="cannot load vvcbrtf/vvcbrt"):
        cbrtgrad.cbrt(np.ones(2), backend="accelerate")


def test_environment_variable_selects_a_backend(env):
    x = np.array([8.0, 1.0])
    env(CBRTGRAD_BACKEND="numpy")
    assert _registry.resolve(None, x).name == "numpy"
    with use_backend("parallel"):
        assert _registry.resolve(None, x).name == "parallel"
        assert _registry.resolve("cpu", x).name == "cpu"
    env(CBRTGRAD_BACKEND="nonsense")
    with pytest.raises(ValueError, match="unknown backend 'nonsense'"):
        cbrtgrad.cbrt(x)


def test_auto_choice_by_size(env):
    assert auto_choice(np.ones(10)).name == "cpu"
    assert auto_choice(2.0).name == "cpu"
    assert auto_choice([1.0, 2.0]).name == "cpu"
    env(CBRTGRAD_PARALLEL_MIN="100")
    assert auto_choice(np.ones(100)).name == "parallel"
    assert auto_choice(np.ones(99)).name == "cpu"
    # Only numpy arrays go to parallel: a list is converted anyway, by the cpu ufunc.
    assert auto_choice([1.0] * 200).name == "cpu"
    x = np.linspace(-9, 9, 1000)
    assert np.array_equal(cbrtgrad.cbrt(x), get_backend("cpu").cube_root(x))


def test_auto_choice_sends_device_arrays_to_cuda():
    cuda = pytest.importorskip("numba.cuda")
    device = cuda.to_device(np.ones(4))
    assert auto_choice(device).name == "cuda"
    assert cbrtgrad.cbrt(device).copy_to_host().tolist() == [1.0] * 4


def test_auto_choice_on_macos_uses_accelerate(env, monkeypatch, vforce_library):
    env(CBRTGRAD_ACCELERATE=str(vforce_library.path))
    monkeypatch.setattr(sys, "platform", "darwin")
    assert auto_choice(np.ones(3, np.float32)).name == "accelerate"
    assert auto_choice(np.float64(2.0)).name == "accelerate"
    assert auto_choice(np.ones(3, np.float16)).name == "cpu"
    assert auto_choice(np.ones(3, np.int64)).name == "cpu"
    lines = describe_auto_choice()
    assert any("-> accelerate" in line for line in lines)
    env(CBRTGRAD_ACCELERATE="/nonexistent/lib.dylib")
    assert auto_choice(np.ones(3, np.float32)).name == "cpu"
    assert any("accelerate unavailable" in line for line in describe_auto_choice())


def test_describe_auto_choice(env):
    env(CBRTGRAD_PARALLEL_MIN="5000")
    lines = describe_auto_choice()
    assert all(isinstance(line, str) and line for line in lines)
    assert any("5,000 elements -> parallel" in line for line in lines)
    assert any(line.startswith("device arrays -> cuda") for line in lines)
    env(CBRTGRAD_BACKEND="numpy")
    assert "CBRTGRAD_BACKEND='numpy'" in describe_auto_choice()[0]


def test_host_array_to_cuda_needs_an_explicit_copy():
    pytest.importorskip("numba.cuda")
    with pytest.raises(ValueError, match="copy host arrays explicitly"):
        cbrtgrad.cbrt(np.ones(3), backend="cuda")
    with pytest.raises(TypeError, match="x is a host ndarray.*copy_host=True"):
        get_backend("cuda").cube_root(np.ones(3))


def test_availability_is_asked_again_after_the_environment_changes(env):
    # get_backend caches only the backends that are always available: one
    # whose availability depends on the environment (accelerate's library
    # path) is probed on every call, so a working library once does not hide a
    # missing one later.
    env(CBRTGRAD_ACCELERATE="/nonexistent/libvforce.so")
    for _ in range(2):
        with pytest.raises(BackendUnavailableError, match="cannot load"):
            get_backend("accelerate")
    assert "accelerate" not in _catalog._ready
    assert get_backend("cpu") is get_backend("cpu")
    assert "cpu" in _catalog._ready


def test_cuda_once_available_is_not_probed_again():
    # The cuda backend caches a successful probe (a process cannot lose its
    # GPU), so get_backend keeps it too: a call on a device array skips the
    # name's parsing and the probe.
    pytest.importorskip("numba.cuda")
    found = get_backend("cuda")  # the simulator here: available
    assert _catalog._ready.get("cuda") is found
    assert get_backend("cuda") is found


def test_one_rules_table_chooses_and_describes(env):
    # auto_choice and describe_auto_choice read the same table, rule by rule.
    from cbrtgrad.backends._auto import RULES

    env(CBRTGRAD_PARALLEL_MIN="100", CBRTGRAD_BACKEND="auto")
    lines = describe_auto_choice()
    assert len(lines) == len(RULES) + 1  # and the note on dask arrays
    for rule, line in zip(RULES, lines, strict=False):
        assert rule.backend in line
    assert [r.backend for r in RULES][-2:] == ["parallel", "cpu"]
    assert auto_choice(np.ones(100)).name == "parallel" and "100 elements" in lines[2]
