"""The vectorised peers of ``measure.py peers``: each one called right, or absent with a reason.

Every available peer is checked against the exact cube root (mpmath at 200
bits), never against ``np.cbrt``. A peer absent on this machine (no AVX2, no
libsleef, no jax) skips its tests with the reason ``find_peers`` gives.
"""

import json
import re
import subprocess
import sys

import mpmath
import numpy as np
import pytest

from cbrtgrad.build.isa import HostIsa, host_isa
from cbrtgrad.cli.bench.inputs import bench_inputs
from cbrtgrad.verification import cases, ulp
from tools import measure
from tools.measuring import peer_table, peers

NAMES = ("glibc libmvec", "SLEEF u10", "jax", "numpy")
PEER_CASES = [
    pytest.param(np.dtype(dtype), name, id=f"{name}-{np.dtype(dtype)}")
    for dtype in (np.float32, np.float64)
    for name in NAMES
]


def _peer(dtype, name):
    (peer,) = [p for p in peers.find_peers(dtype) if p.name == name]
    if not peer.available:
        pytest.skip(f"{peer.label} is absent here: {peer.reason}")
    return peer


def _call(peer, x):
    out = np.full_like(x, 7.0)
    peer.f(x, out)
    return out


@pytest.mark.parametrize(("dtype", "name"), PEER_CASES)
def test_peer_within_its_documented_bound(dtype, name):
    peer = _peer(dtype, name)
    # An odd length, so the last elements go through the padded tail.
    x = np.concatenate(
        [cases.random_inputs(dtype, 3001, seed=11), bench_inputs(dtype, 999, seed=12)]
    )
    if peer.ulp_bound is None:
        # jax documents no bound. This checks the call itself: float64 really
        # computed in float64 (x64 on), the right inputs to the right outputs.
        # NOTE: XLA's CPU cube root is wrong on subnormal inputs (float32 gives
        # -5.6e-16 whatever the input, float64 gives 0), so they are left out.
        x = x[np.abs(x) >= np.finfo(dtype).tiny]
        rtol = 1e-5 if dtype == np.float32 else 1e-14
        with mpmath.workprec(ulp.PRECISION_BITS):
            exact = np.array([float(ulp.cbrt_exact(mpmath.mpf(float(v)))) for v in x])
        np.testing.assert_allclose(_call(peer, x).astype(np.float64), exact, rtol=rtol)
        return
    errors = ulp.mpmath_ulp_errors(x, _call(peer, x), ulp.cbrt_exact)
    assert errors.max() <= peer.ulp_bound, (peer.label, errors.max(), x[errors.argmax()])


@pytest.mark.parametrize(("dtype", "name"), PEER_CASES)
def test_peer_special_values(dtype, name):
    peer = _peer(dtype, name)
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 8.0, -27.0], dtype)
    y = _call(peer, x)
    assert y[0] == 0 and not np.signbit(y[0])
    assert y[1] == 0 and np.signbit(y[1])
    assert y[2] == np.inf and y[3] == -np.inf
    assert np.isnan(y[4])
    np.testing.assert_allclose(y[5:], [2.0, -3.0], rtol=4 * np.finfo(dtype).eps)


@pytest.mark.parametrize(("dtype", "name"), PEER_CASES)
def test_peer_tails_match_the_full_vectors_and_stay_in_bounds(dtype, name):
    peer = _peer(dtype, name)
    x = bench_inputs(dtype, 40, seed=13)
    whole = _call(peer, x)
    for n in range(1, 18):  # every remainder of 4 and of 8 lanes, and more than one vector
        buffer = np.full(n + 8, 7.0, dtype)
        peer.f(x[:n].copy(), buffer[:n])
        np.testing.assert_array_equal(buffer[:n], whole[:n], err_msg=f"n={n}")
        assert (buffer[n:] == 7.0).all(), f"n={n}: wrote past the end of out"


