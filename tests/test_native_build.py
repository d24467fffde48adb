"""The C++ builds' keeping and loading (cbrtgrad/build/native.py), on a small extension.

What is checked, in fresh processes (a damaged shared library kills the
process that loads it): a build is loaded only where the record of its size
and SHA-256 beside it matches; a build cut short, emptied or with a byte
changed, or without its record (a build killed between its two renames), is
built again by ``load`` and refused by ``built``, each with a warning naming
the file; a failed build leaves neither file behind; ``built`` waits for no
build under way and warns of none; a cache folder another user could change
is not used (the build goes to a private temporary folder). The real builds
(the PyTorch entry, the MLX primitive) are checked the same way in
tests/test_torch_native.py and tests/test_mlx_build.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from cbrtgrad.build import native as _native_build

ROOT = Path(__file__).resolve().parent.parent
fcntl = pytest.importorskip("fcntl")  # the build lock's (none on Windows)

pytestmark = pytest.mark.skipif(
    _native_build.compiler() is None, reason="no C++ compiler here to build an extension"
)

#: The extension: one module constant, built in about a second.
_SOURCE = """
#include <Python.h>
static struct PyModuleDef definition = {PyModuleDef_HEAD_INIT, "_toy", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__toy(void) {
    PyObject *module = PyModule_Create(&definition);
    if (module != NULL) PyModule_AddIntConstant(module, "answer", 42);
    return module;
}
"""

#: Loads (``load``: builds where needed) or asks for (``built``) the
#: extension; prints what it got, whether it built, and every warning.
_SCRIPT = """
import json, subprocess, sys, sysconfig, warnings
from pathlib import Path
from cbrtgrad.build import compile as _compile, native as _native_build

def build(work, log):
    built = work / ("_toy" + _native_build.SUFFIX)
    if sys.argv[2] == "fail":  # half a file, then a failure, as a build killed midway
        built.write_bytes(b"half")
        raise _native_build.BuildError("the build failed")
    command = [_native_build.compiler(), "-shared", "-fPIC", "-O0", "-w",
               "-I" + sysconfig.get_paths()["include"], str(work / "toy.cpp"), "-o", str(built)]
    if sys.platform == "darwin":
        command += ["-undefined", "dynamic_lookup"]
    _native_build.run_logged([command], log, "the toy")
    return built

EXTENSION = _native_build.NativeExtension(
    package="toypackage", label="toy", module="_toy", cache_name="toy", sources=("toy.cpp",),
    versions=dict, missing_tools=list, build=build,
)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    try:
        module = EXTENSION.load() if sys.argv[1] == "load" else EXTENSION.built()
        error = None
    except _native_build.BuildError as exc:
        module, error = None, str(exc)
print(json.dumps({
    "answer": getattr(module, "answer", None),
    "file": getattr(module, "__file__", None),
    "built": _compile.built_kernels(),
    "error": error,
    "warnings": [f"{w.category.__name__}: {w.message}" for w in caught],
}))
"""


@pytest.fixture
def toy(tmp_path):
    package = tmp_path / "packages" / "toypackage"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "toy.cpp").write_text(_SOURCE)
    return tmp_path


def _run(toy: Path, action: str, how: str = "build", cache: Path | None = None) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CBRTGRAD_")}
    env["CBRTGRAD_CACHE_DIR"] = str(cache or toy / "cache")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(toy / "packages")])
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, action, how],
        capture_output=True, text=True, env=env, cwd=toy, timeout=300,
    )  # fmt: skip
    # A damaged library loaded is a SIGBUS or a segfault: a negative status.
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def _folder(toy: Path) -> Path:
    (folder,) = (toy / "cache" / "cbrtgrad" / "toy").iterdir()
    return folder


def _library(toy: Path) -> Path:
    return _folder(toy) / f"_toy{_native_build.SUFFIX}"


def test_a_build_is_written_with_its_record_and_loaded_by_the_next_process(toy):
    first = _run(toy, "load")
    assert first["answer"] == 42 and first["built"] == {"toy": "compiled"}
    assert first["warnings"] == []
    library = _library(toy)
    record = json.loads((library.parent / (library.name + _native_build.RECORD)).read_text())
    data = library.read_bytes()
    assert record["size"] == len(data)
    assert record["sha256"] == hashlib.sha256(data).hexdigest()
    # No temporary file is left beside them.
    assert sorted(p.name for p in library.parent.iterdir()) == sorted(
        [library.name, library.name + _native_build.RECORD, "build.lock", "build.log"]
    )
    for action in ("load", "built"):
        again = _run(toy, action)
        assert again["answer"] == 42 and again["built"] == {"toy": "loaded"}
        assert again["warnings"] == [] and again["file"] == str(library)


def _truncated(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def _emptied(path: Path) -> None:
    os.truncate(path, 0)


def _flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x40
    path.write_bytes(bytes(data))


def _unrecorded(path: Path) -> None:
    # A build killed after its library was renamed into place, before its record.
    (path.parent / (path.name + _native_build.RECORD)).unlink()


def _bad_record(path: Path) -> None:
    (path.parent / (path.name + _native_build.RECORD)).write_text("{not json")


DAMAGES = {
    "truncated": (_truncated, "bytes where its build wrote"),
    "zero bytes": (_emptied, "is 0 bytes where its build wrote"),
    "a byte flipped": (_flipped, "has another SHA-256 than its build wrote"),
    "no record": (_unrecorded, "has no record of its build"),
    "a record that cannot be read": (_bad_record, "has a record that cannot be read"),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_build_is_refused_by_built_and_built_again_by_load(toy, damage):
    _run(toy, "load")
    library = _library(toy)
    spoil, why = DAMAGES[damage]
    spoil(library)
    refused = _run(toy, "built")
    assert refused["answer"] is None and refused["built"] == {}
    (warning,) = refused["warnings"]
    assert warning.startswith(f"RuntimeWarning: cbrtgrad: the toy build {library} ")
    assert why in warning and "not loaded" in warning
    rebuilt = _run(toy, "load")
    assert rebuilt["answer"] == 42 and rebuilt["built"] == {"toy": "compiled"}
    (warning,) = rebuilt["warnings"]
    assert str(library) in warning and why in warning and warning.endswith("building it again")
    assert _native_build.damage(library) is None
    after = _run(toy, "built")
    assert after["answer"] == 42 and after["warnings"] == []


def test_a_failed_build_leaves_no_file_that_looks_whole(toy):
    failed = _run(toy, "load", "fail")
    assert failed["error"] == "the build failed" and failed["answer"] is None
    folder = _folder(toy)
    assert not list(folder.glob(f"*{_native_build.SUFFIX}*"))
    nothing = _run(toy, "built")
    assert nothing["answer"] is None and nothing["warnings"] == []
    assert _run(toy, "load")["answer"] == 42


def test_built_neither_waits_for_nor_warns_of_a_build_under_way(toy):
    # A library without its record while another process holds the build
    # lock is that process's build between its two renames: not damage.
    _run(toy, "load")
    library = _library(toy)
    _unrecorded(library)
    with open(library.parent / "build.lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        during = _run(toy, "built")
        fcntl.flock(lock, fcntl.LOCK_UN)
    assert during["answer"] is None and during["warnings"] == []


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_cache_folder_another_user_can_change_is_not_built_in_or_loaded_from(toy):
    # Another user's folder (the issue's /tmp/shared), holding a whole build
    # with its record, which they could have put there: never loaded; the
    # build goes to a private temporary folder.
    _run(toy, "load")
    shared = toy / "shared"
    shutil.copytree(toy / "cache", shared)
    for folder, _, files in os.walk(shared):
        os.chown(folder, 65534, 65534)
        for name in files:
            os.chown(Path(folder) / name, 65534, 65534)
    shared.chmod(0o777)
    before = sorted(str(p) for p in shared.rglob("*"))
    refused = _run(toy, "built", cache=shared)
    assert refused["answer"] is None
    (warning,) = refused["warnings"]
    assert f"the cache folder {shared / 'cbrtgrad'} is not used" in warning
    import pwd

    owner = f"{pwd.getpwuid(65534).pw_name} (uid 65534)"
    assert f"{shared / 'cbrtgrad'} is owned by {owner}, not by this user" in warning
    loaded = _run(toy, "load", cache=shared)
    assert loaded["answer"] == 42 and loaded["built"] == {"toy": "compiled"}
    elsewhere = Path(loaded["file"])
    assert shared not in elsewhere.parents
    assert stat.S_IMODE(elsewhere.parent.stat().st_mode) == 0o700
    assert sorted(str(p) for p in shared.rglob("*")) == before
