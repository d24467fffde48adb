"""A Zen 1 as numba's target on this x86 machine: ``NUMBA_CPU_FEATURES`` for ``znver1``.

This host's LLVM features with AVX-512 and the later extensions a Zen 1
lacks turned off (AVX2, FMA and the rest kept as the host has them), so that
numba compiles cbrtgrad's kernels as for a Zen 1 and they run here. Used by
``.ci/run`` (the kernels' bits on that code path) and by
``tests/test_compile_policy.py``. It names code, not speed: a Zen 1's timing
is not measured by running its code on another CPU.

Usage: ``NUMBA_CPU_NAME=znver1 NUMBA_CPU_FEATURES=$(python tools/zen1_target.py) ...``
"""

from __future__ import annotations

#: LLVM feature prefixes of the extensions a Zen 1 does not have.
LATER = (
    "avx512",
    "evex512",
    "vaes",
    "vpclmulqdq",
    "gfni",
    "avxvnni",
    "shstk",
    "pku",
    "rdpid",
    "wbnoinvd",
    "movdir",
)


def zen1_features() -> str:
    """This host's LLVM feature string with the later extensions (``LATER``) turned off."""
    import llvmlite.binding as ll

    entries = ll.get_host_cpu_features().flatten().split(",")
    return ",".join("-" + e[1:] if e[1:].startswith(LATER) else e for e in entries)


if __name__ == "__main__":
    print(zen1_features())
