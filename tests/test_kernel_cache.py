"""Lazy compilation and the on-disk kernel cache (cbrtgrad/build/cache.py), in fresh processes.

Every process here gets its own temporary cache folder (``tmp_path``); none
touches the user's cache. Which kernels a process compiled or loaded is read
from :func:`cbrtgrad.build.compile.built_kernels` and from the numba dispatchers
themselves; nothing is timed (the speed goals are in asv_benches and
``cbrtgrad bench``).
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import numba
import numpy as np
import pytest

import cbrtgrad
from cbrtgrad import _config
from cbrtgrad.build import cache as _cache
from cbrtgrad.build import locator as _locator
from cbrtgrad.kernels.cpu import catalog as cpu
from cbrtgrad.kernels.cpu import ufuncs as cpu_ufuncs

ROOT = Path(__file__).resolve().parent.parent

#: Runs one call in a fresh process; prints what it built and a digest of the result.
_CALL = """
import hashlib, json, sys
import numpy as np
import cbrtgrad
from cbrtgrad.build import compile as _compile
from cbrtgrad.kernels.cpu import blocks, grad_blocks
dtype = np.dtype(sys.argv[1])
x = np.concatenate([np.linspace(-1e3, 1e3, 4099), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]])
y = cbrtgrad.cbrt(x.astype(dtype))
functions = {
    "forward_block_f32": blocks.forward_block_f32,
    "forward_block_f64": blocks.forward_block_f64,
    "grad_block": grad_blocks.grad_block,
    "cube_root_f32": blocks.FORMULAS.cube_root_f32,
    "cube_root_grad_f64": blocks.FORMULAS.cube_root_grad_f64,
}
others = {name: len(function.signatures) for name, function in functions.items()}
print(json.dumps({"built": _compile.built_kernels(), "compiled_functions": others,
                  "digest": hashlib.sha256(y.tobytes()).hexdigest()}))
