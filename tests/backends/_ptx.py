"""Compiling kernels for a real GPU in CI: a subprocess with the simulator off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest


def compile_in_subprocess(script: str) -> Any:
    """Run ``script`` (which prints JSON) with ``NUMBA_ENABLE_CUDASIM=0``; its JSON.

    Skips when the CUDA toolkit wheels (libNVVM, NVRTC) are missing here.
    """
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="0")
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=False
    )
    if done.returncode != 0 and ("libNVVM" in done.stderr or "NVRTC" in done.stderr):
        pytest.skip(f"no libNVVM/NVRTC here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