@pytest.mark.parametrize(("dtype", "name"), PEER_CASES)
def test_peer_takes_empty_and_nd_arrays_and_checks_them(dtype, name):
    peer = _peer(dtype, name)
    x = bench_inputs(dtype, 12, seed=14).reshape(3, 4)
    np.testing.assert_array_equal(_call(peer, x).ravel(), _call(peer, x.ravel()))
    assert _call(peer, x[:0]).size == 0
    with pytest.raises(TypeError):
        peer.f(x.astype(np.float16), np.empty_like(x))
    with pytest.raises(ValueError):
        peer.f(x.T, np.empty_like(x.T))
    with pytest.raises(ValueError):
        peer.f(x, np.empty(5, dtype))


def test_every_peer_is_listed_with_a_reason_when_absent():
    found = peers.find_peers()
    assert [(p.dtype, p.name) for p in found] == [
        (np.dtype(d), n) for d in (np.float32, np.float64) for n in NAMES
    ]
    for p in found:
        assert p.available == (p.reason == "")
    with pytest.raises(TypeError):
        peers.find_peers(np.int32)


def test_a_missing_library_or_symbol_is_absent_not_a_crash():
    missing = peers._vector_peer(
        "nothing", ("libcbrtgrad-no-such-library.so.0",), "f", 4, np.dtype(np.float64), 1.0, False
    )
    if host_isa().name not in ("AVX2", "AVX-512") or not sys.platform.startswith("linux"):
        assert not missing.available and missing.reason
    else:
        assert not missing.available and "cannot load" in missing.reason
        no_symbol = peers._vector_peer(
            "libmvec", peers.LIBMVEC, "_ZGVdN4v_cbrtgrad_nope", 4, np.dtype(np.float64), 1.0, False
        )
        if peers.find_peers(np.float64)[0].available:  # libmvec itself loads here
            assert not no_symbol.available and "has no _ZGVdN4v_cbrtgrad_nope" in no_symbol.reason
    with pytest.raises(peers.PeerUnavailable, match=re.escape(missing.reason)):
        missing.f(np.ones(4), np.empty(4))


def test_a_host_without_avx2_has_no_vector_peers(monkeypatch):
    sse2 = HostIsa("x86-64", "test CPU", "SSE2", 128, False, False)
    monkeypatch.setattr(peers, "host_isa", lambda: sse2)
    peer = peers._vector_peer(
        "glibc libmvec", peers.LIBMVEC, "_ZGVdN4v_cbrt", 4, np.dtype(np.float64), 4.0, False
    )
    assert not peer.available
    assert "AVX2" in peer.reason or "x86-64 only" in peer.reason


@pytest.mark.parametrize("isa", ["AVX2", "AVX-512"])
def test_entry_points_follow_the_hosts_vector_isa(monkeypatch, isa):
    # An AVX-512 host measures the 512-bit variants, which a user there calls;
    # every other host the AVX2 ones (absent where there is no AVX2).
    host = HostIsa("test", "test CPU", isa, 512 if isa == "AVX-512" else 256, True, True)
    monkeypatch.setattr(peers, "host_isa", lambda: host)
    symbol, lanes = peers._entry_point("libmvec", np.dtype(np.float64))
    assert (symbol, lanes) == (("_ZGVeN8v_cbrt", 8) if isa == "AVX-512" else ("_ZGVdN4v_cbrt", 4))
    symbol, lanes = peers._entry_point("sleef", np.dtype(np.float32))
    assert lanes * 32 == host.vector_bits and symbol.startswith("Sleef_cbrtf")


def test_numpy_peer_is_svml_where_numpy_runs_it(monkeypatch):
    from numpy._core._multiarray_umath import __cpu_features__

    uses, reason = peers.numpy_uses_svml()
    for dtype in (np.float32, np.float64):
        (peer,) = [p for p in peers.find_peers(dtype) if p.name == "numpy"]
        assert peer.available == uses and peer.reason == reason
        if uses:
            x = bench_inputs(np.dtype(dtype), 1000, seed=15)
            assert np.array_equal(_call(peer, x), np.cbrt(x))
    monkeypatch.setitem(__cpu_features__, "AVX512_SKX", False)
    uses, reason = peers.numpy_uses_svml()
    assert not uses and ("scalar libm" in reason or "x86-64 Linux only" in reason)