"""


def _digest(dtype: str) -> str:
    x = np.concatenate([np.linspace(-1e3, 1e3, 4099), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30]])
    return hashlib.sha256(cbrtgrad.cbrt(x.astype(dtype)).tobytes()).hexdigest()


def _env(cache: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CBRTGRAD_", "NUMBA_CPU"))}
    env.update({"CBRTGRAD_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT), **extra})
    return env


def _call(cache: Path, dtype: str, cwd: Path = ROOT, **extra: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CALL, dtype],
        capture_output=True,
        text=True,
        env=_env(cache, **extra),
        cwd=cwd,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_first_float64_call_compiles_only_its_loop_then_loads_it(tmp_path):
    first = _call(tmp_path, "float64")
    # Only the float64 forward loop, and only what it calls: no float32
    # kernel, no gradient, no parallel loop.
    assert first["built"] == {"ufunc cube_root float64": "compiled"}
    assert first["compiled_functions"]["forward_block_f64"] == 1
    for name in ("forward_block_f32", "grad_block", "cube_root_f32", "cube_root_grad_f64"):
        assert first["compiled_functions"][name] == 0, name
    assert first["digest"] == _digest("float64")
    # A second process loads it from the cache: nothing compiled, same bits.
    second = _call(tmp_path, "float64")
    assert second["built"] == {"ufunc cube_root float64": "loaded"}
    assert second["compiled_functions"]["forward_block_f64"] == 0
    assert second["digest"] == first["digest"]
    # One folder for this key, holding the one kernel (its loop and its block
    # entry, kernels/cpu/ufunc_loops.py) and what it was keyed on.
    (folder,) = [p for p in (tmp_path / "cbrtgrad").iterdir() if p.is_dir()]
    suffixes = [".json", ".nbc", ".nbc", ".nbi", ".nbi"]
    assert sorted(p.suffix for p in folder.iterdir()) == suffixes
    # Named as cbrtgrad looks for them (``cbrtgrad info``, ``warm``): numba's scheme.
    assert sorted(folder.glob("*.nbi")) == sorted(
        _cache.index_path(function, "float64", folder)
        for function in (cpu_ufuncs.forward_loop_f64, cpu_ufuncs.forward_f64_at)
    )
    described = json.loads((folder / "key.json").read_text())
    assert {"cpu", "features", "vector_width", "numba", "llvmlite", "source"} <= set(described)


def test_a_cache_written_under_one_setting_is_not_used_under_another(tmp_path):
    assert _call(tmp_path, "float32")["built"] == {"ufunc cube_root float32": "compiled"}
    settings = [
        {"CBRTGRAD_VECTOR_WIDTH": "256"},
        # Another CPU: numba compiles for the named one (plain x86-64 or
        # aarch64 generic code runs on this machine too).
        {"NUMBA_CPU_NAME": "generic"},
    ]
    # numba itself refuses an index written under another key: the entry of
    # the first folder, copied into the next setting's, is not loaded there.
    (first,) = [p for p in (tmp_path / "cbrtgrad").iterdir() if p.is_dir()]
    second = Path(_folder_of(tmp_path, **settings[0]))  # made, with its key.json
    for entry in first.glob("*.nb?"):
        shutil.copy(entry, second / entry.name)
    for setting in settings:
        other = _call(tmp_path, "float32", **setting)
        assert other["built"] == {"ufunc cube_root float32": "compiled"}, setting
        assert other["digest"] == _digest("float32")
    # Each setting has its own folder, and each is warm for its own setting.
    assert len([p for p in (tmp_path / "cbrtgrad").iterdir() if p.is_dir()]) == 3
    assert _call(tmp_path, "float32", **settings[1])["built"] == {
        "ufunc cube_root float32": "loaded"
    }
    assert _call(tmp_path, "float32")["built"] == {"ufunc cube_root float32": "loaded"}


def _folder_of(cache: Path, **extra: str) -> str:
    script = "from cbrtgrad.build import cache as _cache; print(_cache.directory())"
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env=_env(cache, **extra),
        cwd=ROOT,
        check=True,
    )
    return done.stdout.strip()


def test_a_change_to_the_kernels_source_is_a_new_key(tmp_path):
    cache = tmp_path / "cache"
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "cbrtgrad", copy / "cbrtgrad", ignore=shutil.ignore_patterns("*.pyc"))
    assert _call(cache, "float32", cwd=copy, PYTHONPATH=str(copy))["built"] == {
        "ufunc cube_root float32": "compiled"
    }
    # A comment in a module the kernel calls (not the file of the cached
    # function, which is all numba's own cache=True would look at).
    with open(copy / "cbrtgrad" / "kernels" / "formulas" / "scalar.py", "a") as handle:
        handle.write("\n# a change\n")
    again = _call(cache, "float32", cwd=copy, PYTHONPATH=str(copy))
    assert again["built"] == {"ufunc cube_root float32": "compiled"}


def test_the_key_covers_every_module_of_the_kernels_and_build_folders(monkeypatch, tmp_path):
    # The key's sources are found by walking the folders: a change to any
    # module there, or a new module, is a new key; the layers above (the
    # engine, the bridges) are not part of it.
    copy = tmp_path / "cbrtgrad"
    shutil.copytree(ROOT / "cbrtgrad", copy, ignore=shutil.ignore_patterns("*.pyc", "*.so"))
    monkeypatch.setattr(_cache, "_PACKAGE", copy)

    def digest() -> str:
        _cache._source_digest.cache_clear()
        return _cache._source_digest()

    try:
        before = digest()
        folders = sorted(
            {p.parent for p in (copy / "kernels").rglob("*.py")}
            | {p.parent for p in (copy / "build").rglob("*.py")}
        )
        assert {f.relative_to(copy).as_posix() for f in folders} >= {
            "build",
            "kernels",
            "kernels/cpu",
            "kernels/cuda",
            "kernels/formulas",
            "kernels/handlers",
        }
        for folder in folders:
            module = sorted(folder.glob("*.py"))[0]
            kept = module.read_text()
            module.write_text(kept + "\n# a change\n")
            assert digest() != before, module
            module.write_text(kept)
            assert digest() == before
            added = folder / "new_module.py"
            added.write_text("")
            assert digest() != before, added
            added.unlink()
        (copy / "engine" / "new_module.py").write_text("")
        assert digest() == before
    finally:
        _cache._source_digest.cache_clear()


def test_cache_off_compiles_and_writes_nothing(tmp_path):
    off = _call(tmp_path, "float32", CBRTGRAD_CACHE="0")
    assert off["built"] == {"ufunc cube_root float32": "compiled"}
    assert not (tmp_path / "cbrtgrad").exists()


#: Imports (compiling nothing: cbrtgrad compiles on first use), says it is
#: ready, waits for the go file, then runs _CALL's work, so that all start at once.
_RACER = (
    """
import os, sys, time
import numpy, cbrtgrad
from cbrtgrad.kernels.cpu import blocks
open(sys.argv[3], "w").close()
go = sys.argv[2]
while not os.path.exists(go):
    time.sleep(0.005)
