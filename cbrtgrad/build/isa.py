"""The vector ISA numba compiles the kernels for, as LLVM (through llvmlite) sees it, in one place.

The kernels choose their SIMD width from this, the ``info`` and ``bench``
commands print it beside every figure, and the tests read it to know which
code path the machine runs. LLVM's feature list is what numba compiles for,
so it is the right source (``/proc/cpuinfo`` exists only on Linux, and a
hypervisor may hide flags there that LLVM also does not use). That is the
host CPU's, unless numba is told to compile for another: ``NUMBA_CPU_NAME``
and ``NUMBA_CPU_FEATURES`` (a portable cache, or another CPU's code path
run here), which numba's target follows and so does this.
"""

from __future__ import annotations

import dataclasses
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
    configured : bool
        Whether ``NUMBA_CPU_NAME`` or ``NUMBA_CPU_FEATURES`` chose the
        target rather than the host (the code then is another CPU's, run on
        ``model``).
    """

    cpu: str
    model: str
    name: str
    vector_bits: int
    fma: bool
    packed_int64_float: bool
    configured: bool = False

    def describe(self) -> str:
        """One line for tables: model, LLVM name, ISA and vector width.

        Examples
        --------
        >>> "bit" in host_isa().describe()
        True
        """
        if self.configured:
            model = f"{self.model}, compiling for {self.cpu} (NUMBA_CPU_NAME/NUMBA_CPU_FEATURES)"
        else:
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


def parse_features(text: str) -> dict[str, bool]:
    """LLVM's feature string, as ``NUMBA_CPU_FEATURES`` gives it, as a feature map.

    Parameters
    ----------
    text : str
        Comma-separated features, each ``+name`` (on) or ``-name`` (off).

    Returns
    -------
    dict
        ``{name: enabled}``.

    Raises
    ------
    ValueError
        For an entry without its ``+`` or ``-`` (numba would hand LLVM a
        string it does not read as meant).

    Examples
    --------
    >>> parse_features("+avx2,+fma,-avx512f")
    {'avx2': True, 'fma': True, 'avx512f': False}
    """
    features = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        if entry[0] not in "+-" or len(entry) == 1:
            raise ValueError(
                f"NUMBA_CPU_FEATURES must be +name or -name entries separated by commas, "
                f"got {entry!r} in {text!r}"
            )
        features[entry[1:]] = entry[0] == "+"
    return features


@lru_cache(maxsize=1)
def host_isa() -> HostIsa:
    """The vector ISA numba compiles for, read once from LLVM and numba's settings.

    The host CPU's name and features, or those ``NUMBA_CPU_NAME`` and
    ``NUMBA_CPU_FEATURES`` give, each on its own, as numba's CPU target takes
    them (``numba.core.codegen.JITCPUCodegen``): the kernels' SIMD shape must be
    the one for the code numba makes, not for the silicon under it.

    Returns
    -------
    HostIsa

    Examples
    --------
    >>> host_isa().vector_bits in (0, 128, 256, 512)
    True
    """
    import llvmlite.binding as llvm
    from numba.core import config

    # numba sets these from its environment and config file at import.
    name: str | None = getattr(config, "CPU_NAME", None)
    text: str | None = getattr(config, "CPU_FEATURES", None)
    features = parse_features(text) if text is not None else dict(llvm.get_host_cpu_features())
    isa = classify(name or llvm.get_host_cpu_name(), features, platform.machine(), _cpu_model())
    if name is None and text is None:
        return isa
    return dataclasses.replace(isa, configured=True)