def test_jax_not_installed_is_absent(monkeypatch):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "jax" else find_spec(name, *a)
    )
    peer = peers._jax_peer(np.dtype(np.float32))
    assert not peer.available and "not installed" in peer.reason


def test_peer_table_runs_on_tiny_sizes():
    rows = peer_table.peer_rows(sizes=(9, 33), repeat=1, sample=9, rounds=2)
    assert len(rows) == 2 * 2 * (1 + len(NAMES))
    ours = [r for r in rows if r.implementation == peer_table.OURS]
    assert len(ours) == 4 and all(r.ratio == 1.0 for r in ours)
    for r in ours:
        assert r.max_ulp <= cases.BARS[np.dtype(r.dtype)].forward_max_ulp
    for r in rows:
        if r.absent:
            assert r.ns_per_element is None and r.ratio is None and r.max_ulp is None
        else:
            assert r.ns_per_element > 0 and r.ratio > 0 and r.max_ulp >= 0 and r.threads >= 1
    text = peer_table.format_peer_rows(rows)
    assert text.splitlines()[0] == f"CPU: {host_isa().describe()}"
    assert text.count("\n") == len(rows) + 2


def test_peer_table_shows_an_absent_peer(monkeypatch):
    absent = peers.Peer(
        "gone",
        np.dtype(np.float64),
        "libgone.so",
        "gone_cbrt",
        1.0,
        False,
        "libgone.so is not installed",
        peers._absent_call("libgone.so is not installed"),
    )
    monkeypatch.setattr(peers, "find_peers", lambda *dtypes: [absent])
    rows = peer_table.peer_rows(sizes=(8,), dtypes=(np.dtype(np.float64),), repeat=1)
    assert [r.absent for r in rows] == ["", "libgone.so is not installed"]
    assert "absent: libgone.so is not installed" in peer_table.format_peer_rows(rows)


def test_measure_peers(tmp_path, capsys):
    out = tmp_path / "peers.json"
    argv = ["peers", "--sizes", "1000", "--repeat", "1", "--json", str(out)]
    assert measure.main(argv) == 0
    text = capsys.readouterr().out
    assert host_isa().describe() in text and peer_table.OURS in text
    payload = json.loads(out.read_text())["peers"]
    assert payload["cpu"] == host_isa().describe()
    labels = {(r["dtype"], r["implementation"]) for r in payload["rows"]}
    assert ("float32", peer_table.OURS) in labels and ("float64", peer_table.OURS) in labels
    assert len(payload["rows"]) == 2 * (1 + len(NAMES))


def test_import_cbrtgrad_does_not_load_the_peers():
    code = (
        "import sys, cbrtgrad; print('tools.measuring.peers' in sys.modules, 'jax' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_make_plots_writes_the_peer_table_alone(tmp_path, capsys):
    import importlib.util
    import pathlib

    docs = pathlib.Path(__file__).resolve().parents[1] / "docs"
    spec = importlib.util.spec_from_file_location("make_plots", docs / "make_plots.py")
    make_plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_plots)
    argv = ["--peers", "--out", str(tmp_path), "--table-sizes", "100", "--repeat", "1"]
    assert make_plots.main(argv) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["peers_table.txt"]
    first, cpu, *_ = (tmp_path / "peers_table.txt").read_text().splitlines()
    assert first.startswith("measured ") and " at commit " in first
    assert "python tools/measure.py peers --sizes 100" in first
    assert cpu == f"CPU: {host_isa().describe()}"


def test_the_performance_page_has_its_peer_table():
    import pathlib

    docs = pathlib.Path(__file__).resolve().parents[1] / "docs"
    first, cpu, *_ = (docs / "generated" / "peers_table.txt").read_text().splitlines()
    assert first.startswith("measured ") and " at commit " in first and cpu.startswith("CPU: ")
    assert "generated/peers_table.txt" in (docs / "performance.md").read_text()


def test_peer_rows_needs_a_round():
    with pytest.raises(ValueError, match="rounds must be an integer >= 1"):
        peer_table.peer_rows(sizes=(8,), rounds=0)