"""
    + _CALL
)


def _race(cache: Path, dtypes: list[str], go: Path) -> list[dict]:
    ready = [go.with_name(f"ready-{number}") for number in range(len(dtypes))]
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _RACER, dtype, str(go), str(flag)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(cache),
            cwd=ROOT,
        )
        for dtype, flag in zip(dtypes, ready, strict=True)
    ]
    # The go once every interpreter has started and imported (or one has died).
    deadline = time.monotonic() + 120
    while not all(flag.exists() for flag in ready):
        if any(proc.poll() is not None for proc in procs) or time.monotonic() > deadline:
            break
        time.sleep(0.005)
    go.touch()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        # A crash (the segfaults of numba issue 4807) is a non-zero status.
        assert proc.returncode == 0, err[-2000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    go.unlink()
    for flag in ready:
        flag.unlink()
    return results


def _check_round(results: list[dict], dtypes: list[str]) -> None:
    for result, dtype in zip(results, dtypes, strict=True):
        assert result["digest"] == _digest(dtype)
        assert set(result["built"]) == {f"ufunc cube_root {dtype}"}


def test_processes_write_and_read_one_cache_at_once(tmp_path):
    # Round 1: two cold processes (one per core here) compile and save the
    # same kernel at once; round 2: two load it at once. Every process must
    # finish with the right bits. (The slow test below runs four, mixes
    # dtypes and repeats.)
    go = tmp_path / "go"
    cache = tmp_path / "cache"
    for number in range(2):
        results = _race(cache, ["float32"] * 2, go)
        _check_round(results, ["float32"] * 2)
        if number == 1:
            assert all(r["built"] == {"ufunc cube_root float32": "loaded"} for r in results)
    (folder,) = [p for p in (cache / "cbrtgrad").iterdir() if p.is_dir()]
    # No temporary file left behind, one index for each part of the one
    # kernel (its loop and its block entry).
    assert not [p for p in folder.iterdir() if ".tmp." in p.name]
    assert len(list(folder.glob("*.nbi"))) == 2


@pytest.mark.slow
def test_four_processes_at_once_repeated_with_the_index_removed_between_rounds(tmp_path):
    # Two kernels written into one folder at once, cold and warm, six times.
    go = tmp_path / "go"
    cache = tmp_path / "cache"
    for number in range(6):
        dtypes = ["float64", "float32", "float64", "float32"]
        _check_round(_race(cache, dtypes, go), dtypes)
        (folder,) = [p for p in (cache / "cbrtgrad").iterdir() if p.is_dir()]
        assert not [p for p in folder.iterdir() if ".tmp." in p.name]
        if number % 2 == 0:
            # Every other round starts from a cache with data files but no
            # index, as after a crash between numba's two writes.
            for index in (cache / "cbrtgrad").glob("*/*.nbi"):
                index.unlink()


def test_environment_flags_are_checked(monkeypatch):
    monkeypatch.setenv("CBRTGRAD_CACHE", "maybe")
    _config.settings.cache_clear()
    try:
        with pytest.raises(ValueError, match="CBRTGRAD_CACHE must be 0 or 1"):
            _config.settings()
    finally:
        monkeypatch.delenv("CBRTGRAD_CACHE")
        _config.settings.cache_clear()


def test_numba_cache_dir_is_honoured_and_cbrtgrad_cache_dir_wins(monkeypatch, tmp_path):
    monkeypatch.delenv("CBRTGRAD_CACHE_DIR", raising=False)
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "numba"))
    _config.settings.cache_clear()
    try:
        assert _cache.root() == tmp_path / "numba" / "cbrtgrad"
        monkeypatch.setenv("CBRTGRAD_CACHE_DIR", str(tmp_path / "mine"))
        _config.settings.cache_clear()
        assert _cache.root() == tmp_path / "mine" / "cbrtgrad"
        monkeypatch.delenv("NUMBA_CACHE_DIR")
        monkeypatch.delenv("CBRTGRAD_CACHE_DIR")
        _config.settings.cache_clear()
        assert _cache.root().name == "cbrtgrad"  # the user's cache folder
    finally:
        _config.settings.cache_clear()


def test_a_folder_that_cannot_be_written_turns_the_cache_off(monkeypatch, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("CBRTGRAD_CACHE_DIR", str(blocker))
    _config.settings.cache_clear()
    try:
        assert _cache.directory() is None
        assert _locator.kernel_function(_digest, "float64") is None
        assert not _cache.status(cpu.cached_kernels()).enabled
    finally:
        _config.settings.cache_clear()


def test_bad_arguments_name_themselves():
    with pytest.raises(TypeError, match="dtype must be float32 or float64"):
        cpu.ufunc("cube_root", np.int32)
    with pytest.raises(ValueError, match="op must be"):
        cpu.ufunc("cube", np.float64)
    with pytest.raises(ValueError, match="name must be one of"):
        cpu.parallel_loop("sideways", np.float64)
    with pytest.raises(ValueError, match="tag must be an identifier"):
        _locator.kernel_function(_digest, "float 64")


def test_info_shows_the_cache_and_how_warm_it_is():
    from cbrtgrad.cli.main import info_lines

    cbrtgrad.cbrt(np.ones(2))  # at least the float64 forward is cached now
    (line,) = [line for line in info_lines() if line.startswith("cache")]
    assert str(_cache.root()) in line
    assert "warm" in line and f"of {len(cpu.cached_kernels())} kernels cached" in line


def test_numbas_locators_are_the_ones_cbrtgrad_puts_after_its_own():
    # cbrtgrad's locator goes first in NUMBA_CACHE_LOCATOR_CLASSES, numba's
    # own follow: if numba adds, drops or reorders its locators, a user's
    # cache=True function would be cached elsewhere once cbrtgrad is imported.
    from numba.core import caching

    numbas = tuple(c.__name__ for c in caching.CacheImpl._locator_classes)
    assert _locator.NUMBA_LOCATORS == numbas
    assert all(hasattr(caching, name) for name in _locator.NUMBA_LOCATORS)


def test_a_locator_list_the_user_gave_is_kept_after_cbrtgrads(monkeypatch):
    from numba.core import config

    ours = "cbrtgrad.build.locator.KernelLocator"
    monkeypatch.setattr(config, "CACHE_LOCATOR_CLASSES", "UserWideCacheLocator")
    assert _locator.kernel_function(_digest, "float64") is not None
    assert config.CACHE_LOCATOR_CLASSES == f"{ours},UserWideCacheLocator"
    monkeypatch.setattr(config, "CACHE_LOCATOR_CLASSES", "")
    assert _locator.kernel_function(_digest, "float64") is not None
    assert config.CACHE_LOCATOR_CLASSES == ",".join([ours, *_locator.NUMBA_LOCATORS])


def test_a_function_others_call_by_name_is_cached_for_one_signature():
    def rare(x):
        return x

    assert _locator.kernel_function(rare, "float64", copy=False) is rare
    assert _locator.kernel_function(rare, "float64", copy=False) is rare
    with pytest.raises(ValueError, match="cached for float64 already"):
        _locator.kernel_function(rare, "float32", copy=False)


#: A user's own cache=True function, compiled after cbrtgrad cached a kernel.
_USER_MODULE = """
import numba

