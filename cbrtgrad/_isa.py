"""The host CPU's vector ISA, as LLVM (through llvmlite) sees it, in one place.

The kernels choose their SIMD width from this, the ``info`` and ``bench``
commands print it beside every figure, and the tests read it to know which
code path the machine runs. LLVM's feature list is what numba compiles for,
so it is the right source (``/proc/cpuinfo`` exists only on Linux, and a
hypervisor may hide flags there that LLVM also does not use).
"""

from __future__ import annotations

import platform
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class HostIsa:
    """What the host CPU offers the kernels.

    Attributes
    ----------
    cpu : str
        LLVM's name for the CPU (``znver3``, ``icelake-server``, ``apple-m1``).
    model : str
        The vendor's model string where the OS gives one, else ``cpu``.
    name : str
        The widest vector ISA: ``AVX-512``, ``AVX2``, ``AVX``, ``SSE2``,
        ``NEON``, ``SVE`` or ``scalar``.
    vector_bits : int
        The widest SIMD register LLVM may use (512, 256 or 128; 0 if none).
    fma : bool
        Whether fused multiply-add is a native instruction (the kernels call
        ``llvm.fma`` either way; without it the call is a slow libm routine).
    packed_int64_float : bool
        Whether int64 <-> float64 conversions exist as vector instructions
        (AVX-512DQ on x86, every arm64): where they do not, LLVM turns each
        one into a scalar conversion per lane.
    """

    cpu: str
    model: str
    name: str
    vector_bits: int
    fma: bool
    packed_int64_float: bool

    def describe(self) -> str:
        """One line for tables: model, LLVM name, ISA and vector width.

        Examples
        --------
        >>> "bit" in host_isa().describe()
        True
        """
        model = self.model if self.model == self.cpu else f"{self.model} ({self.cpu})"
        fma = ", FMA" if self.fma else ""
        return f"{model}; {self.name}{fma}, {self.vector_bits}-bit vectors"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                if line.lower().startswith(("model name", "hardware")):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or ""


def classify(cpu: str, features: dict[str, bool], machine: str, model: str = "") -> HostIsa:
    """Classify LLVM's feature map into a :class:`HostIsa`.

    Parameters
    ----------
    cpu : str
        LLVM's CPU name.
    features : dict
        LLVM's host features (``llvmlite.binding.get_host_cpu_features()``).
    machine : str
        ``platform.machine()``: ``x86_64``, ``arm64``, ``aarch64``...
    model : str, optional
        The vendor's model string.

    Returns
    -------
    HostIsa

    Examples
    --------
    >>> classify("znver3", {"avx2": True, "fma": True}, "x86_64").name
    'AVX2'
    >>> classify("skx", {"avx512f": True, "avx512dq": True, "fma": True}, "x86_64").vector_bits
    512
    >>> classify("apple-m1", {"neon": True}, "arm64").packed_int64_float
    True
    """
    on = {name for name, enabled in features.items() if enabled}
    model = model or cpu
    if machine.lower() in ("arm64", "aarch64") or "neon" in on:
        # Every AArch64 CPU has NEON with fused multiply-add and packed
        # int64 <-> float64 conversions (scvtf/fcvtzs on 2 x 64-bit lanes).
        name = "SVE" if "sve" in on else "NEON"
        return HostIsa(cpu, model, name, 128, True, True)
    if "avx512f" in on:
        return HostIsa(cpu, model, "AVX-512", 512, True, "avx512dq" in on)
    if "avx2" in on:
        return HostIsa(cpu, model, "AVX2", 256, "fma" in on, False)
    if "avx" in on:
        return HostIsa(cpu, model, "AVX", 256, "fma" in on, False)
    if "sse2" in on or machine.lower() in ("x86_64", "amd64"):
        return HostIsa(cpu, model, "SSE2", 128, "fma" in on, False)
    return HostIsa(cpu, model, "scalar", 0, "fma" in on, False)


@lru_cache(maxsize=1)
def host_isa() -> HostIsa:
    """The host CPU's vector ISA, read once from LLVM.

    Returns
    -------
    HostIsa

    Examples
    --------
    >>> host_isa().vector_bits in (0, 128, 256, 512)
    True
    """
    import llvmlite.binding as llvm

    features = dict(llvm.get_host_cpu_features())
    return classify(llvm.get_host_cpu_name(), features, platform.machine(), _cpu_model())
