"""cbrtgrad.mlx: packaging, the build of its primitive, the dtype rules and bad input."""

from __future__ import annotations

import configparser
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import cbrtgrad

mx = pytest.importorskip("mlx.core")
cm = importlib.import_module("cbrtgrad.mlx")
from cbrtgrad.mlx import _build  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _python(code, timeout=120, **env):
    environment = dict(os.environ, **env)
    environment["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=environment, cwd=ROOT, timeout=timeout)  # fmt: skip


# -- packaging ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def fresh_interpreter():
    # One fresh process for both checks: cbrtgrad imported and used, then
    # cbrtgrad.mlx imported with mlx made unimportable.
    done = _python(
        "import sys, numpy as np, cbrtgrad\n"
        "cbrtgrad.cbrt(np.ones(3)); cbrtgrad.cbrt_grad(np.ones(3), np.ones(3))\n"
        "print(sorted(m for m in sys.modules if m == 'mlx' or m.startswith('mlx.')))\n"
        "sys.modules['mlx'] = None\n"
        "try:\n    import cbrtgrad.mlx\n"
        "except ImportError as exc:\n    print('ImportError:', exc)\n"
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_importing_cbrtgrad_never_imports_mlx(fresh_interpreter):
    assert fresh_interpreter[0] == "[]"


def test_import_without_mlx_names_the_extra(fresh_interpreter):
    line = fresh_interpreter[1]
    assert line.startswith("ImportError:") and "cbrtgrad[mlx]" in line


def test_sources_are_package_data():
    # The build reads its sources from the installed package: setup.cfg ships them.
    text = (ROOT / "setup.cfg").read_text()
    for name in _build.SOURCES:
        assert (_build._HERE / name).is_file()
        assert name in text.split("[options.package_data]", 1)[1].split("\n[", 1)[0]


_FIRST_CALL = (
    "import mlx.core as mx, cbrtgrad.mlx as cm\n"
    "try:\n    cm.cbrt(mx.array([8.0]))\n"
    "except cm.BuildError as exc:\n    print('BuildError:', exc)\n"
)
# A Python without pip's cmake package: not importable, no console script
# beside the interpreter (the build stops at the missing tools, before it
# would run that interpreter).
_NO_CMAKE_PACKAGE = "import sys\nsys.modules['cmake'] = None\nsys.executable = {python!r}\n"


def test_mlx_extra_brings_the_build_tools_pip_can():
    # nanobind and CMake from PyPI (a C++ compiler pip cannot bring); the cmake
    # floor meets CMakeLists.txt's minimum, and an installed cmake wheel meets it.
    from importlib.metadata import PackageNotFoundError, version

    from packaging.requirements import Requirement
    from packaging.version import Version

    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    lines = config["options.extras_require"]["mlx"].strip().splitlines()
    requirements = {r.name: r for r in map(Requirement, lines)}
    assert {"mlx", "nanobind", "cmake"} <= set(requirements)
    floors = [Version(s.version) for s in requirements["cmake"].specifier if s.operator == ">="]
    cmake_lists = (_build._HERE / "CMakeLists.txt").read_text()
    minimum = re.search(r"cmake_minimum_required\(VERSION ([\d.]+)\)", cmake_lists)
    assert minimum and floors and floors[0] >= Version(minimum.group(1))
    try:
        installed = version("cmake")
    except PackageNotFoundError:
        pytest.skip("pip's cmake package is not installed here")
    assert requirements["cmake"].specifier.contains(installed)


def test_missing_compiler_is_a_build_error_naming_it(tmp_path):
    # A machine without CMake and a C++ compiler (PATH holds neither, nor has
    # this Python pip's cmake package): the first call says what is missing
    # and how to install it instead of failing inside CMake.
    done = _python(
        _NO_CMAKE_PACKAGE.format(python=str(tmp_path / "python")) + _FIRST_CALL,
        PATH=str(tmp_path), CXX="", CBRTGRAD_CACHE_DIR=str(tmp_path / "cache"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "BuildError: cbrtgrad.mlx builds its MLX primitive" in done.stdout
    assert "CMake" in done.stdout and "python -m pip install cmake" in done.stdout
    assert "a C++ compiler" in done.stdout and "pip cannot install" in done.stdout


def test_missing_compiler_alone_is_named_where_pip_brought_cmake(tmp_path):
    # PATH without any tool, but pip's cmake package installed (the mlx
    # extra's): only the compiler is missing, and only it is named.
    pytest.importorskip("cmake")
    done = _python(_FIRST_CALL, PATH=str(tmp_path), CXX="",
                   CBRTGRAD_CACHE_DIR=str(tmp_path / "cache"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "BuildError: cbrtgrad.mlx builds its MLX primitive" in done.stdout
    assert "a C++ compiler" in done.stdout and "CMake" not in done.stdout


# -- CMake from pip -------------------------------------------------------------------------

_CMAKE_PROGRAMS = {"cmake", "ccmake", "cmake-gui", "cpack", "ctest"}


@pytest.fixture(scope="module")
def path_without_cmake(tmp_path_factory):
    """This PATH with no cmake on it, and every other program still there.

    NOTE: a system's cmake sits beside its compiler (/usr/bin), so its folder
    cannot just be dropped: it is replaced by links to its other programs.
    """
    folders = []
    for index, folder in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
        if not folder or not os.path.isdir(folder):
            continue
        if shutil.which("cmake", path=folder) is None:
            folders.append(folder)
            continue
        links = tmp_path_factory.mktemp(f"path{index}-without-cmake")
        for entry in os.scandir(folder):
            if entry.name not in _CMAKE_PROGRAMS:
                (links / entry.name).symlink_to(entry.path)
        folders.append(str(links))
    path = os.pathsep.join(folders)
    assert shutil.which("cmake", path=path) is None
    return path


@pytest.fixture
def wheel_bin():
    """The folder of pip's cmake package's programs (skips where it is not installed)."""
    return pytest.importorskip("cmake").CMAKE_BIN_DIR


def _is_in(program, folder):
    return program is not None and Path(program).resolve().parent == Path(folder).resolve()


def test_cmake_is_the_one_on_path_first(monkeypatch, wheel_bin, path_without_cmake, tmp_path):
    # On PATH first, whatever it is (a system's, a tool's folder put first).
    first = tmp_path / "first"
    first.mkdir()
    (first / "cmake").symlink_to(Path(wheel_bin) / "cmake")
    monkeypatch.setenv("PATH", os.pathsep.join([str(first), path_without_cmake]))
    assert _build.cmake() == str(first / "cmake")
    monkeypatch.setenv("PATH", os.pathsep.join([wheel_bin, path_without_cmake]))
    assert _is_in(_build.cmake(), wheel_bin)


def test_cmake_from_pip_where_path_has_none(monkeypatch, wheel_bin, path_without_cmake, tmp_path):
    monkeypatch.setenv("PATH", path_without_cmake)
    # pip's cmake package: its own program folder.
    assert _is_in(_build.cmake(), wheel_bin) and not _build._missing_tools()
    # Without the package importable: the console script beside the interpreter
    # (where pip put one; this interpreter's environment may have none).
    monkeypatch.setitem(sys.modules, "cmake", None)
    beside = Path(sys.executable).parent
    if (beside / "cmake").is_file():
        assert _is_in(_build.cmake(), beside)
    else:
        assert _build.cmake() is None
    # Neither: none, and the error says what to install.
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    assert _build.cmake() is None
    (missing,) = [m for m in _build._missing_tools() if "CMake" in m]
    assert "python -m pip install cmake" in missing and "cbrtgrad[mlx]" in missing


def test_builds_with_pips_cmake_where_path_has_none(path_without_cmake, wheel_bin, tmp_path):
    # A fresh build (an empty cache folder) on a PATH whose only cmake is the
    # one pip's package holds (not on PATH at all): it is found and builds,
    # the extension loads, and the build log shows which cmake ran.
    cache = tmp_path / "cache"
    done = _python(
        "from cbrtgrad.build import compile as _compile\nfrom cbrtgrad.mlx import _build\n"
        "module = _build.extension()\n"
        "print(sorted(n for n in dir(module) if not n.startswith('_')))\n"
        "print(_compile.built_kernels()[_build.BUILT_NAME])\n",
        timeout=600, PATH=path_without_cmake, CBRTGRAD_CACHE_DIR=str(cache),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["['cube_root', 'cube_root_grad']", "compiled"]
    (log,) = cache.rglob("build.log")
    commands = [line[2:].split()[0] for line in log.read_text().splitlines() if line[:2] == "$ "]
    assert len(commands) == 2 and all(_is_in(c, wheel_bin) for c in commands), commands


def test_extension_is_kept_under_its_key():
    # The cache folder is named by the digest of the sources and versions.
    if not cbrtgrad._config.settings().cache:
        pytest.skip("the kernel cache is off (CBRTGRAD_CACHE=0): built in a temporary folder")
    assert Path(_build.extension().__file__).parent.name == _build.key()


def _spoil(library, damage):
    # A build damaged after its record was written (a copy cut short, a disk
    # error): the loader would map past the end of a short file (SIGBUS).
    data = library.read_bytes()
    if damage == "truncated":
        library.write_bytes(data[: len(data) // 2])
    elif damage == "zero bytes":
        library.write_bytes(b"")
    else:
        library.write_bytes(data[:4096] + bytes([data[4096] ^ 0x01]) + data[4097:])


def _damaged_copy(tmp_path, damage):
    # The run's build, copied with its record into a cache of the test's own.
    built = Path(_build.extension().__file__)
    folder = tmp_path / "cache" / "cbrtgrad" / "mlx-extension" / built.parent.name
    shutil.copytree(built.parent, folder)
    _spoil(folder / built.name, damage)
    return folder / built.name


_WARNINGS = (
    "import warnings\n"
    "with warnings.catch_warnings(record=True) as caught:\n"
    "    warnings.simplefilter('always')\n"
    "    import mlx.core as mx, cbrtgrad.mlx as cm\n"
    "    from cbrtgrad.mlx import _build\n"
    "    {}\n"
    "for w in caught:\n    print(w.category.__name__, w.message)\n"
)


@pytest.mark.parametrize("damage", ["truncated", "zero bytes", "a byte flipped"])
def test_a_damaged_build_is_refused_before_it_is_loaded(tmp_path, damage):
    library = _damaged_copy(tmp_path, damage)
    done = _python(
        _WARNINGS.format("print(_build.EXTENSION.built())"),
        CBRTGRAD_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])  # 135: SIGBUS
    lines = done.stdout.splitlines()
    assert lines[0] == "None"
    (warning,) = lines[1:]
    assert warning.startswith(f"RuntimeWarning cbrtgrad: the MLX primitive build {library} ")


@pytest.mark.slow
def test_a_build_cut_short_is_built_again_by_the_first_call(tmp_path):
    # The first cm.cbrt of a process, with the build in the cache cut short
    # (which once killed the process with SIGBUS): built again, warning once.
    library = _damaged_copy(tmp_path, "truncated")
    done = _python(
        _WARNINGS.format("print(cm.cbrt(mx.array([27.0, -8.0])).tolist())"),
        CBRTGRAD_CACHE_DIR=str(tmp_path / "cache"),
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    lines = done.stdout.splitlines()
    assert lines[0] == "[3.0, -2.0]"
    (warning,) = lines[1:]
    assert warning.startswith(f"RuntimeWarning cbrtgrad: the MLX primitive build {library} is ")
    assert warning.endswith("(cut short or damaged): building it again")
    assert library.read_bytes() == Path(_build.extension().__file__).read_bytes()


# -- dtypes ---------------------------------------------------------------------------------


def test_dtypes_follow_mlx():
    # Integers and bools become float32, as mx.sqrt makes them; floats keep theirs.
    ints = mx.arange(4)
    assert cm.cbrt(ints).dtype == mx.sqrt(ints).dtype == mx.float32
    assert np.array_equal(np.array(cm.cbrt(ints)), cbrtgrad.cbrt(np.arange(4, dtype=np.float32)))
    assert cm.cbrt(mx.array([True, False])).dtype == mx.float32
    assert cm.cbrt(mx.array([27], mx.uint8)).item() == 3.0
    for dtype in (mx.float16, mx.bfloat16, mx.float32, mx.float64):
        assert cm.cbrt(mx.ones(2, dtype)).dtype == dtype
    bf = mx.ones(3, mx.bfloat16)
    assert cm.cbrt_grad(1.0, bf).dtype == mx.bfloat16  # a Python scalar takes y's dtype
    assert cm.cbrt_grad(mx.ones(3, mx.float32), bf).dtype == mx.float32  # mx.result_type
    assert cm.cbrt(mx.zeros((0, 3))).shape == (0, 3)
    assert cm.cbrt(-27.0).shape == () and cm.cbrt(-27.0).item() == -3.0


# -- bad input ------------------------------------------------------------------------------


def test_complex_is_a_type_error_naming_the_dtype():
    with pytest.raises(TypeError, match=r"cbrtgrad\.mlx\.cbrt: x has dtype mlx\.core\.complex64"):
        cm.cbrt(mx.ones(2, mx.complex64))
    with pytest.raises(TypeError, match=r"cbrtgrad\.mlx\.cbrt: x is a Python complex"):
        cm.cbrt(1j)


@pytest.mark.parametrize("argument", ["g", "y"])
def test_cbrt_grad_wrong_dtype_names_the_argument(argument):
    good, bad = mx.ones(3), mx.ones(3, mx.complex64)
    operands = {"g": good, "y": good, argument: bad}
    with pytest.raises(TypeError, match=rf"cbrt_grad: {argument} has dtype mlx\.core\.complex64"):
        cm.cbrt_grad(operands["g"], operands["y"])


def test_cbrt_grad_shape_mismatch_names_both():
    with pytest.raises(ValueError, match=r"g of shape \(3,\) and y of shape \(4,\)"):
        cm.cbrt_grad(mx.ones(3), mx.ones(4))
    with pytest.raises(ValueError, match=r"g of shape \(2, 3\) and y of shape \(2,\)"):
        mx.compile(cm.cbrt_grad)(mx.ones((2, 3)), mx.ones(2))


def test_something_that_is_no_array_is_a_type_error():
    with pytest.raises(TypeError, match=r"cbrtgrad\.mlx\.cbrt: x of type object"):
        cm.cbrt(object())


def test_mlx_ops_route_gives_the_same_bits(capsys):
    # tools/mlx_ops_route.py, the route not kept (the float32 forward in MLX's
    # own ops, eager and compiled): the bits, on a few thousand inputs.
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "mlx_ops_route", ROOT / "tools" / "mlx_ops_route.py"
    )
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main(["-n", "4000", "--repeat", "1", "--size", "1000"]) == 0
    out = capsys.readouterr().out
    assert re.findall(
        r"(?m)^  (MLX ops, eager|MLX ops, compiled|primitive): +0 results differ$", out
    ) == [
        "MLX ops, eager",
        "MLX ops, compiled",
        "primitive",
    ], out


def test_bad_mlx_parallel_min(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_MLX_PARALLEL_MIN", "many")
    cbrtgrad._config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_MLX_PARALLEL_MIN must be an integer"):
            cm.cbrt(mx.array([8.0]))
    finally:
        monkeypatch.delenv("CBRTGRAD_MLX_PARALLEL_MIN")
        cbrtgrad._config.settings.cache_clear()
    assert cbrtgrad._config.settings().mlx_parallel_min_size is None


def test_unknown_backend_setting_names_the_variable(monkeypatch):
    # CBRTGRAD_BACKEND decides the bridge's threads (as the api's backend):
    # a name the api refuses is refused here too.
    monkeypatch.delenv("CBRTGRAD_MLX_PARALLEL_MIN", raising=False)
    monkeypatch.setenv("CBRTGRAD_BACKEND", "gpu")
    cbrtgrad._config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_BACKEND: unknown backend 'gpu'; known"):
            cm.cbrt(mx.array([8.0]))
    finally:
        monkeypatch.delenv("CBRTGRAD_BACKEND")
        cbrtgrad._config.settings.cache_clear()
    assert cm.cbrt(mx.array([8.0])).item() == 2.0


@pytest.mark.skipif(mx.metal.is_available(), reason="a Metal GPU is here: nothing to refuse")
def test_metal_kernel_without_metal_is_mlx_s_error():
    # The generated kernel is made (its source is checked on the CPU in
    # tests/test_metal_source.py); running it needs a Metal GPU.
    from cbrtgrad.kernels.handlers.metal_source import metal_body
    from cbrtgrad.mlx import _metal

    assert _metal.metal_kernel() is _metal.metal_kernel()
    assert "metal::fma" in metal_body()
    with pytest.raises(RuntimeError, match=r"\[metal_kernel\] No Metal back-end"):
        cm.metal_cbrt(mx.array([-27.0, 8.0]))


def test_metal_kernel_is_float32_only():
    with pytest.raises(
        TypeError, match=r"metal_cbrt: x has dtype mlx\.core\.float16; .*float32 only"
    ):
        cm.metal_cbrt(mx.ones(2, mx.float16))
    assert cm.metal_cbrt(mx.zeros((0,))).shape == (0,)