@numba.njit(cache=True)
def triple(x):
    return 3 * x
"""

_USER_CALL = """
import numpy as np
import cbrtgrad
cbrtgrad.cbrt(np.ones(2, np.float32))
import users_module
assert users_module.triple(2.0) == 6.0
"""


def test_a_users_cached_function_is_cached_where_numba_puts_it(tmp_path):
    user = tmp_path / "user"
    user.mkdir()
    (user / "users_module.py").write_text(_USER_MODULE)
    cache = tmp_path / "cache"
    for extra in ({}, {"NUMBA_CACHE_DIR": str(tmp_path / "numba")}):
        env = _env(cache, **extra)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(user)])
        subprocess.run([sys.executable, "-c", _USER_CALL], env=env, cwd=user, check=True)
    # Beside its source without NUMBA_CACHE_DIR, under it with, as numba alone does.
    assert list((user / "__pycache__").glob("users_module.triple-*.nbi"))
    assert list((tmp_path / "numba").glob("*/users_module.triple-*.nbi"))
    assert not list(cache.glob("**/users_module.*"))


#: Runs the MLX loops (threaded forward, serial gradient) and a prange loop in
#: a fresh process: loops that call the ufuncs' block entries by name
#: (kernels/handlers/linked_entries.py); prints what was built and the results' bits.
_LINKED_CALL = """
import ctypes, hashlib, json
import numpy as np
from cbrtgrad.build import compile as _compile
from cbrtgrad.kernels.handlers import buffer_loops
from cbrtgrad.kernels.cpu import prange_loops
x = np.concatenate([np.linspace(-1e3, 1e3, 5001), [0.0, -0.0, np.inf, -np.nan, 5e-324, 1e-300]])
g = np.linspace(-2.0, 3.0, x.size)
y, dx = np.empty_like(x), np.empty_like(x)
kind = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 5)
forward = kind(buffer_loops.loop("forward", "float64", True).address)
forward(x.size, x.ctypes.data, 0, 0, y.ctypes.data)
grad = kind(buffer_loops.loop("grad", "float64", False).address)
grad(x.size, g.ctypes.data, 0, y.ctypes.data, dx.ctypes.data)
threaded = np.empty_like(x)
prange_loops.parallel_loops().forward(x, threaded)
assert threaded.tobytes() == y.tobytes()
print(json.dumps({"built": _compile.built_kernels(), "y": y.tobytes().hex(),
                  "dx": dx.tobytes().hex()}))
