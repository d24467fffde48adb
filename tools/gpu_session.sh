#!/usr/bin/env bash
# Every check that needs a GPU, in one run: tools/gpu_check.py with its sweep
# (bits against the CPU, throughput against copy, CuPy, JAX and PyTorch,
# per-call cost, the kernels' shapes and formulas), the bench rows of the
# cuda backend, and the cuda tests with numba's simulator off. For a machine
# with an NVIDIA GPU and CuPy, such as the H200 a session's device tool lends
# (docs/performance.md, "On a GPU"). Writes its logs and JSON to $OUT (or
# ./gpu_out); exits 0 when everything passed, 1 when a check failed, 2 when
# there is no GPU here.
#
# NOTE: numba-cuda 0.30.4 cannot compile with numpy >= 2.5 (numba-cuda issue
# 907). Where the machine's numpy is that new and a numpy 2.4 wheel for its
# Python lies in .whl/ (git-ignored; carried there), it is installed into
# /tmp/site and put first on PYTHONPATH: nothing else on the machine changes.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
out=${OUT:-$PWD/gpu_out}
mkdir -p "$out" || exit 2
export PYTHONUNBUFFERED=1 NUMBA_ENABLE_CUDASIM=0 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

numpy_too_new='import sys, numpy; sys.exit(tuple(map(int, numpy.__version__.split(".")[:2])) < (2, 5))'
if python3 -c "$numpy_too_new"; then
    wheel=$(ls .whl/numpy-2.4.*-cp3*.whl 2>/dev/null | head -n 1)
    if [ -n "$wheel" ]; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site "$wheel" || exit 1
        export PYTHONPATH="/tmp/site:$PYTHONPATH"
    fi
fi

if ! python3 -c 'import sys; from numba import cuda; sys.exit(not cuda.is_available())' 2>/dev/null; then
    echo "gpu_session: no CUDA GPU here (numba.cuda.is_available() is False): nothing to check"
    exit 2
fi

# Most important first, each later step bounded, so that the whole run ends
# inside one 10-minute command of a lent machine (gpu_check --sweep took about
# 3 minutes on an H200).
status=0
python3 tools/gpu_check.py --sweep --json "$out/gpu_check.json" 2>&1 | tee "$out/gpu_check.txt" \
    || status=1
timeout 240 python3 -m pytest -q -p no:cacheprovider tests/backends \
    tests/engine/test_device_tensors.py 2>&1 | tee "$out/pytest_cuda.txt" || status=1
timeout 90 python3 tools/measure.py cuda --sizes 268435456 2>&1 \
    | tee "$out/bench_cuda.txt" || status=1
echo "gpu_session: exit $status; logs in $out"
exit $status