"""


def test_handlers_that_call_an_entry_by_name_load_from_the_cache_in_a_new_process(tmp_path):
    # The MLX loops, XLA FFI handlers and prange loops name their block entries; LLVM's
    # linker resolves the names when a loop is compiled and when it is loaded
    # from the cache (an unresolved name would abort the process).
    def run() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", _LINKED_CALL],
            capture_output=True,
            text=True,
            env=_env(tmp_path),
            cwd=ROOT,
            check=True,
        )
        return json.loads(done.stdout.strip().splitlines()[-1])

    first, second = run(), run()
    assert set(first["built"].values()) == {"compiled"}
    assert set(second["built"].values()) == {"loaded"}
    assert first["built"].keys() == second["built"].keys()
    x = np.concatenate([np.linspace(-1e3, 1e3, 5001), [0.0, -0.0, np.inf, -np.nan, 5e-324, 1e-300]])
    g = np.linspace(-2.0, 3.0, x.size)
    y = cbrtgrad.cbrt(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = cbrtgrad.cbrt_grad(g, y)
    for result in (first, second):
        assert result["y"] == y.tobytes().hex()
        assert result["dx"] == dx.tobytes().hex()


def test_a_ufunc_counts_as_cached_only_with_its_loop_and_its_entry(monkeypatch, tmp_path):
    monkeypatch.setenv("CBRTGRAD_CACHE_DIR", str(tmp_path))
    _config.settings.cache_clear()
    try:
        folder = _cache.directory()
        assert folder is not None
        name = "ufunc cube_root float64"
        kernel = {name: cpu.cached_kernels()[name]}
        (loop, entry), tag = kernel[name]
        assert entry is cpu_ufuncs.forward_f64_at
        _cache.index_path(loop, tag, folder).write_bytes(b"")
        assert _cache.status(kernel).missing == (name,)
        _cache.index_path(entry, tag, folder).write_bytes(b"")
        assert _cache.status(kernel).cached == (name,)
    finally:
        _config.settings.cache_clear()


# -- a folder another user could change is not loaded from -----------------------------------

_AS_ROOT = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="another owner needs chown (root)"
)
NOBODY = 65534


def _made(path: Path, mode: int, owner: int | None = None) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(mode)
    if owner is not None:
        os.chown(path, owner, -1)
    return path


def _owner_name(uid: int) -> str:
    import pwd

    return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"


#: Set-ups of the rule: (the folder asked about, made in a private tmp_path),
#: and what is wrong (None: safe). The test process is root here, so root's
#: folders are the user's; the test below runs the rule as another user.
def _setups(base: Path) -> dict[str, tuple[Path, str | None]]:
    return {
        "private, the user's": (_made(base / "mine", 0o700) / "cbrtgrad", None),
        "not made yet, under the user's": (base / "new" / "deeper" / "cbrtgrad", None),
        "the user's, writable by others": (
            _made(base / "open", 0o777),
            f"{base / 'open'} is writable by its group and others",
        ),
        "the user's, writable by its group": (
            _made(base / "group", 0o770),
            f"{base / 'group'} is writable by its group",
        ),
        "another owner's": (
            _made(base / "theirs", 0o755, NOBODY),
            f"{base / 'theirs'} is owned by {_owner_name(NOBODY)}, not by this user",
        ),
        "another owner's, writable by all (/tmp/shared)": (
            _made(base / "shared", 0o777, NOBODY) / "cbrtgrad",
            f"{base / 'shared'} (a folder above it) is writable by its group and others",
        ),
        "the user's under another owner's": (
            _made(_made(base / "above", 0o755, NOBODY) / "mine", 0o700),
            f"{base / 'above'} (a folder above it) is owned by {_owner_name(NOBODY)}",
        ),
        "the user's under a sticky folder writable by all (/tmp)": (
            _made(_made(base / "tmp", 0o1777) / "mine", 0o700),
            None,
        ),
        "not made yet under a sticky folder": (_made(base / "tmp2", 0o1777) / "new", None),
        "another owner's under a sticky folder": (
            _made(_made(base / "tmp3", 0o1777) / "planted", 0o700, NOBODY),
            f"{base / 'tmp3' / 'planted'} is owned by {_owner_name(NOBODY)}, not by this user",
        ),
        "the user's under another owner's sticky folder": (
            _made(_made(base / "tmp4", 0o1777, NOBODY) / "mine", 0o700),
            f"{base / 'tmp4'} (a folder above it) is writable by its group and others",
        ),
    }


@_AS_ROOT
def test_the_rule_for_a_folder_to_load_code_from(tmp_path):
    from cbrtgrad.build.private_folder import unsafe_reason

    base = _made(tmp_path / "base", 0o700)
    for name, (folder, expected) in _setups(base).items():
        assert unsafe_reason(folder) == expected, name
    # A symbolic link is judged by where it leads, wherever it lies.
    link = _made(base / "open", 0o777) / "link"
    link.symlink_to(base / "mine")
    assert unsafe_reason(link) is None
    bad_link = base / "mine" / "to-theirs"
    bad_link.symlink_to(base / "theirs")
    assert unsafe_reason(bad_link) == _setups(base)["another owner's"][1]


@_AS_ROOT
def test_the_rule_as_another_user(tmp_path):
    import tempfile

    from cbrtgrad.build.private_folder import unsafe_reason

    # The rule asked as NOBODY (the effective user id, which root may set
    # and take back), where root's folders are another user's; under /tmp,
    # where that user can reach them (tmp_path is root's alone).
    base = Path(tempfile.mkdtemp(prefix="cbrtgrad-test-rule-"))
    try:
        base.chmod(0o755)
        theirs = _made(base / "theirs", 0o700, NOBODY)
        sticky = _made(base / "tmp", 0o1777)
        asked = {
            "their private folder": theirs / "cbrtgrad",
            "root's folder": _made(base / "roots", 0o755),
            "theirs under root's sticky folder": _made(sticky / "theirs", 0o700, NOBODY),
            "root's under root's sticky folder": _made(sticky / "roots", 0o755) / "new",
            "theirs under root's, under theirs": _made(
                _made(theirs / "roots", 0o755) / "theirs", 0o700, NOBODY
            ),
        }
        os.seteuid(NOBODY)
        try:
            answers = {name: unsafe_reason(path) for name, path in asked.items()}
        finally:
            os.seteuid(0)
        assert answers == {
            "their private folder": None,
            "root's folder": f"{base / 'roots'} is owned by {_owner_name(0)}, not by this user",
            "theirs under root's sticky folder": None,
            "root's under root's sticky folder": None,
            # root's folder is root's alone to change, and above it is theirs
            "theirs under root's, under theirs": None,
        }
    finally:
        shutil.rmtree(base)


#: One float32 cbrt, then the PyTorch entry asked for, in a fresh process:
#: prints what was compiled or loaded, the cache folder, and every warning.
_SAFETY_CALL = """
import json, warnings
import numpy as np
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import cbrtgrad
    from cbrtgrad.build import cache as _cache, compile as _compile
    y = cbrtgrad.cbrt(np.array([27.0, -8.0], np.float32))
    entry = None
    try:
        from cbrtgrad.torch import _native
        entry = _native.entry()
    except ImportError:
        pass
    folder = _cache.directory()
print(json.dumps({"built": _compile.built_kernels(), "y": y.tolist(), "folder": str(folder),
                  "entry": None if entry is None else entry.__file__,
                  "warnings": [str(w.message) for w in caught]}))
"""


def _safety_call(cache: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _SAFETY_CALL],
        capture_output=True, text=True, env=_env(cache), cwd=ROOT, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def _listing(folder: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p), p.stat().st_size, p.stat().st_mtime_ns) for p in folder.rglob("*"))


@pytest.fixture(scope="module")
def whole_cache(tmp_path_factory):
    # A cache folder as a run leaves it: the float32 kernel and, where
    # PyTorch is, the PyTorch entry with its record.
    good = tmp_path_factory.mktemp("whole") / "cache"
    first = _safety_call(good)
    assert first["built"]["ufunc cube_root float32"] == "compiled"
    try:
        from cbrtgrad.torch import _native

        _native.EXTENSION.load()  # this run's build (loaded, or built once)
        key = _native.EXTENSION.key()
        shutil.copytree(_cache.root() / "torch-entry" / key, good / "cbrtgrad/torch-entry" / key)
    except ImportError:
        pass  # no PyTorch: the kernels only
    return good


@_AS_ROOT
@pytest.mark.parametrize(
    "setup", ["another owner's, writable by all (/tmp/shared)", "the user's, writable by others"]
)
def test_an_unsafe_cache_folder_is_neither_loaded_from_nor_written(tmp_path, setup, whole_cache):
    # A whole cache, as the other user could plant it: nothing of it is
    # loaded, nothing is written there, one warning says why.
    folder, _ = _setups(_made(tmp_path / "base", 0o700))[setup]
    cache = folder.parent if folder.name == "cbrtgrad" else folder
    shutil.copytree(whole_cache / "cbrtgrad", cache / "cbrtgrad")
    owner = NOBODY if "another owner" in setup else 0
    for path in [cache / "cbrtgrad", *(cache / "cbrtgrad").rglob("*")]:
        os.chown(path, owner, -1)
    before = _listing(cache)
    result = _safety_call(cache)
    assert result["y"] == [3.0, -2.0]
    assert result["built"]["ufunc cube_root float32"] == "compiled"  # in memory
    assert result["folder"] == "None" and result["entry"] is None
    (warning,) = [w for w in result["warnings"] if "cache folder" in w]
    assert warning.startswith(f"cbrtgrad: the cache folder {cache / 'cbrtgrad'} is not used")
    if owner:
        assert f"{cache / 'cbrtgrad'} is owned by {_owner_name(NOBODY)}, not by" in warning
    else:
        assert f"{cache} (a folder above it) is writable by its group and others" in warning
    assert _listing(cache) == before


def test_a_private_cache_folder_under_a_sticky_folder_is_used(tmp_path, whole_cache):
    sticky = _made(tmp_path / "tmp", 0o1777)  # as /tmp
    cache = _made(sticky / "mine", 0o700)
    shutil.copytree(whole_cache / "cbrtgrad", cache / "cbrtgrad")
    result = _safety_call(cache)
    assert not [w for w in result["warnings"] if "cache folder" in w]
    assert result["folder"].startswith(str(cache / "cbrtgrad"))
    assert result["built"]["ufunc cube_root float32"] == "loaded"
    if "PyTorch entry" in result["built"]:
        assert result["built"]["PyTorch entry"] == "loaded"
        assert result["entry"].startswith(str(cache / "cbrtgrad"))
    # Folders cbrtgrad makes are the user's alone, whatever the umask.
    made = whole_cache / "cbrtgrad"
    for path in [whole_cache, made, *(p.parent for p in made.glob("*/key.json"))]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


#: Runs three float32 kernels in a fresh process: the forward ufunc, the
#: gradient ufunc (each a cfunc loop calling a cfunc block entry) and the
#: parallel forward loop (an njit prange function); prints what was built,
#: the results' bits and every warning raised.
_THREE_CALLS = """
import json, warnings
import numpy as np
import cbrtgrad
from cbrtgrad.build import compile as _compile
x = np.concatenate([np.arange(-20, 21, dtype=np.float32) ** 3, np.linspace(-7, 9, 3001)])
x = x[x != 0].astype(np.float32)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = cbrtgrad.cbrt(x)
    dx = cbrtgrad.cbrt_grad(np.ones_like(y), y)
    threaded = cbrtgrad.cbrt(x, backend="parallel")
print(json.dumps({
    "built": _compile.built_kernels(),
    "bits": {name: a.tobytes().hex() for name, a in (("y", y), ("dx", dx), ("threaded", threaded))},
    "cubes": [float(v) for v in y[:40]],
    "warnings": [[w.category.__name__, str(w.message)] for w in caught],
}))
"""

#: The three kernels _THREE_CALLS builds, and the file of each that the
#: damage tests break: the forward's loop (a cfunc), the gradient's block
#: entry (a cfunc the loop calls by address) and the prange loop (an njit
#: dispatcher).
_THREE_KERNELS = (
    "ufunc cube_root float32",
    "ufunc cube_root_grad float32",
    "parallel forward float32",
)
_DAMAGED_PARTS = (
    "ufuncs.forward_loop_f32-",
    "grad_blocks.grad_f32_at-",
    "prange_loops._forward_loop-",
)


def _three_calls(cache: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _THREE_CALLS],
        capture_output=True,
        text=True,
        env=_env(cache),
        cwd=ROOT,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def three_kernels_cached(tmp_path_factory):
    """A cache folder holding the three kernels of _THREE_CALLS, and what they gave."""
    cache = tmp_path_factory.mktemp("three")
    first = _three_calls(cache)
    assert first["built"] == dict.fromkeys(_THREE_KERNELS, "compiled")
    assert first["warnings"] == []
    # Perfect cubes first: their roots are exact.
    assert first["cubes"] == [float(k) for k in range(-20, 21) if k != 0]
    return cache, first


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


#: Ways a cache file is found damaged: cut short (a full disk, an
#: interrupted copy), emptied, overwritten with bytes that are no pickle, or
#: with a pickle of something else.
_DAMAGES = {
    "truncated .nbc": (".1.nbc", _truncate),
    "garbage .nbc": (".1.nbc", lambda path: path.write_bytes(b"\x00not a pickle\xff" * 64)),
    "other pickle .nbc": (".1.nbc", lambda path: path.write_bytes(pickle.dumps(("a", 1)))),
    "truncated .nbi": (".nbi", _truncate),
    "empty .nbi": (".nbi", lambda path: path.write_bytes(b"")),
    "garbage .nbi": (".nbi", lambda path: path.write_bytes(b"\x80\x05garbage" * 64)),
}


@pytest.mark.parametrize(
    "damage",
    # An index of garbage fails where a truncated one does (numba's first
    # read of the index): the nightly run only.
    [pytest.param(d, marks=pytest.mark.slow) if d == "garbage .nbi" else d for d in _DAMAGES],
)
def test_a_damaged_entry_is_compiled_again_with_one_warning_naming_it(
    three_kernels_cached, tmp_path, damage
):
    cached, first = three_kernels_cached
    cache = tmp_path / "cache"
    shutil.copytree(cached, cache)
    (folder,) = [p for p in (cache / "cbrtgrad").iterdir() if p.is_dir()]
    suffix, spoil = _DAMAGES[damage]
    damaged = []
    for part in _DAMAGED_PARTS:
        (path,) = folder.glob(f"{part}*{suffix}")
        spoil(path)
        damaged.append(path)
    # Each damaged kernel is compiled again, with the bits of the first build.
    again = _three_calls(cache)
    assert again["bits"] == first["bits"]
    assert again["built"] == dict.fromkeys(_THREE_KERNELS, "compiled")
    # One warning per damaged file, naming it, and no other warning.
    assert sorted(w[0] for w in again["warnings"]) == ["KernelCacheWarning"] * 3
    for path in damaged:
        (message,) = [w[1] for w in again["warnings"] if str(path) in w[1]]
        assert "is damaged" in message and "compiled again and saved" in message
    # The fresh entries were saved: the next process loads them, silently.
    third = _three_calls(cache)
    assert third["warnings"] == []
    assert third["built"] == dict.fromkeys(_THREE_KERNELS, "loaded")
    assert third["bits"] == first["bits"]
    assert not [p for p in folder.iterdir() if ".tmp." in p.name]


def test_a_damaged_entry_that_cannot_be_removed_is_compiled_in_each_process(
    three_kernels_cached, tmp_path
):
    # A folder where the forward's data file was: it cannot be read, nor
    # removed (os.remove refuses a folder), nor replaced by numba's rename.
    cached, first = three_kernels_cached
    cache = tmp_path / "cache"
    shutil.copytree(cached, cache)
    (folder,) = [p for p in (cache / "cbrtgrad").iterdir() if p.is_dir()]
    (path,) = folder.glob(f"{_DAMAGED_PARTS[0]}*.1.nbc")
    path.unlink()
    path.mkdir()
    for _ in range(2):
        result = _three_calls(cache)
        assert result["bits"] == first["bits"]
        assert result["built"]["ufunc cube_root float32"] == "compiled"
        assert result["built"]["parallel forward float32"] == "loaded"
        ((category, message),) = result["warnings"]
        assert category == "KernelCacheWarning" and str(path) in message
        assert "could not be removed" in message and "not saved" in message
    assert path.is_dir()


def test_numba_keeps_a_functions_cache_where_cbrtgrad_replaces_it():
    # _cache_entries.attach sets the cache where numba's enable_caching
    # does: if numba kept it elsewhere, cbrtgrad's kernels would be cached
    # by numba's own class (a damaged entry raising again) or not at all.
    from numba.core.caching import FunctionCache
    from numba.core.ccallback import CFunc
    from numba.core.sigutils import normalize_signature

    dispatcher = numba.njit(_triple_of)
    dispatcher.enable_caching()
    assert type(dispatcher._cache) is FunctionCache
    callback = CFunc(_triple_of, normalize_signature("float64(float64)"), {}, {})
    callback.enable_caching()
    assert type(callback._cache) is FunctionCache


def _triple_of(x):
    return 3 * x
